/**
 * `kessai serve` as a process: on the embedded database it serves the SDK and runs the worker,
 * answers /health, logs request ids without keys, stops on SIGTERM after in-flight work, and
 * refuses a non-loopback address without TLS.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Payjp from 'payjp';
import { afterAll, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), 'kessai-serve-'));
const env = { ...process.env, DATABASE_URL: '', KESSAI_DATA_DIR: dataDir, KESSAI_LOG_LEVEL: 'info', KESSAI_STATEMENT_URL_SECRET: 'serve-test-secret-0123' };
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** `kessai serve ARGS` as a child process, once its start-up line (matching `started`) is printed: group 1 of the match. */
async function startServe(args: readonly string[], started: RegExp) {
  const child = spawn(process.execPath, [BIN, 'serve', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const output = { stdout: '', stderr: '' };
  child.stderr.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output.stdout += chunk.toString();
      const match = started.exec(output.stdout);
      if (match) resolve(match[1]!);
    });
    child.on('exit', (code) => reject(new Error(`serve exited with ${code}: ${output.stderr}`)));
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { child, url, output, exited };
}

it('serves the SDK on the embedded database with the worker in-process, and stops on SIGTERM', async () => {
  const created = spawnSync(process.execPath, [BIN, 'accounts', 'create', '--name', 'Serve Shop', '--json'], { env, encoding: 'utf8', timeout: 60_000 });
  expect(created.status).toBe(0);
  const { keys } = JSON.parse(created.stdout) as { keys: { test: { secret: string } } };
  const { child, url, output, exited } = await startServe(['--port', '0'], /on (http:\/\/\S+\/v1) \(pglite .*worker in this process\)/);
  try {
    expect(await (await fetch(url.replace(/\/v1$/, '/health'))).json()).toEqual({ status: 'ok' });
    const payjp = Payjp(keys.test.secret, { apibase: url });
    const plan = await payjp.plans.create({ amount: 980, currency: 'jpy', interval: 'month' });
    expect(plan.object).toBe('plan');
    const pending = payjp.plans.list();
    child.kill('SIGTERM');
    expect((await pending).object).toBe('list');
    expect(await exited).toBe(0);
  } finally {
    child.kill('SIGKILL');
  }
  expect(output.stderr).toMatch(/"request_id":"req_[0-9a-f-]+"/);
  expect(output.stderr).toContain('slot succeeded');
  expect(output.stderr).not.toContain(keys.test.secret);
  expect(output.stderr).not.toMatch(/Basic [A-Za-z0-9+/=]{8,}/);
}, 90_000);

it('refuses a non-loopback address without TLS unless --insecure-http is given', () => {
  const refused = spawnSync(process.execPath, [BIN, 'serve', '--host', '0.0.0.0', '--port', '0'], { env, encoding: 'utf8', timeout: 60_000 });
  expect(refused.status).toBe(1);
  expect(refused.stderr).toContain('without TLS');
});

it('--public-url sets the checkout session url to the address buyers reach; the page is served here; a bad URL is refused first', async () => {
  const created = spawnSync(process.execPath, [BIN, 'accounts', 'create', '--name', 'Checkout Serve Shop', '--json'], { env, encoding: 'utf8', timeout: 60_000 });
  expect(created.status).toBe(0);
  const { keys } = JSON.parse(created.stdout) as { keys: { test: { secret: string } } };
  const { child, url: base, exited } = await startServe(['--port', '0', '--no-worker', '--public-url', 'https://pay.example.com/shop/'], /on (http:\/\/\S+)\/v1 /);
  try {
    const post = async (path: string, body: object) =>
      (await fetch(`${base}/v2${path}`, { method: 'POST', headers: { authorization: `Bearer ${keys.test.secret}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })).json() as Promise<Record<string, unknown>>;
    const price = await post('/prices', { unit_amount: 800, currency: 'jpy' });
    const session = await post('/checkout/sessions', { mode: 'payment', line_items: [{ price_id: price.id, quantity: 1 }], success_url: 'https://shop.example/ok' });
    expect(session.url).toBe(`https://pay.example.com/shop/checkout/pay/${String(session.id)}`);
    // The same page, reached here directly (the proxy's job in production).
    const page = await fetch(`${base}/checkout/pay/${String(session.id)}`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await page.text()).toContain('¥800');
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  } finally {
    child.kill('SIGKILL');
  }
  const refused = spawnSync(process.execPath, [BIN, 'serve', '--port', '0', '--public-url', 'ftp://pay.example.com'], { env, encoding: 'utf8', timeout: 60_000 });
  expect(refused.status).toBe(1);
  expect(refused.stderr).toContain('the public URL must be an http(s) address');
}, 90_000);
