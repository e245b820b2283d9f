/**
 * The real v1 server on an ephemeral port for HTTP tests, on the harness database (PostgreSQL when
 * the run has one) or on an embedded PGlite opened here, with a ManualClock the test moves.
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import Payjp from 'payjp';
import { afterAll, beforeAll } from 'vitest';
import { createAccount, type AccountKeys } from '../../src/accounts/accounts';
import type { IdempotencyOptions } from '../../src/api/idempotency';
import { serverPolicies, type ServerPolicyOptions } from '../../src/api/request-policies';
import { buildServer } from '../../src/api/server';
import { operatorSurfaces } from '../../src/api/admin/operator-surfaces';
import { OperatorTokens, type NamedToken } from '../../src/api/admin/operator-tokens';
import { ALL_JOBS } from '../../jobs/index';
import { openStore, type Store } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import type { Context, EngineConfig } from '../../src/engine/context';
import type { CardNetwork } from '../../src/processor/card-network';
import { createTestDatabase, testContext, REFERENCE_INSTANT } from './database';

export type Backend = 'harness' | 'pglite';

/** Limits no functional test reaches (rate-limit tests pass their own). */
const UNTHROTTLED = { pk: 10_000, payment: 10_000, sk: 10_000 };

export interface TestServer {
  readonly kind: string;
  readonly baseUrl: string;
  readonly ctx: ReturnType<typeof testContext>;
  /** Keys of the two accounts every test server has: `acct_http_a` (live enabled) and `acct_http_b`. */
  readonly keys: { readonly a: AccountKeys; readonly b: AccountKeys };
  sdk(key: string, options?: Payjp.PayjpOptions): Payjp.Payjp;
  close(): Promise<void>;
}

export interface ServeOptions {
  readonly bodyLimit?: number;
  readonly rateLimits?: ServerPolicyOptions['rateLimits'];
  /** On PostgreSQL: count rate limits in this Redis, as `KESSAI_REDIS_URL` makes `kessai serve` do. */
  readonly redis?: Redis;
  readonly idempotency?: ServerPolicyOptions['idempotency'];
  readonly extraRoutes?: (app: FastifyInstance) => Promise<void>;
  /** The operator surfaces (/admin, /console, /metrics) with these tokens, as `kessai serve` wires them. */
  readonly operatorTokens?: readonly NamedToken[];
}

export interface Served {
  readonly baseUrl: string;
  /** `<baseUrl>/v1`, the v1 SDK's `apibase`. */
  readonly apibase: string;
  close(): Promise<void>;
}

/**
 * The real server (buildServer with the server's own policies, as `kessai serve` wires them) on
 * `ctx` — its store, clock and card network — on an ephemeral port. `storeKind` is the database's
 * kind, which picks the rate-limit store as serve does (memory on the embedded database). Several
 * servers on one database are several server processes (give each its own store for its own pool).
 */
export async function serveOn(ctx: Context, storeKind: 'postgres' | 'pglite', options: ServeOptions = {}): Promise<Served> {
  // Limits raised unless a test gives its own, so tests that do not test rate limits are not throttled.
  const policies = serverPolicies({
    ctx,
    storeKind,
    rateLimits: options.rateLimits ?? { limits: { live: UNTHROTTLED, test: UNTHROTTLED } },
    ...(options.redis ? { redis: options.redis } : {}),
    ...(options.idempotency ? { idempotency: options.idempotency } : {}),
  });
  const requestPolicies = async (app: FastifyInstance): Promise<void> => {
    await policies(app);
    await options.extraRoutes?.(app);
  };
  const operate = options.operatorTokens === undefined ? undefined : operatorSurfaces({ ctx, tokens: new OperatorTokens(options.operatorTokens), jobs: ALL_JOBS, owner: 'test-server', ledgerClock: ctx.clock });
  const app = await buildServer({ ctx, requestPolicies, testClockJobs: ALL_JOBS, ...(operate === undefined ? {} : { operate }), ...(options.bodyLimit === undefined ? {} : { bodyLimit: options.bodyLimit }) });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return { baseUrl, apibase: `${baseUrl}/v1`, close: () => app.close() };
}

export async function startTestServer(backend: Backend, options: ServeOptions & { seed?: number; config?: Partial<EngineConfig>; processor?: CardNetwork } = {}): Promise<TestServer> {
  let store: Store;
  let drop: () => Promise<void>;
  let kind: string;
  if (backend === 'pglite') {
    store = await openStore({ dataDir: 'memory://' });
    await migrate(store);
    drop = () => store.close();
    kind = 'pglite';
  } else {
    const database = await createTestDatabase();
    store = database.store;
    drop = () => database.drop();
    kind = database.kind;
  }
  const ctx = testContext(store, { seed: options.seed ?? 15, at: REFERENCE_INSTANT, config: { statementUrlSecret: 'http-test-statement-secret', ...options.config }, ...(options.processor ? { processor: options.processor } : {}) });
  const a = await createAccount(ctx, { name: 'HTTP Shop A', id: 'acct_http_a', liveEnabled: true });
  const b = await createAccount(ctx, { name: 'HTTP Shop B', id: 'acct_http_b' });
  const served = await serveOn(ctx, kind === 'postgres' ? 'postgres' : 'pglite', options);
  const { baseUrl } = served;
  return {
    kind,
    baseUrl,
    ctx,
    keys: { a: a.keys, b: b.keys },
    sdk: (key, sdkOptions = {}) => Payjp(key, { apibase: `${baseUrl}/v1`, ...sdkOptions }),
    async close() {
      await served.close();
      await drop();
    },
  };
}

/** A raw request with a key as HTTP Basic user (for what the SDK cannot send: the public key, bad bodies). */
/**
 * A harness server for the describe block (or file) that calls this: started before its tests (its
 * clock at `at` when given), closed after them. Read `.server` in the tests, once beforeAll has run.
 */
export function harnessServerForBlock(options: { readonly at?: Date } = {}): { readonly server: TestServer } {
  const block = {} as { server: TestServer };
  beforeAll(async () => {
    block.server = await startTestServer('harness');
    if (options.at !== undefined) block.server.ctx.clock.set(options.at);
  });
  afterAll(async () => block.server?.close());
  return block;
}

export async function rawRequest(server: TestServer, method: string, path: string, options: { key?: string; body?: string | Buffer; contentType?: string } = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const headers: Record<string, string> = {};
  if (options.key !== undefined) headers.authorization = `Basic ${Buffer.from(`${options.key}:`).toString('base64')}`;
  if (options.body !== undefined) headers['content-type'] = options.contentType ?? 'application/x-www-form-urlencoded';
  const response = await fetch(`${server.baseUrl}${path}`, { method, headers, ...(options.body === undefined ? {} : { body: options.body }) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** The SDK's rejection as the fields a test asserts: HTTP status and the v1 error body. */
export async function sdkError(promise: Promise<unknown>): Promise<{ status: number; type: string; code: string; param: string | undefined; charge: string | undefined }> {
  try {
    await promise;
  } catch (error) {
    const e = error as { status: number; response: { body: { error: { status: number; type: string; code: string; param?: string; charge?: string } } } };
    const body = e.response.body.error;
    if (body.status !== e.status) throw new Error(`error body status ${body.status} differs from HTTP ${e.status}`);
    return { status: e.status, type: body.type, code: body.code, param: body.param, charge: body.charge };
  }
  throw new Error('expected the SDK call to be refused');
}

/** One v1 request with a Basic key and a form body, answered as status, headers and parsed JSON body. */
export async function call(apibase: string, key: string, method: string, path: string, body?: Record<string, string>, headers: Record<string, string> = {}) {
  const response = await fetch(`${apibase}${path}`, {
    method,
    headers: {
      authorization: `Basic ${Buffer.from(`${key}:`).toString('base64')}`,
      ...(body === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: new URLSearchParams(body).toString() }),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> & { id?: string; error?: { status: number; type: string; code: string; param?: string } } };
}

/** An idempotency fault that makes the next keyed request's final commit fail, once. */
export function commitFailsOnce(): NonNullable<IdempotencyOptions['fault']> {
  let failNext = true;
  return {
    point: 'before-operation-commit',
    act: () => {
      if (!failNext) return;
      failNext = false;
      throw new Error('the commit never happens');
    },
  };
}
