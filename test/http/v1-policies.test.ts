/**
 * The request policies of the real server (src/api/request-policies.ts) through the `payjp` SDK:
 * rate limits (429 over_capacity; the SDK's own back-off gets through), Idempotency-Key, and a race
 * of two captures over HTTP. The Idempotency-Key cases use a raw fetch with HTTP Basic auth: the
 * SDK v3 passes extra headers only to tokens.create (its charges.create takes no headers argument).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Payjp from 'payjp';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { isPostgres } from '../support/database';
import { rawRequest, sdkError, startTestServer, type TestServer } from '../support/http-server';

const CARD = `card[number]=${TEST_CARDS.visa.number}&card[exp_month]=12&card[exp_year]=2035&card[cvc]=123`;

async function customerWithCard(server: TestServer, payjp: Payjp.Payjp, id: string): Promise<void> {
  const token = await rawRequest(server, 'POST', '/v1/tokens', { key: server.keys.a.test.public, body: CARD });
  expect(token.status).toBe(200);
  await payjp.customers.create({ id, card: token.body.id } as never);
}

async function chargeCount(server: TestServer, customer: string): Promise<number> {
  const row = await server.ctx.db.selectFrom('charges').where('customer_id', '=', customer).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

/** POST /v1/charges with an Idempotency-Key (raw: see the file comment). */
async function chargeWithKey(server: TestServer, key: string, body: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${server.baseUrl}/v1/charges`, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from(`${server.keys.a.test.secret}:`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
      'idempotency-key': key,
    },
    body,
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('rate limits on the real server (v1 §8 defaults: 2 per window per zone in test mode)', () => {
  let server: TestServer;
  let longWindow: TestServer;
  /** The statuses the server answered to customer lists, in order. */
  const answered: number[] = [];
  beforeAll(async () => {
    // The defaults, explicitly: test mode sk = 2 per second (as KESSAI_RATE_LIMITS would leave them).
    server = await startTestServer('harness', {
      rateLimits: {},
      extraRoutes: async (app) => {
        app.addHook('onResponse', async (request, reply) => {
          if (request.url.startsWith('/v1/customers')) answered.push(reply.statusCode);
        });
      },
    });
    // The same budget of 2 over 60 seconds: a burst cannot straddle two windows on a slow machine.
    longWindow = await startTestServer('harness', { rateLimits: { windowSeconds: 60 } });
  });
  afterAll(async () => {
    await server?.close();
    await longWindow?.close();
  });

  it("the zone's budget + 1 requests at once: one is 429 over_capacity through the SDK's error object", async () => {
    const payjp = longWindow.sdk(longWindow.keys.a.test.secret);
    const results = await Promise.allSettled([0, 1, 2].map(() => payjp.customers.list()));
    const refused = results.filter((r) => r.status === 'rejected');
    expect(refused).toHaveLength(1);
    const error = await sdkError(Promise.reject((refused[0] as PromiseRejectedResult).reason));
    expect(error).toMatchObject({ status: 429, type: 'client_error', code: 'over_capacity' });
  });

  it('the SDK with maxRetry gets 5 requests at once through a budget of 2 a second: every 429 the server answered was retried', async () => {
    const payjp = server.sdk(server.keys.a.test.secret, { maxRetry: 8, retryInitialDelay: 250, retryMaxDelay: 2_000 });
    answered.length = 0;
    const lists = await Promise.all([0, 1, 2, 3, 4].map(() => payjp.customers.list()));
    expect(lists.every((list) => list.object === 'list')).toBe(true);
    // Five answered 200, and every refusal was followed by a retry (one more request each).
    expect(answered.filter((status) => status === 200)).toHaveLength(5);
    expect(answered.filter((status) => status !== 200 && status !== 429)).toEqual([]);
  });
});

describe('Idempotency-Key and races on the real server', () => {
  let server: TestServer;
  let payjp: Payjp.Payjp;
  beforeAll(async () => {
    server = await startTestServer('harness');
    payjp = server.sdk(server.keys.a.test.secret);
    await customerWithCard(server, payjp, 'cus_idem');
  });
  afterAll(async () => server?.close());

  it('a retry with the same key returns the same charge and creates one charge', async () => {
    const before = await chargeCount(server, 'cus_idem');
    const first = await chargeWithKey(server, 'retry-1', 'customer=cus_idem&amount=1000&currency=jpy');
    const retry = await chargeWithKey(server, 'retry-1', 'customer=cus_idem&amount=1000&currency=jpy');
    expect(first.status).toBe(200);
    expect(retry).toEqual(first);
    expect(await chargeCount(server, 'cus_idem')).toBe(before + 1);
  });

  it('the same key with a different body is refused (400 already_exist_id on Idempotency-Key) and creates nothing', async () => {
    await chargeWithKey(server, 'conflict-1', 'customer=cus_idem&amount=1000&currency=jpy');
    const before = await chargeCount(server, 'cus_idem');
    const refused = await chargeWithKey(server, 'conflict-1', 'customer=cus_idem&amount=2000&currency=jpy');
    expect(refused).toMatchObject({ status: 400, body: { error: { type: 'client_error', code: 'already_exist_id', param: 'Idempotency-Key' } } });
    expect(await chargeCount(server, 'cus_idem')).toBe(before);
  });

  it('two concurrent requests with one key create one charge and answer the same', async () => {
    const before = await chargeCount(server, 'cus_idem');
    const [a, b] = await Promise.all([0, 1].map(() => chargeWithKey(server, 'concurrent-1', 'customer=cus_idem&amount=1500&currency=jpy')));
    expect(a!.status).toBe(200);
    expect(b).toEqual(a);
    expect(await chargeCount(server, 'cus_idem')).toBe(before + 1);
  });

  it.runIf(isPostgres())('two concurrent captures of one charge over HTTP: one succeeds, the other is already_captured', async () => {
    const charge = await payjp.charges.create({ customer: 'cus_idem', amount: 3_000, currency: 'jpy', capture: false });
    const results = await Promise.allSettled([0, 1].map(() => payjp.charges.capture(charge.id)));
    const done = results.filter((r) => r.status === 'fulfilled');
    expect(done).toHaveLength(1);
    const refused = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(await sdkError(Promise.reject(refused.reason))).toMatchObject({ status: 400, code: 'already_captured' });
    expect((await payjp.charges.retrieve(charge.id)).captured).toBe(true);
  });
});
