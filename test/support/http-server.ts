/**
 * The real v1 server on an ephemeral port for HTTP tests, on the harness database (PostgreSQL when
 * the run has one) or on an embedded PGlite opened here, with a ManualClock the test moves.
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import Payjp from 'payjp';
import { createAccount, type AccountKeys } from '../../src/accounts/accounts';
import { serverPolicies, type ServerPolicyOptions } from '../../src/api/request-policies';
import { buildServer } from '../../src/api/server';
import { openStore, type Store } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import type { EngineConfig } from '../../src/engine/context';
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

export async function startTestServer(backend: Backend, options: { seed?: number; config?: Partial<EngineConfig>; bodyLimit?: number; rateLimits?: ServerPolicyOptions['rateLimits']; idempotency?: ServerPolicyOptions['idempotency']; extraRoutes?: (app: FastifyInstance) => Promise<void> } = {}): Promise<TestServer> {
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
  const ctx = testContext(store, { seed: options.seed ?? 15, at: REFERENCE_INSTANT, config: { statementUrlSecret: 'http-test-statement-secret', ...options.config } });
  const a = await createAccount(ctx, { name: 'HTTP Shop A', id: 'acct_http_a', liveEnabled: true });
  const b = await createAccount(ctx, { name: 'HTTP Shop B', id: 'acct_http_b' });
  // The server's own policies (src/api/request-policies.ts), as `kessai serve` wires them; limits
  // raised unless a test gives its own, so tests that do not test rate limits are not throttled.
  const policies = serverPolicies({
    ctx,
    storeKind: kind === 'postgres' ? 'postgres' : 'pglite',
    rateLimits: options.rateLimits ?? { limits: { live: UNTHROTTLED, test: UNTHROTTLED } },
    ...(options.idempotency ? { idempotency: options.idempotency } : {}),
  });
  const requestPolicies = async (app: FastifyInstance): Promise<void> => {
    await policies(app);
    await options.extraRoutes?.(app);
  };
  const app = await buildServer({ ctx, requestPolicies, ...(options.bodyLimit === undefined ? {} : { bodyLimit: options.bodyLimit }) });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return {
    kind,
    baseUrl,
    ctx,
    keys: { a: a.keys, b: b.keys },
    sdk: (key, sdkOptions = {}) => Payjp(key, { apibase: `${baseUrl}/v1`, ...sdkOptions }),
    async close() {
      await app.close();
      await drop();
    },
  };
}

/** A raw request with a key as HTTP Basic user (for what the SDK cannot send: the public key, bad bodies). */
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
