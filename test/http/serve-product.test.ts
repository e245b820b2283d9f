/**
 * `kessai` as a product: commands run the build without a TypeScript loader; `serve` says at once
 * when its port is taken; on the embedded database it is a development server (the development
 * rate-limit profile lets the SDKs run flat out, `spec` still limits at v1 §8's values, webhooks
 * go out within about a second); SIGTERM drains: every request received is answered as usual,
 * a later one is refused cleanly, and the money is exactly as without the signal.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { createClient, createPaymentMethod } from '@payjp/payjpv2';
import Payjp from 'payjp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, isPostgres, type TestDatabase } from '../support/database';
import { startServe } from '../support/spawn-worker';
import { startReceiver } from '../support/webhook-receiver';

const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), 'kessai-product-'));
const env = { DATABASE_URL: '', KESSAI_DATA_DIR: dataDir, KESSAI_LOG_LEVEL: 'info', KESSAI_RATE_LIMITS: '' };
let keys: { test: { secret: string } };
let accountId: string;
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/**
 * Preloaded into a child: records every module-loader hook registered (tsx registers one) and, at
 * exit, prints the process's argv, execArgv and those registrations on stderr.
 */
const LOADER_PROBE =
  "data:text/javascript,import module from 'node:module'; const hooks = []; const register = module.register; module.register = (...a) => { hooks.push(String(a[0])); return register(...a); };" +
  " process.on('exit', () => process.stderr.write('\\nPROBE ' + JSON.stringify({ argv: process.argv, execArgv: process.execArgv, hooks }) + '\\n'));";

function kessai(args: readonly string[], extra: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, ['--import', LOADER_PROBE, BIN, ...args], { env: { ...process.env, ...env, ...extra }, encoding: 'utf8', timeout: 120_000 });
  const probe = JSON.parse(/PROBE (.*)/.exec(result.stderr)![1]!) as { argv: string[]; execArgv: string[]; hooks: string[] };
  return { ...result, probe };
}

beforeAll(() => {
  // --json without a redirect still prints the keys (shown once).
  const created = kessai(['accounts', 'create', '--name', 'Product Shop', '--json']);
  expect(created.status).toBe(0);
  const parsed = JSON.parse(created.stdout) as { account: { id: string }; keys: typeof keys };
  keys = parsed.keys;
  accountId = parsed.account.id;
}, 180_000);

it('--help and a database command run the build in dist/, with no TypeScript loader in the process', () => {
  // The probe can say "yes": a process that registers tsx shows its hook.
  const withTsx = spawnSync(process.execPath, ['--import', LOADER_PROBE, '--import', 'tsx', '-e', '0'], { encoding: 'utf8' });
  expect(/PROBE (.*)/.exec(withTsx.stderr)![1]).toMatch(/tsx/);
  for (const args of [['--help'], ['accounts', 'list']]) {
    const run = kessai(args);
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.stringify(run.probe)).not.toMatch(/tsx|\.ts\b/);
    expect(run.probe.hooks).toEqual([]);
  }
  expect(kessai(['--help']).stdout).toContain('Usage: kessai');
  expect(kessai(['accounts', 'list']).stdout).toContain(accountId);
}, 180_000);

it('a port in use: serve exits non-zero with one clear line, before loading anything slow', async () => {
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const port = (holder.address() as { port: number }).port;
  try {
    const floor = performance.now();
    spawnSync(process.execPath, ['-e', '0']);
    const nodeAlone = performance.now() - floor;
    const started = performance.now();
    const run = spawnSync(process.execPath, [BIN, 'serve', '--port', String(port)], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 });
    const took = performance.now() - started;
    expect(run.status).toBe(1);
    expect(run.stderr.trim().split('\n')).toEqual([`kessai: port ${port} on 127.0.0.1 is in use (another kessai serve?): stop that process or choose another --port`]);
    // Within a second of a bare node start (the machine's load is in both).
    expect(took - nodeAlone).toBeLessThan(1_000);
  } finally {
    holder.close();
  }
}, 60_000);

it('embedded serve: the development profile lets 50 SDK calls of each SDK through; a webhook reaches a local receiver within 2 s', async () => {
  const receiver = await startReceiver();
  const added = kessai(['webhooks', 'add', accountId, '--url', `${receiver.url}/hook`]);
  expect(added.status, added.stderr).toBe(0);
  const { server, apibase } = await startServe([], env);
  try {
    await expect.poll(() => server.output(), { timeout: 30_000, interval: 20 }).toContain('Development server on the embedded database');
    expect(server.output()).toContain(`apibase: '${apibase}'`);
    expect(server.output()).toContain('rate limits:      development');
    const payjp = Payjp(keys.test.secret, { apibase, maxRetry: 0 });
    const client = createClient({ apiKey: keys.test.secret, baseUrl: apibase.replace(/\/v1$/, '') });
    const statuses: number[] = [];
    for (let i = 0; i < 50; i += 1) {
      const { response } = await createPaymentMethod({ client, body: { type: 'card', card: { number: '4242424242424242', exp_month: 12, exp_year: 2035, cvc: '123' }, billing_details: { email: 'buyer@example.com' } } });
      statuses.push(response.status);
    }
    await Promise.all(Array.from({ length: 50 }, () => payjp.plans.list({ limit: 1 }).then(() => statuses.push(200), (error: { status: number }) => statuses.push(error.status))));
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
    // A new event goes out within about a second (the in-process poller), not on the minute.
    const before = receiver.received.length;
    const sent = performance.now();
    const customer = await payjp.customers.create({ email: 'hook@example.com' });
    await receiver.until(before + 1);
    const latency = performance.now() - sent;
    expect(receiver.received.some((request) => request.body.includes(customer.id))).toBe(true);
    expect(latency).toBeLessThan(2_000);
    server.child.kill('SIGTERM');
    expect((await server.exited).code).toBe(0);
  } finally {
    server.child.kill('SIGKILL');
    await receiver.close();
  }
}, 240_000);

it('embedded serve --rate-limits spec still limits test mode at v1 §8\'s 2 requests a second (over_capacity)', async () => {
  const { server, apibase } = await startServe(['--rate-limits', 'spec', '--no-worker'], env);
  try {
    const payjp = Payjp(keys.test.secret, { apibase, maxRetry: 0 });
    const outcomes = await Promise.all(Array.from({ length: 6 }, () => payjp.plans.list({ limit: 1 }).then(() => 'ok', (error: { status: number; response: { body: { error: { code: string } } } }) => `${error.status} ${error.response.body.error.code}`)));
    expect(outcomes).toContain('429 over_capacity');
    server.child.kill('SIGTERM');
    expect((await server.exited).code).toBe(0);
  } finally {
    server.child.kill('SIGKILL');
  }
}, 240_000);

/** One response read off a raw connection: status, lower-cased headers, body. */
interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/**
 * A raw keep-alive connection: the test decides when each byte is sent. `ended` resolves once the
 * server closes it, with every final response read (a 100 Continue is noted apart) and how it
 * ended: 'end' (a clean close) or the socket error's code (a reset).
 */
async function rawConnection(port: number) {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let data = '';
  const waiters: Array<() => void> = [];
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => {
    data += chunk;
    for (const wake of waiters.splice(0)) wake();
  });
  const ended = new Promise<{ responses: RawResponse[]; end: string }>((resolve) => {
    let end = 'end';
    socket.on('error', (error: NodeJS.ErrnoException) => (end = error.code ?? error.message));
    socket.on('close', () => resolve({ responses: parseResponses(data), end }));
  });
  return {
    send: (text: string) => socket.write(text),
    /** Resolves once the server's bytes so far contain `text`. */
    async saw(text: string): Promise<void> {
      while (!data.includes(text)) await new Promise<void>((wake) => waiters.push(wake));
    },
    ended,
  };
}

function parseResponses(data: string): RawResponse[] {
  const responses: RawResponse[] = [];
  let rest = data;
  while (rest.length > 0) {
    const head = rest.indexOf('\r\n\r\n');
    if (head < 0) throw new Error(`a truncated response: ${JSON.stringify(rest)}`);
    const [statusLine, ...lines] = rest.slice(0, head).split('\r\n');
    const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
    const status = Number(statusLine!.split(' ')[1]);
    const length = Number(headers['content-length'] ?? 0);
    const body = rest.slice(head + 4, head + 4 + length);
    if (body.length < length) throw new Error(`a truncated body: ${JSON.stringify(rest)}`);
    rest = rest.slice(head + 4 + length);
    if (status !== 100) responses.push({ status, headers, body });
  }
  return responses;
}

const request = (method: string, path: string, secret: string, body = '', extra = '') =>
  `${method} ${path} HTTP/1.1\r\nHost: kessai\r\nAuthorization: Bearer ${secret}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

const BACKENDS = [
  { name: 'the embedded database', postgres: false },
  { name: 'PostgreSQL', postgres: true },
] as const;

describe.each(BACKENDS)('SIGTERM drains on $name', ({ postgres }) => {
  let database: TestDatabase | undefined;
  let serveEnv: Record<string, string>;
  let secret: string;
  beforeAll(async () => {
    if (!postgres) {
      serveEnv = env;
      secret = keys.test.secret;
      return;
    }
    if (!isPostgres()) return;
    database = await createTestDatabase();
    serveEnv = { DATABASE_URL: database.url!, KESSAI_LOG_LEVEL: 'info', KESSAI_RATE_LIMITS: '', KESSAI_RATE_LIMIT_PROFILE: 'development' };
    const created = kessai(['accounts', 'create', '--name', 'Drain Shop', '--json'], serveEnv);
    expect(created.status, created.stderr).toBe(0);
    secret = (JSON.parse(created.stdout) as { keys: typeof keys }).keys.test.secret;
  }, 120_000);
  afterAll(async () => database?.drop());

  it.runIf(!postgres || isPostgres())('every request received is answered as usual (gated charges, a body still arriving, a request queued behind another on a keep-alive connection); a later one is refused cleanly; the money is exact', async () => {
    const gate = join(dataDir, `gate-open-${postgres ? 'pg' : 'embedded'}`);
    rmSync(gate, { force: true });
    const { server, apibase } = await startServe(['--no-worker'], { ...serveEnv, KESSAI_TEST_NETWORK_GATE: gate });
    const origin = apibase.replace(/\/v1$/, '');
    const port = Number(new URL(origin).port);
    const payjp = Payjp(secret, { apibase, maxRetry: 0 });
    const waiting = () => server.errors().split('network gate: authorization waiting').length - 1;
    let customerId = '';
    try {
      const token = await payjp.tokens.create({ card: { number: '4242424242424242', exp_month: 12, exp_year: 2035, cvc: '123' } }, { 'X-Payjp-Direct-Token-Generate': 'true' });
      customerId = (await payjp.customers.create({ card: token.id })).id;
      const charge = (amount: number) => `amount=${amount}&currency=jpy&customer=${customerId}`;
      // 40 charges through the SDK, held at the card network.
      const charges = Array.from({ length: 40 }, (_, i) => payjp.charges.create({ amount: 1000 + i, currency: 'jpy', customer: customerId }).then((created) => ({ ok: true as const, charge: created }), (error: unknown) => ({ ok: false as const, error })));
      // A keep-alive connection with a charge held at the network and a second request queued behind it.
      const queued = await rawConnection(port);
      queued.send(request('POST', '/v1/charges', secret, charge(2000)) + request('GET', `/v1/customers/${customerId}`, secret));
      await expect.poll(waiting, { timeout: 120_000, interval: 50 }).toBe(41);
      // A keep-alive connection whose charge's body is still arriving when the signal lands: the
      // server has the headers (it said 100 Continue) and half of the body.
      const body = charge(3000);
      const arriving = await rawConnection(port);
      arriving.send(request('POST', '/v1/charges', secret, '', 'Expect: 100-continue\r\n').replace('Content-Length: 0', `Content-Length: ${body.length}`));
      await arriving.saw('100 Continue');
      arriving.send(body.slice(0, 10));
      // A keep-alive connection answered before the signal, idle when it lands.
      const idle = await rawConnection(port);
      idle.send(request('GET', `/v1/customers/${customerId}`, secret));
      await idle.saw(customerId);

      server.child.kill('SIGTERM');
      await expect.poll(() => server.errors(), { timeout: 30_000, interval: 20 }).toContain('stopping: answering the requests already received');
      arriving.send(body.slice(10));
      // After the signal: a new connection is refused by the operating system or answered 503 with
      // Retry-After; a new request on the idle keep-alive connection gets 503 with Retry-After.
      const late = await fetch(`${origin}/v1/charges`, { headers: { authorization: `Bearer ${secret}`, connection: 'close' } }).then(
        (response) => `${response.status} ${response.headers.get('retry-after')}`,
        (error: Error & { cause?: { code?: string } }) => error.cause?.code ?? error.message,
      );
      expect(['ECONNREFUSED', '503 1']).toContain(late);
      idle.send(request('GET', `/v1/customers/${customerId}`, secret));
      await expect.poll(waiting, { timeout: 30_000, interval: 50 }).toBe(42);
      writeFileSync(gate, 'open');

      const answered = await Promise.all(charges);
      expect(answered.filter((outcome) => !outcome.ok)).toEqual([]);
      expect(answered.map((outcome) => (outcome.ok ? outcome.charge.captured && outcome.charge.paid : false))).toEqual(Array(40).fill(true));
      // What each connection got, all at once: the pipelined pair answered in order; the charge
      // whose body was arriving answered with Connection: close; the idle connection's new request
      // refused with 503 and Retry-After; each connection then closed cleanly (no reset), and the
      // process exited 0.
      const [onQueued, onArriving, onIdle, exited] = await Promise.all([queued.ended, arriving.ended, idle.ended, server.exited]);
      const summary = (ended: { responses: RawResponse[]; end: string }) => ({ end: ended.end, answers: ended.responses.map((response) => `${response.status} ${response.headers.connection} ${response.headers['retry-after'] ?? '-'}`) });
      expect({ queued: summary(onQueued), arriving: summary(onArriving), idle: summary(onIdle), exit: exited.code }).toEqual({
        queued: { end: 'end', answers: ['200 keep-alive -', '200 keep-alive -'] },
        arriving: { end: 'end', answers: ['200 close -'] },
        idle: { end: 'end', answers: ['200 keep-alive -', '503 close 1'] },
        exit: 0,
      });
      expect(JSON.parse(onQueued.responses[0]!.body)).toMatchObject({ object: 'charge', amount: 2000, paid: true });
      expect(JSON.parse(onQueued.responses[1]!.body)).toMatchObject({ object: 'customer', id: customerId });
      expect(JSON.parse(onArriving.responses[0]!.body)).toMatchObject({ object: 'charge', amount: 3000, paid: true });
      expect(JSON.parse(onIdle.responses[1]!.body)).toMatchObject({ error: { code: 'service_unavailable' } });
    } finally {
      server.child.kill('SIGKILL');
      rmSync(gate, { force: true });
    }
    // The money and the events are exactly what the 42 charges make: one charge and one charge.succeeded each.
    const again = await startServe(['--no-worker'], serveEnv);
    try {
      const payjp2 = Payjp(secret, { apibase: again.apibase, maxRetry: 0 });
      const list = await payjp2.charges.list({ customer: customerId, limit: 100 });
      expect(list.data.map((charge) => charge.amount).sort((a, b) => a - b)).toEqual([...Array.from({ length: 40 }, (_, i) => 1000 + i), 2000, 3000]);
      expect(list.data.every((charge) => charge.paid && charge.captured)).toBe(true);
      const events = await payjp2.events.list({ type: 'charge.succeeded', limit: 100 });
      expect(events.data.filter((event) => (event.data as { customer?: string }).customer === customerId).length).toBe(42);
      again.server.child.kill('SIGTERM');
      await again.server.exited;
    } finally {
      again.server.child.kill('SIGKILL');
    }
  }, 400_000);
});
