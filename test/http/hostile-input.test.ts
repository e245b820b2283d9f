/**
 * Hostile input against the real `kessai serve` process (on this file's PostgreSQL database):
 * every shape a request can carry — URL, query, headers, body — ends in an answer, never in a
 * process exit or a 5xx; a refusal stores nothing; the process's log holds none of the secrets
 * sent (card numbers, CVCs, keys and client secrets put in URLs by mistake).
 *
 * After every request the process must still be running and answer /health. PostgreSQL only: the
 * rows are counted from beside the server, which the embedded database (one process's files) does
 * not allow; the parsing and refusals are the same code on both.
 */
import { createClient, createProduct } from '@payjp/payjpv2';
import { connect } from 'node:net';
import { sql } from 'kysely';
import Payjp from 'payjp';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { V1_ROUTES } from '../../src/api/v1/routes';
import { V2_PREFIX } from '../../src/api/v2/codec';
import { V2_ROUTES } from '../../src/api/v2/routes';
import { createTestDatabase, isPostgres, type TestDatabase } from '../support/database';
import { sdkError } from '../support/http-server';
import { spawnKessai, startServe, type SpawnedWorker } from '../support/spawn-worker';
import { problem } from '../support/v2-sdk';

/** Card data this run sends (the test cards' numbers, in URLs and bodies), a CVC no log line can hold by chance. */
const CARD_NUMBERS = ['4242424242424242', '5555555555554444', '378282246310005'];
const CVC = '7391';
/** A value sent in a URL that is no secret: the log must show it (the search below can say yes). */
const LOG_CONTROL = 'plain-log-control-31f7';
/** Every secret this run sends (keys, card data, client secrets, tokens): none may reach the log. */
const secretsSent: string[] = [...CARD_NUMBERS, CVC];

/** True when `value` is in `log`, not as part of a longer word or number (a CVC inside a port or a request id does not count). */
function logHas(log: string, value: string): boolean {
  const escaped = value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(?<![0-9A-Za-z-])${escaped}(?![0-9A-Za-z-])`).test(log);
}

/** The server's bound on receiving a whole request (`--request-timeout`), in seconds. */
const REQUEST_TIMEOUT_S = 2;
/** What a bound may overrun by: the server looks every second, and this machine is shared. */
const BOUND_SLACK_MS = 3_000;

let database: TestDatabase;
let server: SpawnedWorker;
let base: string;
let secret: string;
let publicKey: string;

beforeAll(async () => {
  if (!isPostgres()) return;
  database = await createTestDatabase();
  // No KESSAI_STATEMENT_URL_SECRET: a statement download is then refused as an unknown URL.
  const env = { DATABASE_URL: database.url!, KESSAI_LOG_LEVEL: 'info', KESSAI_STATEMENT_URL_SECRET: '', KESSAI_RATE_LIMITS: JSON.stringify({ test: { pk: 10_000, payment: 10_000, sk: 10_000 } }) };
  const created = spawnKessai(['accounts', 'create', '--name', 'Hostile Shop', '--json'], env);
  expect((await created.exited).code).toBe(0);
  const { keys } = JSON.parse(created.output()) as { keys: { test: { secret: string; public: string } } };
  secret = keys.test.secret;
  publicKey = keys.test.public;
  // Sent in every authenticated request's header, and in URLs below.
  secretsSent.push(secret, publicKey);
  // A short request bound, so the slow-body tests wait seconds, not the default 30.
  const started = await startServe(['--request-timeout', String(REQUEST_TIMEOUT_S)], env);
  server = started.server;
  base = started.apibase.replace(/\/v1$/, '');
}, 90_000);

afterAll(async () => {
  server?.child.kill('SIGKILL');
  await server?.exited;
  await database?.drop();
});

interface Answer {
  readonly status: number;
  readonly contentType: string;
  readonly text: string;
}

/** One raw request (fetch), its answer read whole. */
async function send(method: string, path: string, options: { key?: string; bearer?: boolean; body?: string; contentType?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key !== undefined) headers.authorization = options.bearer ? `Bearer ${options.key}` : `Basic ${Buffer.from(`${options.key}:`).toString('base64')}`;
  if (options.body !== undefined) headers['content-type'] = options.contentType ?? 'application/x-www-form-urlencoded';
  const response = await fetch(`${base}${path}`, { method, headers, redirect: 'manual', ...(options.body === undefined ? {} : { body: options.body }) });
  return { status: response.status, contentType: response.headers.get('content-type') ?? '', text: await response.text() };
}

/** The process is running and answers. */
async function expectAlive(): Promise<void> {
  expect(server.child.exitCode).toBeNull();
  expect(server.child.signalCode).toBeNull();
  expect((await send('GET', '/health')).status).toBe(200);
}

/** A v1 refusal: the status and the v1 error body with `code` (and `param` when given). */
function expectV1Refusal(answer: Answer, status: number, code: string, param?: string): void {
  expect(answer.status, answer.text).toBe(status);
  expect(answer.contentType).toContain('application/json');
  const { error } = JSON.parse(answer.text) as { error: { status: number; code: string; param?: string } };
  expect(error).toMatchObject({ status, code, ...(param === undefined ? {} : { param }) });
}

/** A v2 refusal: a problem document with the status (and the field named, when given). */
function expectProblem(answer: Answer, status: number, field?: string): void {
  expect(answer.status, answer.text).toBe(status);
  expect(answer.contentType).toContain('application/problem+json');
  const problem = JSON.parse(answer.text) as { status: number; errors?: { field: string }[] };
  expect(problem.status).toBe(status);
  if (field !== undefined) expect(problem.errors?.map((e) => e.field)).toContain(field);
}

/**
 * Rows of every table but the request bookkeeping (rate-limit counters; Idempotency-Key rows,
 * which keep a keyed request's refusal as its answer): a refusal leaves these unchanged.
 */
async function rowCounts(): Promise<Record<string, number>> {
  const tables = await sql<{ table_name: string }>`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name NOT IN ('rate_limit_counters', 'idempotency_keys') ORDER BY table_name`.execute(database.store.db);
  const counts: Record<string, number> = {};
  for (const { table_name: table } of tables.rows) {
    const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM ${sql.table(table)}`.execute(database.store.db);
    counts[table] = Number(rows[0]!.n);
  }
  return counts;
}

/** Every route of both tables as a client reaches it: method, path pattern (`:param`), v1 or v2. */
const ROUTES = [...V1_ROUTES.map((r) => ({ method: r.method, path: r.path, v2: false })), ...V2_ROUTES.map((r) => ({ method: r.method, path: `${V2_PREFIX}${r.path}`, v2: true }))];
const pathParamsOf = (path: string): string[] => [...path.matchAll(/:([a-z_]+)/g)].map((m) => m[1]!);

/** A request to a route of either API with the secret key: v1 form or query, v2 JSON or query. */
function callRoute(route: (typeof ROUTES)[number], path: string, fields: { form: string; json: string }): Promise<Answer> {
  const options = { key: secret, bearer: route.v2 };
  if (route.method !== 'POST') return send(route.method, `${path}?${fields.form}`, options);
  return route.v2 ? send('POST', path, { ...options, body: fields.json, contentType: 'application/json' }) : send('POST', path, { ...options, body: fields.form });
}

/** The refusal of `route`'s API naming `param` (v1: 400 `invalid_querystring`; v2: a 422 problem naming the field). */
function expectParamRefused(route: (typeof ROUTES)[number], answer: Answer, param: string): void {
  if (route.v2) expectProblem(answer, 422, param.replace(/\[([^\]]*)\]/g, '.$1'));
  else expectV1Refusal(answer, 400, 'invalid_querystring', param);
}

/**
 * A client that sends `head`, then one byte of `dripped` every 250 ms for as long as the
 * connection stays open; resolves when the server closes it, with how long that took and what
 * the server wrote.
 */
function drip(head: string, dripped: string): Promise<{ ms: number; answer: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let answer = '';
    let timer: ReturnType<typeof setInterval> | undefined;
    const socket = connect({ host: hostname, port: Number(port) }, () => {
      socket.write(head);
      let i = 0;
      timer = setInterval(() => socket.write(dripped[i++ % dripped.length]!), 250);
    });
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    socket.on('error', () => {}); // a reset is a close too
    socket.on('close', () => {
      clearInterval(timer);
      resolve({ ms: performance.now() - started, answer });
    });
    // Past any bound the test gives up (and fails on the time below).
    setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept a dripping connection open for 30 s: ${answer}`));
    }, 30_000).unref();
  });
}

const DEEP_QUERY = 'a[b][c][d][e][f][g]=1';
const WIDE_QUERY = Array.from({ length: 1_001 }, (_, i) => `p${i}=1`).join('&');

describe.runIf(isPostgres())('hostile requests to kessai serve', () => {
  it('a query string nested deeper than 5 levels or with more than 1,000 parameters is refused (400), on every kind of route, and the process lives', async () => {
    for (const query of [DEEP_QUERY, WIDE_QUERY]) {
      // Unauthenticated: the health check and the statement download.
      expectV1Refusal(await send('GET', `/health?${query}`), 400, 'invalid_querystring');
      await expectAlive();
      expectV1Refusal(await send('GET', `/v1/statements/download?${query}`), 400, 'invalid_querystring');
      await expectAlive();
      // An unknown URL (its query is never read: without a key it is 401 as any unknown URL),
      // a v1 route with the secret and the public key, a v2 route.
      expectV1Refusal(await send('GET', `/nowhere?${query}`), 401, 'no_api_key');
      expectV1Refusal(await send('GET', `/v1/charges?${query}`, { key: secret }), 400, 'invalid_querystring');
      expectV1Refusal(await send('POST', `/v1/tokens?${query}`, { key: publicKey, body: 'card[number]=4242424242424242' }), 400, 'invalid_querystring');
      expectProblem(await send('GET', `/v2/customers?${query}`, { key: secret, bearer: true }), 422);
      await expectAlive();
    }
  });

  it('a URL Fastify cannot decode is the catalogue not_found, not a framework body', async () => {
    expectV1Refusal(await send('GET', '/v1/charges/%'), 404, 'not_found');
    expectV1Refusal(await send('GET', `/v1/charges/${'x'.repeat(200)}`, { key: secret }), 404, 'not_found');
    expectProblem(await send('GET', '/v2/customers/%E0%A4%A', { key: secret, bearer: true }), 404);
    await expectAlive();
  });

  it('a NUL character in each path parameter of every route, and in a parameter, a nested parameter and a parameter name of every route, is refused naming it; nothing is stored', async () => {
    const before = await rowCounts();
    let sent = 0;
    for (const route of ROUTES) {
      const plain = route.path.replace(/:[a-z_]+/g, 'x_1');
      for (const param of pathParamsOf(route.path)) {
        expectParamRefused(route, await callRoute(route, route.path.replace(`:${param}`, 'a%00b').replace(/:[a-z_]+/g, 'x_1'), { form: '', json: '{}' }), param);
        sent++;
      }
      expectParamRefused(route, await callRoute(route, plain, { form: 'description=a%00b', json: '{"description":"a\\u0000b"}' }), 'description');
      expectParamRefused(route, await callRoute(route, plain, { form: 'metadata[k]=%00', json: '{"metadata":{"k":"\\u0000"}}' }), 'metadata[k]');
      expectParamRefused(route, await callRoute(route, plain, { form: 'metadata[a%00b]=1', json: '{"metadata":{"a\\u0000b":"1"}}' }), 'metadata[a\0b]');
      sent += 3;
      expect(server.child.exitCode).toBeNull();
    }
    // The buyer's pages answer with a page, the unauthenticated downloads with the v1 body.
    for (const path of ['/checkout/pay/a%00b', '/checkout/pay/a%00b/return', '/v2/js/three_d_secure?client_secret=%00', '/v2/js/wallet?key=%00', '/v1/tds/a%00b/start', '/v1/tds/ch_1/start?back_url=%ED%A0%80']) {
      const answer = await send('GET', path);
      expect(answer.status, path).toBe(400);
      expect(answer.contentType).toContain('text/html');
    }
    expectV1Refusal(await send('GET', '/v1/statements/download?token=%00'), 400, 'invalid_querystring', 'token');
    expectV1Refusal(await send('GET', '/v1/tenant_application?token=a%00'), 400, 'invalid_querystring', 'token');
    // Every route was tried (both tables), with each of its path parameters.
    expect(ROUTES.length).toBeGreaterThan(100);
    expect(sent).toBe(ROUTES.length * 3 + ROUTES.reduce((n, r) => n + pathParamsOf(r.path).length, 0));
    await expectAlive();
    expect(await rowCounts()).toEqual(before);
  }, 120_000);

  it('invalid UTF-8 — percent-encoded in a form or a query, raw bytes in a body, a lone surrogate in JSON — is refused naming the parameter, never stored as other text', async () => {
    const before = await rowCounts();
    expectV1Refusal(await send('POST', '/v1/customers', { key: secret, body: 'description=%ED%A0%80x' }), 400, 'invalid_querystring', 'description');
    expectV1Refusal(await send('POST', '/v1/customers', { key: secret, body: 'metadata[k]=%C3' }), 400, 'invalid_querystring', 'metadata[k]');
    expectV1Refusal(await send('POST', '/v1/customers', { key: secret, body: '%FF=1' }), 400, 'invalid_querystring');
    expectV1Refusal(await send('GET', '/v1/customers?email=%E0%A4', { key: secret }), 400, 'invalid_querystring', 'email');
    const rawBytes = Buffer.concat([Buffer.from('{"description":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
    const raw = await fetch(`${base}/v2/customers`, { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: rawBytes });
    expectProblem({ status: raw.status, contentType: raw.headers.get('content-type') ?? '', text: await raw.text() }, 422);
    const rawForm = await fetch(`${base}/v1/customers`, { method: 'POST', headers: { authorization: `Basic ${Buffer.from(`${secret}:`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' }, body: Buffer.from([0x64, 0x3d, 0xc3]) });
    expect(rawForm.status).toBe(400);
    expectProblem(await send('POST', '/v2/customers', { key: secret, bearer: true, body: '{"description":"\\ud800x"}', contentType: 'application/json' }), 422, 'description');
    await expectAlive();
    expect(await rowCounts()).toEqual(before);
  });

  it('a JSON body nested 12,000 levels deep is refused at parse time, with an Idempotency-Key and without, and leaves no key', async () => {
    const before = await rowCounts();
    const deep = `{"metadata":{"k":${'['.repeat(12_000)}${']'.repeat(12_000)}}}`;
    for (const headers of [{}, { 'idempotency-key': 'deep-json-key' }] as Record<string, string>[]) {
      const answer = await send('POST', '/v2/customers', { key: secret, bearer: true, body: deep, contentType: 'application/json', headers });
      expectProblem(answer, 422);
      expect(JSON.parse(answer.text).detail).toContain('deeper than');
      await expectAlive();
    }
    // Just past the bound: refused the same; at it, read (and refused for what it says).
    expectProblem(await send('POST', '/v2/customers', { key: secret, bearer: true, body: `{"metadata":${'['.repeat(16)}${']'.repeat(16)}}`, contentType: 'application/json' }), 422);
    const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM idempotency_keys WHERE idempotency_key = 'deep-json-key'`.execute(database.store.db);
    expect(Number(rows[0]!.n)).toBe(0);
    // A form body as deep as the query string of the first test.
    expectV1Refusal(await send('POST', '/v1/customers', { key: secret, body: DEEP_QUERY }), 400, 'invalid_querystring');
    expect(await rowCounts()).toEqual(before);
  });

  it('huge numbers are refused naming the amount; a tax rate of exactly 100 is stored, above it refused', async () => {
    const before = await rowCounts();
    for (const amount of ['1e400', '99999999999999999999', '-0', 'NaN', 'Infinity', '0x10']) {
      expectV1Refusal(await send('POST', '/v1/charges', { key: secret, body: `amount=${amount}&currency=jpy&card=tok_x` }), 400, 'invalid_amount', 'amount');
    }
    for (const amount of ['1e400', '99999999999999999999', '1.5', '"NaN"']) {
      expectProblem(await send('POST', '/v2/payment_flows', { key: secret, bearer: true, body: `{"amount":${amount},"currency":"jpy"}`, contentType: 'application/json' }), 422, 'amount');
    }
    expectProblem(await send('POST', '/v2/tax_rates', { key: secret, bearer: true, body: '{"display_name":"All","percentage":"100.0001","inclusive":false}', contentType: 'application/json' }), 422, 'percentage');
    expect(await rowCounts()).toEqual(before);
    const hundred = await send('POST', '/v2/tax_rates', { key: secret, bearer: true, body: '{"display_name":"All","percentage":"100","inclusive":false}', contentType: 'application/json' });
    expect(hundred.status, hundred.text).toBe(200);
    expect(JSON.parse(hundred.text)).toMatchObject({ object: 'tax_rate', percentage: '100.0000' });
    await expectAlive();
  });

  it('cousins: empty and prototype keys, duplicates, arrays for scalars, invalid JSON, wrong content types, long headers and URLs end in a 4xx', async () => {
    const before = await rowCounts();
    const refusals: [string, string, Parameters<typeof send>[2]][] = [
      ['POST', '/v1/customers', { key: secret, body: 'constructor=1' }],
      ['POST', '/v1/customers', { key: secret, body: 'email=a@example.com&email=b@example.com' }],
      ['POST', '/v1/customers', { key: secret, body: 'email[]=a@example.com' }],
      ['POST', '/v1/customers', { key: secret, body: 'metadata=text&metadata[k]=v' }],
      ['POST', '/v1/customers', { key: secret, body: '{}', contentType: 'application/json' }],
      ['POST', '/v1/customers', { key: secret, body: '--x--', contentType: 'multipart/form-data; boundary=x' }],
      ['POST', '/v1/customers', { key: secret, body: 'x', contentType: 'text/plain' }],
      ['POST', '/v2/customers', { key: secret, bearer: true, body: '{"__proto__":{"email":"a@example.com"}}', contentType: 'application/json' }],
      ['POST', '/v2/customers', { key: secret, bearer: true, body: '{"constructor":{"prototype":{}}}', contentType: 'application/json' }],
      ['POST', '/v2/customers', { key: secret, bearer: true, body: '{"email":["a@example.com"]}', contentType: 'application/json' }],
      ['POST', '/v2/customers', { key: secret, bearer: true, body: '{"email":', contentType: 'application/json' }],
      ['POST', '/v2/customers', { key: secret, bearer: true, body: '[]', contentType: 'application/json' }],
      ['POST', '/v2/customers', { key: secret, bearer: true, body: '"text"', contentType: 'application/json' }],
      ['POST', '/v2/customers', { key: secret, bearer: true, body: 'email=a', contentType: 'application/x-www-form-urlencoded' }],
      ['GET', '/v1/customers', { key: secret, headers: { 'x-long': 'a'.repeat(20_000) } }],
      ['GET', `/v1/customers?${'q'.repeat(20_000)}=1`, { key: secret }],
      ['GET', `/v1/customers/${'c'.repeat(5_000)}`, { key: secret }],
      ['GET', '/v1/customers', { headers: { authorization: `Basic ${'!'.repeat(5_000)}` } }],
      ['GET', '/v1/customers', { headers: { authorization: 'Bearer' } }],
    ];
    for (const [method, path, options] of refusals) {
      const answer = await send(method, path, options);
      expect(answer.status, `${method} ${path.slice(0, 60)}: ${answer.text.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
      expect(answer.status, `${method} ${path.slice(0, 60)}: ${answer.text.slice(0, 200)}`).toBeLessThan(500);
      expect(server.child.exitCode).toBeNull();
    }
    await expectAlive();
    expect(await rowCounts()).toEqual(before);
  });

  it('a body over the limit (64 KiB) is 413 through both SDKs: the v1 error body and a problem document; nothing stored', async () => {
    const before = await rowCounts();
    const v1 = await sdkError(Payjp(secret, { apibase: `${base}/v1` }).customers.create({ description: 'x'.repeat(70_000) }));
    expect(v1).toMatchObject({ status: 413, type: 'client_error', code: 'payload_too_large' });
    const v2 = await problem(createProduct({ client: createClient({ apiKey: secret, baseUrl: base }), body: { name: 'x'.repeat(70_000) } }));
    expect(v2).toMatchObject({ status: 413, title: 'Payload Too Large', code: 'payload_too_large', contentType: 'application/problem+json; charset=utf-8' });
    await expectAlive();
    expect(await rowCounts()).toEqual(before);
  });

  it('a client dripping its body, or its headers, is cut off within the request bound; fifty at once do not stop the server answering', async () => {
    const authorization = `Basic ${Buffer.from(`${secret}:`).toString('base64')}`;
    const slowBody = `POST /v1/customers HTTP/1.1\r\nHost: kessai\r\nAuthorization: ${authorization}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\ndescription=`;
    const slowHeaders = 'GET /health HTTP/1.1\r\nHost: kessai\r\n';
    const before = await rowCounts();
    const body = await drip(slowBody, 'x');
    expect(body.ms, body.answer).toBeLessThan(REQUEST_TIMEOUT_S * 1000 + BOUND_SLACK_MS);
    expect(body.ms, body.answer).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_S * 1000 - 250);
    expect(body.answer).toMatch(/^HTTP\/1\.1 408 /);
    const headers = await drip(slowHeaders, 'X-Drip: y\r\n');
    expect(headers.ms).toBeLessThan(REQUEST_TIMEOUT_S * 1000 + BOUND_SLACK_MS);
    // Fifty at once, half of each kind, while an ordinary client is answered.
    const many = Array.from({ length: 50 }, (_, i) => drip(i % 2 === 0 ? slowBody : slowHeaders, i % 2 === 0 ? 'x' : 'X-Drip: y\r\n'));
    await expectAlive();
    for (const { ms } of await Promise.all(many)) expect(ms).toBeLessThan(REQUEST_TIMEOUT_S * 1000 + BOUND_SLACK_MS * 2);
    await expectAlive();
    expect(await rowCounts()).toEqual(before);
  }, 60_000);

  it('without KESSAI_STATEMENT_URL_SECRET a download request is the unknown URL it must be (404), not a fault', async () => {
    for (const path of ['/v1/statements/download?token=abc.def', '/v1/statements/download?token=eyJrIjoiYmFsYW5jZSJ9.x', '/v1/tenant_application?token=abc.def']) {
      expectV1Refusal(await send('GET', path), 404, 'not_found', 'token');
    }
    await expectAlive();
  });

  it('credentials and card data sent in URLs (by mistake or by design) and bodies reach no log line', async () => {
    const flow = JSON.parse((await send('POST', '/v2/payment_flows', { key: secret, bearer: true, body: '{"amount":1000,"currency":"jpy"}', contentType: 'application/json' })).text) as { id: string; client_secret: string };
    expect(flow.client_secret).toContain('_secret_');
    const token = JSON.parse((await send('POST', '/v1/tokens', { key: publicKey, body: `card[number]=${CARD_NUMBERS[0]}&card[exp_month]=12&card[exp_year]=2035&card[cvc]=${CVC}` })).text) as { id: string };
    expect(token.id).toMatch(/^tok_/);
    const webhookToken = 'whook_5e5e7a1c0ffee0ddba11';
    secretsSent.push(flow.client_secret, token.id, webhookToken);
    const urls: [string, string, Parameters<typeof send>[2]][] = [
      ['GET', `/v1/charges?card[number]=${CARD_NUMBERS[1]}&card[cvc]=${CVC}&card[exp_month]=12`, { key: secret }],
      ['GET', `/v1/charges?card%5Bnumber%5D=${CARD_NUMBERS[2]}&card%5Bcvc%5D=${CVC}`, { key: secret }],
      ['POST', `/v1/tokens?card[number]=${CARD_NUMBERS[0]}&card[cvc]=${CVC}`, { key: publicKey, body: 'card[exp_month]=12' }],
      ['GET', `/v1/charges?key=${secret}&limit=3`, { key: secret }],
      ['GET', `/v1/charges/${secret}`, { key: secret }],
      ['GET', `/v1/customers/${publicKey}/cards`, { key: secret }],
      ['GET', `/v1/customers?${secret}`, {}],
      ['GET', `/v1/customers?description=${encodeURIComponent(`mine ${secret}`)}`, { key: secret }],
      ['GET', `/v2/payment_flows/${flow.id}?client_secret=${flow.client_secret}`, { key: publicKey, bearer: true }],
      ['GET', `/v2/payment_flows/${flow.client_secret}`, { key: secret, bearer: true }],
      ['GET', `/v2/payment_flows?reference=${flow.client_secret}`, { key: secret, bearer: true }],
      ['GET', `/v1/tokens/${token.id}`, { key: secret }],
      ['GET', `/v1/events?hook=${webhookToken}`, { key: secret }],
      ['GET', `/v2/js/three_d_secure?key=${publicKey}&payment_flow_id=${flow.id}&client_secret=${flow.client_secret}&return_url=https%3A%2F%2Fshop.example%2Fback`, {}],
      ['GET', `/v1/tds/${token.id}/start?publickey=${publicKey}&back_url=https%3A%2F%2Fshop.example%2Fback`, {}],
      ['GET', `/v1/charges?limit=3&note=${LOG_CONTROL}`, { key: secret }],
    ];
    for (const [method, path, options] of urls) {
      const answer = await send(method, path, options);
      expect(answer.status, `${method} ${path}`).toBeLessThan(500);
    }
    await expectAlive();
  });

  it("the process's log holds none of the secrets sent during the whole run, and the same search finds what it must", async () => {
    // The control, sent last of the URLs above: a value sent the same way and not secret is found
    // by the same search. Once its line is in, every earlier line is (one process writes them in order).
    await vi.waitFor(() => expect(logHas(server.errors(), LOG_CONTROL)).toBe(true), { timeout: 10_000 });
    const log = server.errors();
    expect(logHas(log, '/v1/charges')).toBe(true);
    expect(secretsSent.length).toBe(9);
    for (const value of secretsSent) expect(logHas(log, value), value).toBe(false);
  });

  it('the whole run logged no fault: not one error-level line (after the log caught up, above)', () => {
    // pino level 50 is error, 60 fatal.
    const faults = server.errors().split('\n').filter((line) => /"level":(50|60)/.test(line));
    expect(faults).toEqual([]);
    // The search can say yes: the same field finds the info-level request lines (30).
    expect(server.errors()).toMatch(/"level":30,.*"msg":"request"/);
  });
});
