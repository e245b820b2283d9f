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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, isPostgres, type TestDatabase } from '../support/database';
import { spawnKessai, startServe, type SpawnedWorker } from '../support/spawn-worker';

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
  const started = await startServe([], env);
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
  const response = await fetch(`${base}${path}`, { method, headers, ...(options.body === undefined ? {} : { body: options.body }) });
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
});
