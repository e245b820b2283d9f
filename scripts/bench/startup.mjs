#!/usr/bin/env node
// `npm run bench:startup [-- --runs N]`: how long each kind of `kessai` command takes to start, as a
// user runs it (./bin/kessai.mjs, the build in dist/), each run a fresh process, beside the floors
// measured in the same run: a bare `node -e 0`, and a bare PGlite open (plus one query and close)
// of the same embedded data folder the embedded commands open, with PGlite's defaults and with
// the buffer pool kessai gives a data folder (the floor the embedded commands are compared with).
// Then `serve` as the README tour starts it (a new folder, the worker in the process scheduling every
// job for the first time), and the peak RSS of an embedded `migrate` from an empty folder. Targets (a quiet machine): --help ≤ 0.3 s above node -e 0; a
// PostgreSQL command ≤ 1 s; `serve` answering /health on PostgreSQL ≤ 1.5 s; an embedded command
// ≤ 1 s above the bare PGlite open; peak RSS of an embedded migrate ≤ 300 MB.
// PostgreSQL: a scratch database on DATABASE_URL's server (default the local one, user postgres),
// dropped at the end. Plain node, no TypeScript loader; builds dist/ first when it is stale.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';
import pg from 'pg';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'kessai.mjs');
const runsAt = process.argv.indexOf('--runs');
const RUNS = runsAt === -1 ? 5 : Number(process.argv[runsAt + 1]);
const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const withDatabase = (url, database) => Object.assign(new URL(url), { pathname: `/${database}` }).toString();
// Every child reports its own peak RSS when it exits (no wrapper process in the measurement).
const REPORT_RSS = `data:text/javascript,process.on('exit',()=>process.stderr.write('\\nmaxrss_kb='+process.resourceUsage().maxRSS+'\\n'))`;

const line = (text) => process.stdout.write(`${text}\n`);
const rssOf = (stderr) => Number(/maxrss_kb=(\d+)/.exec(stderr)?.[1] ?? NaN) / 1024;

/** One process to its exit: wall time (ms) and peak RSS (MB); a non-zero exit stops the bench. */
function timeProcess(args, env) {
  const started = performance.now();
  const result = spawnSync(process.execPath, ['--import', REPORT_RSS, ...args], { cwd: ROOT, env: { ...process.env, ...env }, encoding: 'utf8' });
  const ms = performance.now() - started;
  if (result.status !== 0) throw new Error(`${args.join(' ')} exited ${result.status}: ${result.stderr}`);
  return { ms, rss: rssOf(result.stderr) };
}

/** `kessai serve --port 0` (with `--no-worker` unless told otherwise) until GET /health answers 200 (ms), then SIGTERM and its exit. */
async function timeServe(env, options = ['--no-worker']) {
  const started = performance.now();
  const child = spawn(process.execPath, ['--import', REPORT_RSS, BIN, 'serve', '--port', '0', ...options], { env: { ...process.env, KESSAI_LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const base = await new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      const match = /API on (http:\/\/\S+)\/v1/.exec(stdout);
      if (match) resolve(match[1]);
    });
    void exited.then((code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
  });
  for (;;) {
    const answer = await globalThis.fetch(`${base}/health`).catch(() => undefined);
    if (answer?.status === 200) break;
    await sleep(10);
  }
  const ms = performance.now() - started;
  child.kill('SIGTERM');
  if ((await exited) !== 0) throw new Error(`serve did not stop cleanly: ${stderr}`);
  return { ms, rss: rssOf(stderr) };
}

/** The bare PGlite floor: import it, open the folder, one query, close. */
const PGLITE_OPEN = `import { PGlite } from '@electric-sql/pglite'; const db = new PGlite(process.argv[1]); await db.query('SELECT 1'); await db.close();`;
/**
 * The same with the buffer pool kessai gives a data folder (src/db/connect.ts,
 * DATA_FOLDER_SHARED_BUFFERS): the floor the embedded commands are held to, so that what they add
 * is not hidden by the pool PGlite's default open touches.
 */
const PGLITE_OPEN_AS_KESSAI = `import { PGlite } from '@electric-sql/pglite'; const db = new PGlite(process.argv[1], { startParams: [...PGlite.defaultStartParams, '-c', 'shared_buffers=16MB'] }); await db.query('SELECT 1'); await db.close();`;

async function measure(name, run, runs = RUNS) {
  const samples = [];
  for (let i = 0; i < runs; i += 1) samples.push(await run());
  const sorted = samples.map((s) => s.ms).sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)];
  return { name, median, min: sorted[0], max: sorted.at(-1), rss: Math.max(...samples.map((s) => s.rss)) };
}

const s = (ms) => (ms / 1000).toFixed(2);

async function main() {
  line(`kessai start-up, ${RUNS} runs each, median (min–max) wall seconds; load average ${loadavg().map((n) => n.toFixed(2)).join(' ')} (${new Date().toISOString()})`);
  const built = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts', 'build.ts'), '--if-stale'], { cwd: ROOT, encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`build failed: ${built.stderr}`);
  const dataDir = mkdtempSync(join(tmpdir(), 'kessai-startup-'));
  const emptyDir = () => mkdtempSync(join(tmpdir(), 'kessai-startup-empty-'));
  const database = `kessai_bench_startup_${process.pid}`;
  const admin = new pg.Client({ connectionString: SERVER });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${database}"`);
  const pgEnv = { DATABASE_URL: withDatabase(SERVER, database) };
  const embedded = { DATABASE_URL: '', KESSAI_DATA_DIR: dataDir };
  const rows = [];
  try {
    const kessai = (args, env) => () => timeProcess([BIN, ...args], env);
    // Set-up, not measured: both databases migrated, one account each.
    kessai(['migrate'], embedded)();
    kessai(['accounts', 'create', '--name', 'Bench Shop'], embedded)();
    kessai(['migrate'], pgEnv)();
    kessai(['accounts', 'create', '--name', 'Bench Shop'], pgEnv)();

    const node = await measure('node -e 0', () => timeProcess(['-e', '0'], {}));
    const pglite = await measure('bare PGlite open of the data folder (import, open, SELECT 1, close)', () => timeProcess(['--input-type=module', '-e', PGLITE_OPEN, dataDir], {}));
    const pgliteAsKessai = await measure('… with kessai\'s 16 MB buffer pool for data folders (the floor below)', () => timeProcess(['--input-type=module', '-e', PGLITE_OPEN_AS_KESSAI, dataDir], {}));
    rows.push([node, null, ''], [pglite, null, ''], [pgliteAsKessai, null, '']);
    const aboveNode = (r) => [r, node, 0.3];
    const abovePglite = (r) => [r, pgliteAsKessai, 1];
    const absolute = (limit) => (r) => [r, null, limit];
    rows.push(aboveNode(await measure('kessai --help', kessai(['--help'], embedded))));
    rows.push(aboveNode(await measure('kessai --version', kessai(['--version'], embedded))));
    rows.push(absolute(1)(await measure('accounts list (PostgreSQL)', kessai(['accounts', 'list'], pgEnv))));
    rows.push(absolute(1)(await measure('jobs list (PostgreSQL)', kessai(['jobs', 'list'], pgEnv))));
    rows.push(absolute(1)(await measure('migrate, up to date (PostgreSQL)', kessai(['migrate'], pgEnv))));
    rows.push(absolute(1.5)(await measure('serve until /health answers (PostgreSQL)', () => timeServe(pgEnv))));
    rows.push(abovePglite(await measure('accounts list (embedded)', kessai(['accounts', 'list'], embedded))));
    rows.push(abovePglite(await measure('jobs list (embedded)', kessai(['jobs', 'list'], embedded))));
    rows.push(abovePglite(await measure('migrate, up to date (embedded)', kessai(['migrate'], embedded))));
    rows.push(abovePglite(await measure('serve until /health answers (embedded)', () => timeServe(embedded))));
    // The newcomer's path: an account just created in a new folder, then `serve` as the README
    // starts it, with the worker in the process scheduling every job for the first time.
    rows.push(abovePglite(await measure('… with its worker, first start on a new folder (the README tour)', async () => {
      const dir = emptyDir();
      try {
        timeProcess([BIN, 'accounts', 'create', '--name', 'Tour Shop'], { DATABASE_URL: '', KESSAI_DATA_DIR: dir });
        return await timeServe({ DATABASE_URL: '', KESSAI_DATA_DIR: dir }, []);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    })));
    const fresh = await measure(
      'migrate from an empty folder (embedded)',
      () => {
        const dir = emptyDir();
        try {
          return timeProcess([BIN, 'migrate'], { DATABASE_URL: '', KESSAI_DATA_DIR: dir });
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      },
      Math.min(RUNS, 3),
    );
    rows.push([fresh, null, '']);

    line('');
    line(`${'what'.padEnd(72)} ${'median'.padStart(6)} ${'min–max'.padStart(11)} ${'above floor'.padStart(11)} ${'peak RSS'.padStart(9)}  target`);
    for (const [r, floor, limit] of rows) {
      const above = floor === null ? '' : `${s(r.median - floor.median)} s`;
      const measured = floor === null ? r.median : r.median - floor.median;
      const target = limit === '' ? '' : `${floor === null ? '≤' : `≤ ${floor === node ? 'node' : 'PGlite'} +`} ${limit} s: ${measured / 1000 <= limit ? 'met' : 'NOT met'}`;
      line(`${r.name.padEnd(72)} ${s(r.median).padStart(6)} ${`${s(r.min)}–${s(r.max)}`.padStart(11)} ${above.padStart(11)} ${`${r.rss.toFixed(0)} MB`.padStart(9)}  ${target}`);
    }
    line('');
    line(`peak RSS of an embedded migrate from empty: ${fresh.rss.toFixed(0)} MB (target ≤ 300 MB: ${fresh.rss <= 300 ? 'met' : 'NOT met'})`);
    line(`load average at the end: ${loadavg().map((n) => n.toFixed(2)).join(' ')}`);
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
    await admin.end();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
