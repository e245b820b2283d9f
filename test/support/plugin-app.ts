/**
 * A small real Fastify app for testing the API plugins (rate limits, idempotency keys) apart from
 * the full server: HTTP Basic authentication with the account's real keys (a stub of the server's
 * hook that sets `request.caller`), a form-body parser, the plugins under test, and a few v1
 * routes that run real operations against the test database.
 */
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import type { AddressInfo } from 'node:net';
import { authenticate, type Caller } from '../../src/accounts/accounts';
import { idempotency, operationContext, type IdempotencyOptions } from '../../src/api/idempotency';
import { rateLimits, type RateLimitOptions } from '../../src/api/rate-limits';
import { KessaiError } from '../../src/domain/errors';
import type { Context } from '../../src/engine/context';
import { runOperation } from '../../src/operations/registry';

export interface PluginApp {
  readonly app: FastifyInstance;
  /** `http://127.0.0.1:<port>/v1`, the SDK's `apibase`. */
  readonly apibase: string;
  /** How often each route's handler ran (the work, not the replies). */
  readonly handled: Map<string, number>;
  close(): Promise<void>;
}

export interface PluginAppOptions {
  readonly rateLimits?: RateLimitOptions;
  readonly idempotency?: Omit<IdempotencyOptions, 'db' | 'clock'>;
}

function keyOf(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (header === undefined || !header.startsWith('Basic ')) return undefined;
  return Buffer.from(header.slice(6), 'base64').toString('utf8').split(':')[0];
}

/** A form body as nested parameters (`card[number]=…` → `{ card: { number: … } }`), as the SDK encodes them. */
function formBody(text: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of new URLSearchParams(text)) {
    const path = name.split(/[[\]]+/).filter((part) => part !== '');
    let node = out;
    for (const part of path.slice(0, -1)) node = (node[part] ??= {}) as Record<string, unknown>;
    node[path.at(-1)!] = value;
  }
  return out;
}

export async function startPluginApp(ctx: Context, options: PluginAppOptions = {}): Promise<PluginApp> {
  const app = Fastify({ logger: false });
  const handled = new Map<string, number>();
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
    done(null, formBody(body as string));
  });
  app.setErrorHandler((error, _request, reply) => {
    const known = error instanceof KessaiError ? error : new KessaiError('payjp_wrong', { message: 'An unexpected error occurred.' });
    return reply.code(known.status).send(known.toV1());
  });
  // The stub of the server's authentication hook: the real key check, then request.caller.
  app.addHook('onRequest', async (request) => {
    const caller: Caller = await authenticate(ctx, keyOf(request));
    Object.assign(request, { caller });
  });
  if (options.rateLimits !== undefined) await app.register(rateLimits, options.rateLimits);
  if (options.idempotency !== undefined) await app.register(idempotency, { db: ctx.db, clock: ctx.clock, processor: ctx.processor, ...options.idempotency });

  const route = (name: string, params: (request: FastifyRequest) => unknown) => async (request: FastifyRequest) => {
    handled.set(name, (handled.get(name) ?? 0) + 1);
    return runOperation(operationContext(request, ctx), (request as FastifyRequest & { caller: Caller }).caller, name, params(request));
  };
  const withId = (request: FastifyRequest) => ({ ...(request.body as object | undefined), id: (request.params as { id: string }).id });
  app.post('/v1/tokens', route('tokens.create', (r) => r.body));
  app.post('/v1/customers', route('customers.create', (r) => r.body ?? {}));
  app.post('/v1/charges', route('charges.create', (r) => r.body));
  app.get('/v1/charges/:id', route('charges.retrieve', withId));
  app.post('/v1/charges/:id/capture', route('charges.capture', withId));
  // A route that fails with a server fault on its first call, then works: 5xx answers are not kept.
  app.post('/v1/flaky', async () => {
    const calls = (handled.get('flaky') ?? 0) + 1;
    handled.set('flaky', calls);
    if (calls === 1) throw new Error('the first call fails');
    return { calls };
  });

  // A route that calls the card network inside a transaction block of its own (a keyed request cannot checkpoint there).
  app.post('/v1/network_in_block', async (request) => {
    handled.set('network_in_block', (handled.get('network_in_block') ?? 0) + 1);
    const on = operationContext(request, ctx);
    return on.db.transaction().execute(async () => ({ answered: (await on.processor.authenticate([{ reference: 'in_block', fingerprint: 'none', livemode: false, at: ctx.clock.now() }])).length }));
  });

  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return { app, apibase: `http://127.0.0.1:${port}/v1`, handled, close: () => app.close() };
}

/** One request with a Basic key, answered as status, headers and parsed JSON body. */
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
