/**
 * `npm run build` (also run by `npm ci` through the `prepare` script): bundles the `kessai` command
 * (src/cli/main.ts and what it imports) into dist/ with esbuild, so bin/kessai.mjs runs plain
 * JavaScript and no TypeScript loader. One ES module per command's lazily imported part (code
 * splitting), npm packages left as imports of node_modules. Why a bundle and not tsc: see
 * docs/decisions/operating.md, "Commands run a bundle built at install".
 *
 * Safe beside a running kessai and beside another build: every emitted file's name carries its
 * content hash and is moved into dist/ whole (rename), the entry dist/kessai.mjs last; files of
 * older builds are removed only once they are an hour old (a running `serve` may still import a
 * lazy chunk of its own build).
 *
 * `node --import tsx scripts/build.ts --if-stale` builds only when the inputs recorded by the last
 * build (every project file bundled, this script, the lockfile) changed: the test suite's global
 * setup calls `ensureBuilt()` for the tests that spawn bin/kessai.mjs.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { openStore } from '../src/db/connect';
import { migrate, readMigrations } from '../src/db/migrate';
import { pgliteTemplateName, pgliteVersion } from '../src/db/pglite-template';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const DIST = join(ROOT, 'dist');
const ENTRY = join(DIST, 'kessai.mjs');
const INFO = join(DIST, 'build-info.json');
/** Inputs besides the bundled sources that change what a build produces. */
const TOOL_INPUTS = ['scripts/build.ts', 'package-lock.json'];
/** The migrations: the template database in dist/ holds them (ensurePgliteTemplate). */
const migrationInputs = (): string[] => readdirSync(join(ROOT, 'sql')).filter((name) => name.endsWith('.sql')).sort().map((name) => `sql/${name}`);
const KEEP_OLD_FILES_MS = 60 * 60 * 1000;
/**
 * Packages left as imports of node_modules: PGlite reads its WebAssembly and data files beside its
 * own modules; pino starts its transports from files of its package; Vega and Vega-Lite are large
 * ES modules loaded only by reports.
 */
const EXTERNAL_PACKAGES = ['@electric-sql/pglite', 'pino', 'vega', 'vega-lite'];

interface BuildInfo {
  /** Project files (relative to the root) whose contents made this build. */
  readonly inputs: readonly string[];
  /** sha256 of those files' contents, in that order. */
  readonly digest: string;
  /** The module dist/kessai.mjs imports. */
  readonly main: string;
  /** Every file this build wrote into dist/. */
  readonly files: readonly string[];
}

function digestOf(inputs: readonly string[]): string | undefined {
  const hash = createHash('sha256');
  for (const input of inputs) {
    const file = join(ROOT, input);
    if (!existsSync(file)) return undefined;
    hash.update(input).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex');
}

function readInfo(): BuildInfo | undefined {
  try {
    return JSON.parse(readFileSync(INFO, 'utf8')) as BuildInfo;
  } catch {
    return undefined;
  }
}

/** Whether dist/ holds a build of the current sources. */
export function buildIsCurrent(): boolean {
  const info = readInfo();
  if (info === undefined || !existsSync(ENTRY) || !info.files.every((file) => existsSync(join(DIST, file)))) return false;
  // A migration added since: not among the recorded inputs, so the digest alone would not see it.
  const migrations = migrationInputs();
  if (migrations.some((file) => !info.inputs.includes(file)) || info.inputs.filter((file) => file.startsWith('sql/')).length !== migrations.length) return false;
  return digestOf(info.inputs) === info.digest;
}

/** Writes `text` to `file` whole: a reader sees the old file or the new one, never a part. */
function writeWhole(file: string, text: string | Uint8Array): void {
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, text);
  renameSync(temporary, file);
}

export async function buildKessai(): Promise<BuildInfo> {
  mkdirSync(DIST, { recursive: true });
  const staging = mkdtempSync(join(DIST, '.staging-'));
  try {
    const result = await build({
      absWorkingDir: ROOT,
      entryPoints: { main: 'src/cli/main.ts' },
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20.19',
      // npm packages are bundled too (half the CPU of a command's start-up: see the decision
      // record), except those that load files of their own package by path at run time.
      external: EXTERNAL_PACKAGES,
      // What bundled CommonJS packages `require` (node's built-ins) needs a require in an ES module.
      banner: { js: "import { createRequire as __kessaiRequire } from 'node:module';\nconst require = __kessaiRequire(import.meta.url);" },
      outdir: staging,
      entryNames: '[name]-[hash]',
      chunkNames: 'chunk-[hash]',
      outExtension: { '.js': '.mjs' },
      sourcemap: 'linked',
      legalComments: 'none',
      metafile: true,
      logLevel: 'warning',
    });
    const files = readdirSync(staging);
    for (const file of files) {
      const target = join(DIST, file);
      // Same name, same content (the name carries its hash): an existing file stays untouched.
      if (existsSync(target)) rmSync(join(staging, file));
      else renameSync(join(staging, file), target);
    }
    const main = files.find((file) => /^main-[A-Z0-9]+\.mjs$/.test(file));
    if (main === undefined) throw new Error(`the build wrote no main module (${files.join(', ')})`);
    const inputs = [...Object.keys(result.metafile.inputs).filter((input) => !input.startsWith('node_modules/')).sort(), ...migrationInputs(), ...TOOL_INPUTS];
    const template = await ensurePgliteTemplate();
    const info: BuildInfo = { inputs, digest: digestOf(inputs)!, main, files: [...files, template] };
    writeWhole(ENTRY, `// Generated by scripts/build.ts (npm run build); do not edit.\nexport * from './${main}';\n`);
    writeWhole(INFO, `${JSON.stringify(info, null, 2)}\n`);
    removeOldFiles(new Set([...info.files, 'kessai.mjs', 'build-info.json']));
    return info;
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/**
 * The migrated embedded database a new data folder starts from (src/db/pglite-template.ts), written
 * when PGlite or sql/ changed: initdb's and the migrations' seconds are spent here, not by the
 * first command. Returns its file name in dist/.
 */
async function ensurePgliteTemplate(): Promise<string> {
  const name = pgliteTemplateName(pgliteVersion(), readMigrations());
  const file = join(DIST, name);
  if (existsSync(file)) return name;
  const store = await openStore({ dataDir: 'memory://' });
  try {
    await migrate(store);
    writeWhole(file, new Uint8Array(await (await store.snapshot!('gzip')).arrayBuffer()));
  } finally {
    await store.close();
  }
  return name;
}

/** Files of earlier builds, once they are old enough that no running process still loads them. */
function removeOldFiles(current: ReadonlySet<string>): void {
  const now = Date.now();
  for (const file of readdirSync(DIST)) {
    if (current.has(file) || file.startsWith('.staging-')) continue;
    const path = join(DIST, file);
    if (now - statSync(path).mtimeMs > KEEP_OLD_FILES_MS) rmSync(path, { recursive: true, force: true });
  }
}

/** Builds when dist/ does not hold a build of the current sources; says which it did. */
export async function ensureBuilt(): Promise<'current' | 'built'> {
  if (buildIsCurrent()) return 'current';
  await buildKessai();
  return 'built';
}

const invokedDirectly = process.argv[1] !== undefined && relative(fileURLToPath(import.meta.url), process.argv[1]) === '';
if (invokedDirectly) {
  const started = performance.now();
  const outcome = process.argv.includes('--if-stale') ? await ensureBuilt() : (await buildKessai(), 'built');
  console.log(`kessai: ${outcome === 'current' ? 'dist/ is current' : `built dist/ in ${Math.round(performance.now() - started)} ms`}`);
}
