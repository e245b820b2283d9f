#!/usr/bin/env node
// The `kessai` command: runs the JavaScript bundle in dist/, which `npm ci` (its `prepare` script) and
// `npm run build` write from the TypeScript in src/ (scripts/build.ts). No TypeScript loader runs here.
// Not `npx kessai`: that looks an unlinked name up on the package registry.
import { existsSync } from 'node:fs';
import { fileURLToPath, URL } from 'node:url';

const entry = new URL('../dist/kessai.mjs', import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  console.error('kessai: not built yet: run `npm run build` (npm ci does it) in this checkout');
  process.exit(1);
}
// Stack traces name the TypeScript sources when asked for (the bundle carries source maps).
if (process.argv.includes('--verbose')) process.setSourceMapsEnabled(true);
const { main } = await import(entry.href);
process.exit(await main(process.argv));
