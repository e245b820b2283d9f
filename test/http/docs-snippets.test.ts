/**
 * The README's tour and the SDK snippets of docs/v1-api.md and docs/v2-api.md work as pasted, on
 * the server a newcomer starts: the tour's two commands run in a fresh folder (the account's keys
 * written to `.kessai/demo-keys.json`, then `kessai serve` on the embedded database, its
 * development rate-limit profile), and each snippet is cut out of its page, pointed at that server
 * instead of port 4010, and run with node against the installed `payjp` / `@payjp/payjpv2`. Its
 * output must be what its comments say; any refusal (a 429 among them) would throw or print
 * something else.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnShell, until, type SpawnedWorker } from '../support/spawn-worker';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'kessai.mjs');
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

/** The fenced block of `lang` that starts with `start`. */
function block(markdown: string, lang: string, start: string): string {
  const found = [...markdown.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((match) => match[1]!).find((code) => code.startsWith(start));
  if (found === undefined) throw new Error(`no ${lang} block starting with ${start}`);
  return found;
}

/** What the snippet's `console.log(…); // text` lines promise it prints. */
const promised = (code: string) => [...code.matchAll(/console\.log\(.*\); \/\/ (.*)$/gm)].map((match) => match[1]!);

/** The tour's commands, as pasted but with the checkout's bin named absolutely (they run in `dir`). */
function tourCommands(): { create: string; serve: string } {
  const tour = block(read('README.md'), 'sh', '# create an account').split('\n').filter((text) => text !== '' && !text.startsWith('#'));
  expect(tour).toHaveLength(2);
  const [create, serve] = tour.map((text) => text.replaceAll('./bin/kessai.mjs', BIN)) as [string, string];
  expect(serve).toContain('--port 4010');
  return { create, serve: serve.replace('--port 4010', '--port 0') };
}

describe('the README tour and the docs SDK snippets, on the embedded kessai serve', () => {
  let dir: string;
  let server: SpawnedWorker;
  let base: string;
  /** A newcomer's shell: no database URL (the embedded database in ./.kessai), no rate-limit settings. */
  const shellEnv = { DATABASE_URL: undefined, KESSAI_DATA_DIR: undefined, KESSAI_RATE_LIMITS: undefined, KESSAI_RATE_LIMIT_PROFILE: undefined, KESSAI_LOG_LEVEL: 'warn' };

  beforeAll(async () => {
    // Inside the checkout, so that the snippets' imports resolve to its node_modules.
    dir = mkdtempSync(join(ROOT, '.docs-snippets-'));
    const { create, serve } = tourCommands();
    const created = spawnShell(create, shellEnv, { cwd: dir });
    expect((await created.exited).code, created.errors()).toBe(0);
    expect(JSON.parse(readFileSync(join(dir, '.kessai', 'demo-keys.json'), 'utf8'))).toMatchObject({ keys: { test: { secret: expect.stringMatching(/^sk_test_/) } } });
    server = spawnShell(serve, shellEnv, { cwd: dir });
    // The development server's block comes after the listening line.
    await until(server, () => server.output().includes('rate limits:      development'));
    base = /kessai v1 API on (http:\/\/\S+)\/v1 /.exec(server.output())![1]!;
  }, 180_000);
  afterAll(async () => {
    if (server !== undefined && server.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await server.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  /** Writes the snippet into the folder with the server's address for port 4010's, runs it, returns its lines. */
  async function run(name: string, code: string): Promise<string[]> {
    expect(code).toContain('http://127.0.0.1:4010');
    writeFileSync(join(dir, name), code.replaceAll('http://127.0.0.1:4010', base));
    const { stdout } = await promisify(execFile)(process.execPath, [name], { cwd: dir, timeout: 60_000 });
    return stdout.trim().split('\n');
  }

  it('docs/v1-api.md: the payjp demo charges 1,200 yen and reads a 404 as invalid_id', async () => {
    const code = block(read('docs/v1-api.md'), 'js', '// demo.mjs');
    const lines = await run('demo.mjs', code);
    expect(promised(code)).toEqual(['404 invalid_id']);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^ch_\w+ 1200 true$/);
    expect(lines[1]).toBe('404 invalid_id');
  });

  it('docs/v2-api.md: the payment flow demo holds 5,000 yen and captures 3,000', async () => {
    const code = block(read('docs/v2-api.md'), 'js', '// demo-v2.mjs');
    expect(promised(code)).toEqual(['requires_capture 3000 2000', '404 Not Found']);
    expect(await run('demo-v2.mjs', code)).toEqual(promised(code));
  });

  it('docs/v2-api.md: the checkout demo prints a session on the serving kessai (the hosted page)', async () => {
    const code = block(read('docs/v2-api.md'), 'js', '// demo-checkout.mjs');
    expect(code.match(/http:\/\/127\.0\.0\.1:4010/g)).toHaveLength(2);
    expect(promised(code)).toEqual(['2400 true']);
    expect(await run('demo-checkout.mjs', code)).toEqual(promised(code));
  });

  it('the snippets ran again back to back still get no 429 (the development profile)', async () => {
    // Three runs of each, one after another as fast as they go: about 30 requests in a few seconds,
    // over the spec profile's 2 a second in test mode.
    for (let i = 0; i < 3; i += 1) {
      expect(await run('demo-v2.mjs', block(read('docs/v2-api.md'), 'js', '// demo-v2.mjs'))).toEqual(['requires_capture 3000 2000', '404 Not Found']);
      expect((await run('demo.mjs', block(read('docs/v1-api.md'), 'js', '// demo.mjs')))[1]).toBe('404 invalid_id');
    }
    expect(server.errors()).not.toMatch(/over_capacity/);
  }, 120_000);
});
