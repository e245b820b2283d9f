#!/usr/bin/env node
// Where an embedded command's start-up goes (issue 14, point 7): times each phase of what
// `./bin/kessai.mjs accounts list` does on a fresh process, in the order it does it, and prints
// each phase's share. Plain node (not tsx): the first phase is tsx's own registration.
// Usage: node scripts/bench/startup.mjs [data dir, default a fresh folder under the temp dir]
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { URL } from 'node:url';

const root = new URL('../../', import.meta.url);
const dataDir = process.argv[2] ?? mkdtempSync(join(tmpdir(), 'kessai-startup-'));
const phases = [];
let last = performance.now();
const mark = (name) => {
  const now = performance.now();
  phases.push([name, now - last]);
  last = now;
};
const { register } = await import('tsx/esm/api');
register();
mark('tsx register');
for (const dep of ['kysely', 'pg', '@electric-sql/pglite', 'pino', 'cron-parser', 'node-cron', 'commander', 'decimal.js', '@holiday-jp/holiday_jp']) await import(dep);
mark('npm dependencies through tsx hooks');
await import(new URL('src/cli/main.ts', root).href);
mark('project modules (main.ts and what it imports)');
const { openStore } = await import(new URL('src/db/connect.ts', root).href);
const { migrate } = await import(new URL('src/db/migrate.ts', root).href);
const first = await openStore({ dataDir });
await migrate(first);
await first.close();
mark('(not timed as a phase: a first run creates and migrates the data folder)');
phases.pop();
last = performance.now();
const store = await openStore({ dataDir });
mark('PGlite open of an existing data folder');
await migrate(store);
mark('migration check (up to date)');
await store.close();
mark('close');
const total = phases.reduce((sum, [, ms]) => sum + ms, 0);
for (const [name, ms] of phases) process.stdout.write(`${(ms / 1000).toFixed(2).padStart(6)} s  ${((ms / total) * 100).toFixed(0).padStart(3)} %  ${name}\n`);
process.stdout.write(`${(total / 1000).toFixed(2).padStart(6)} s  total (node's own start-up not included)\n`);
