/**
 * The v2 snippets of docs/v2-api.md work as pasted: each is cut out of the page,
 * pointed at a real test server instead of port 4010, and run with node against the installed
 * `@payjp/payjpv2`; its output must be what its comments say.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/http-server';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The fenced block that starts with `// <name>`. */
function snippet(markdown: string, name: string): string {
  const block = [...markdown.matchAll(/```js\n([\s\S]*?)```/g)].map((match) => match[1]!).find((code) => code.startsWith(`// ${name}`));
  if (block === undefined) throw new Error(`docs/v2-api.md has no js block starting with // ${name}`);
  return block;
}

/** Where the README's tour keeps the keys: in the data folder (.kessai/, ignored by git), never in the checkout itself. */
function writeKeys(dir: string, keys: unknown): void {
  mkdirSync(join(dir, '.kessai'), { recursive: true });
  writeFileSync(join(dir, '.kessai', 'demo-keys.json'), JSON.stringify({ keys }));
}

describe('docs/v2-api.md snippets', () => {
  let server: TestServer;
  let dir: string;

  beforeAll(async () => {
    server = await startTestServer('pglite');
    // Inside the checkout, so that `import '@payjp/payjpv2'` resolves to its node_modules.
    dir = mkdtempSync(join(ROOT, '.readme-v2-'));
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await server?.close();
  });

  it('runs as pasted and prints what its comments say', async () => {
    const code = snippet(readFileSync(join(ROOT, 'docs', 'v2-api.md'), 'utf8'), 'demo-v2.mjs');
    expect(code).toContain("baseUrl: 'http://127.0.0.1:4010'");
    writeFileSync(join(dir, 'demo-v2.mjs'), code.replace('http://127.0.0.1:4010', server.baseUrl));
    writeKeys(dir, server.keys.a);
    const { stdout } = await promisify(execFile)(process.execPath, ['demo-v2.mjs'], { cwd: dir, timeout: 60_000 });
    const promised = [...code.matchAll(/console\.log\(.*\); \/\/ (.*)$/gm)].map((match) => match[1]);
    expect(stdout.trim().split('\n')).toEqual(promised);
    expect(promised).toEqual(['requires_capture 3000 2000', '404 Not Found']);
  });

  it('the checkout snippet prints a session url on the serving kessai (the hosted page)', async () => {
    const code = snippet(readFileSync(join(ROOT, 'docs', 'v2-api.md'), 'utf8'), 'demo-checkout.mjs');
    expect(code.match(/http:\/\/127\.0\.0\.1:4010/g)).toHaveLength(2);
    writeFileSync(join(dir, 'demo-checkout.mjs'), code.replaceAll('http://127.0.0.1:4010', server.baseUrl));
    writeKeys(dir, server.keys.a);
    const { stdout } = await promisify(execFile)(process.execPath, ['demo-checkout.mjs'], { cwd: dir, timeout: 60_000 });
    const promised = [...code.matchAll(/console\.log\(.*\); \/\/ (.*)$/gm)].map((match) => match[1]);
    expect(promised).toEqual(['2400 true']);
    expect(stdout.trim().split('\n')).toEqual(promised);
  });
});
