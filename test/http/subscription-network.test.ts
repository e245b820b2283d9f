/**
 * subscriptions.create, update (a plan change that charges) and resume (a charge for the new
 * period) through the network claims (src/engine/network-claims.ts), on the real server with the
 * `payjp` SDK and a gated card network: while the network answers, the customer and subscription
 * rows can be locked from another connection (PostgreSQL), and an Idempotency-Key is honoured as on
 * every v1 POST (the server refuses, with networkInBlock: 'refuse', a keyed network call it cannot
 * checkpoint): a retry answers the same and charges once, two racing requests with one key charge
 * once.
 */
import type Payjp from 'payjp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { isPostgres } from '../support/database';
import { startTestServer, type TestServer } from '../support/http-server';
import { gatedNetwork } from '../support/recording-network';
import { probeRowLock, whileLocked, type ProbedRow } from '../support/row-locks';

const DAY_MS = 24 * 3600 * 1000;
const gated = gatedNetwork({ armed: false });
let server: TestServer;
let payjp: Payjp.Payjp;
beforeAll(async () => {
  server = await startTestServer('harness', { processor: gated.processor, idempotency: { purgeIntervalMs: 0, networkInBlock: 'refuse' } });
  payjp = server.sdk(server.keys.a.test.secret);
});
afterAll(async () => server?.close());

async function customerWithCard(): Promise<Payjp.Customer> {
  const token = await payjp.tokens.create({ card: { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: 2035, cvc: '123' } } as never, { 'X-Payjp-Direct-Token-Generate': 'true' });
  return payjp.customers.create({ card: token.id });
}
const monthlyPlan = (amount: number) => payjp.plans.create({ amount, currency: 'jpy', interval: 'month' });

/** A POST through the SDK's own request, with an Idempotency-Key (its subscription methods take no headers). */
function keyed<T>(endpoint: string, params: Record<string, unknown>, key: string): Promise<T> {
  const resource = payjp.subscriptions as unknown as { request(method: string, endpoint: string, query: object, headers: object): Promise<T> };
  return resource.request('POST', endpoint, params, { 'Idempotency-Key': key });
}

const chargesOf = async (customer: string) => (await payjp.charges.list({ customer, limit: 100 })).data.map((charge) => [charge.amount, charge.paid]);

/** Runs `call` with the gate armed, waits until it is at the network, runs `meanwhile`, then lets it through. */
async function atTheNetwork<T>(call: () => Promise<T>, meanwhile: () => Promise<void>): Promise<T> {
  gated.arm();
  const arrived = gated.atNetwork();
  const pending = call();
  await arrived;
  gated.arm(false);
  try {
    await meanwhile();
  } finally {
    gated.open();
  }
  return pending;
}

describe.runIf(isPostgres())('no row lock is held while a subscription operation is at the card network (PostgreSQL)', () => {
  const rowOf = (table: ProbedRow['table'], column: string, id: string): ProbedRow => ({ table, key: { account_id: 'acct_http_a', [column]: id } });
  const free = async (row: ProbedRow) => (await probeRowLock(server.ctx.db, row)).lock;

  it('create, a charging plan change and a charging resume: the customer and subscription rows are free while the network answers', async () => {
    const customer = await customerWithCard();
    const [basic, premium] = [await monthlyPlan(500), await monthlyPlan(1500)];
    const customerRow = rowOf('customers', 'customer_id', customer.id);
    // The control: the probe says "locked" while another connection holds the row.
    expect(await whileLocked(server.ctx.db, customerRow, () => free(customerRow))).toBe('locked');

    const created = await atTheNetwork(

      () => payjp.subscriptions.create({ customer: customer.id, plan: basic.id }),
      async () => expect(await free(customerRow)).toBe('free'),
    );
    expect(created).toMatchObject({ status: 'active', plan: { id: basic.id } });
    const subscriptionRow = rowOf('subscriptions', 'subscription_id', created.id);
    // A plan change charges a period starting now: a day later than the first charge's.
    server.ctx.clock.advance(DAY_MS);

    const changed = await atTheNetwork(
      () => payjp.subscriptions.update(created.id, { plan: premium.id }),
      async () => expect([await free(customerRow), await free(subscriptionRow)]).toEqual(['free', 'free']),
    );
    expect(changed).toMatchObject({ status: 'active', plan: { id: premium.id } });

    await payjp.subscriptions.pause(created.id);
    server.ctx.clock.advance(40 * DAY_MS);
    const resumed = await atTheNetwork(
      () => payjp.subscriptions.resume(created.id),
      async () => expect([await free(customerRow), await free(subscriptionRow)]).toEqual(['free', 'free']),
    );
    expect(resumed).toMatchObject({ status: 'active' });
    expect(await chargesOf(customer.id)).toEqual([
      [1500, true],
      [1500, true],
      [500, true],
    ]);
  });
});

describe('an Idempotency-Key on subscriptions.create, update and resume', () => {
  it('a retried keyed request answers the same and charges once', async () => {
    const customer = await customerWithCard();
    const [basic, premium] = [await monthlyPlan(700), await monthlyPlan(900)];
    const asked = gated.asked.length;
    const created = await keyed<Payjp.Subscription>('subscriptions', { customer: customer.id, plan: basic.id }, `create-${customer.id}`);
    const again = await keyed<Payjp.Subscription>('subscriptions', { customer: customer.id, plan: basic.id }, `create-${customer.id}`);
    expect(again).toEqual(created);
    server.ctx.clock.advance(DAY_MS);
    const changed = await keyed<Payjp.Subscription>(`subscriptions/${created.id}`, { plan: premium.id }, `update-${customer.id}`);
    expect(await keyed<Payjp.Subscription>(`subscriptions/${created.id}`, { plan: premium.id }, `update-${customer.id}`)).toEqual(changed);
    await payjp.subscriptions.pause(created.id);
    server.ctx.clock.advance(40 * DAY_MS);
    const resumed = await keyed<Payjp.Subscription>(`subscriptions/${created.id}/resume`, {}, `resume-${customer.id}`);
    expect(await keyed<Payjp.Subscription>(`subscriptions/${created.id}/resume`, {}, `resume-${customer.id}`)).toEqual(resumed);
    expect(resumed).toMatchObject({ status: 'active', plan: { id: premium.id } });
    expect(gated.asked.length - asked).toBe(3);
    expect(await chargesOf(customer.id)).toEqual([
      [900, true],
      [900, true],
      [700, true],
    ]);
  });

  it('two racing requests with one key charge once and answer the same', async () => {
    const customer = await customerWithCard();
    const plan = await monthlyPlan(1100);
    const asked = gated.asked.length;
    const key = `race-${customer.id}`;
    let second: Promise<Payjp.Subscription> | undefined;
    const first = await atTheNetwork(
      () => keyed<Payjp.Subscription>('subscriptions', { customer: customer.id, plan: plan.id }, key),
      async () => {
        // Sent while the first is at the network: it waits for the first's answer.
        second = keyed<Payjp.Subscription>('subscriptions', { customer: customer.id, plan: plan.id }, key);
      },
    );
    expect(await second).toEqual(first);
    expect(gated.asked.length - asked).toBe(1);
    expect(await chargesOf(customer.id)).toEqual([[1100, true]]);
  });
});
