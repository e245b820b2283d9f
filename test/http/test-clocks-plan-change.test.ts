import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Payjp from 'payjp';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { startTestServer, type TestServer } from '../support/http-server';
import { gatedNetwork } from '../support/recording-network';
import { callTestClocks, untilClockReady } from '../support/test-clock-api';

const card = (number: string) => ({ number, exp_month: '12', exp_year: '2035', cvc: '123' });
const seconds = (iso: string) => Date.parse(iso) / 1000;

/**
 * On a frozen clock every call happens at one instant: a plan change right after subscribing is
 * made at the very instant of the subscription's first charge, and one right after an advance to a
 * renewal at the instant of that renewal's charge. Each is answered like the same change a moment
 * later: the new plan is charged and the charges already made stand.
 */
describe('a plan change at the instant of the period’s charge, on a test clock', () => {
  let server: TestServer;
  let payjp: Payjp.Payjp;
  let key: string;
  /** The server's card network, recording what it was asked. */
  const network = gatedNetwork({ armed: false });
  const clockApi = (method: string, path: string, body?: Record<string, string>) => callTestClocks(server.baseUrl, key, method, path, body);
  const plan = (amount: number) => payjp.plans.create({ amount, currency: 'jpy', interval: 'month' });
  /** A customer with a card on a new clock frozen at `at`, subscribed to a monthly plan of 1,200 yen. */
  const subscribedOnClock = async (at: number, prorate: boolean) => {
    const clock = (await clockApi('POST', '', { frozen_time: String(at), name: 'plan change' })).body;
    const token = (await payjp.tokens.create({ card: card(TEST_CARDS.visa.number) } as never, { 'X-Payjp-Direct-Token-Generate': 'true' })).id;
    const customer = await payjp.customers.create({ card: token, test_clock: clock.id } as never);
    const subscription = await payjp.subscriptions.create({ customer: customer.id, plan: (await plan(1200)).id, ...(prorate ? { prorate: true } : {}) });
    expect(subscription).toMatchObject({ status: 'active', current_period_start: at });
    return { clock: clock.id as string, customer: customer.id, subscription };
  };
  /** The customer's charges by instant, then amount (charges of one instant list in id order, which is not the order made). */
  const chargesOf = async (customer: string) =>
    (await payjp.charges.list({ customer, limit: 100 } as never)).data
      .map((c) => ({ amount: c.amount, paid: c.paid, created: c.created, refunded: c.amount_refunded }))
      .sort((a, b) => a.created - b.created || a.amount - b.amount || a.refunded - b.refunded);

  beforeAll(async () => {
    server = await startTestServer('harness', { processor: network.processor });
    key = server.keys.a.test.secret;
    payjp = server.sdk(key);
  });
  afterAll(async () => {
    await server?.close();
  });

  it('without prorate: each change at the start instant charges its plan in full and starts a new cycle there; the first charge stands', async () => {
    const start = seconds('2027-03-10T00:00:00.000Z');
    const { customer, subscription } = await subscribedOnClock(start, false);
    const planB = await plan(3000);
    const changed = await payjp.subscriptions.update(subscription.id, { plan: planB.id });
    expect(changed).toMatchObject({ status: 'active', plan: { id: planB.id }, current_period_start: start, current_period_end: seconds('2027-04-10T00:00:00.000Z') });
    // Back to the first plan at the same instant, then a third: every change is one more charge.
    await payjp.subscriptions.update(subscription.id, { plan: subscription.plan.id });
    await payjp.subscriptions.update(subscription.id, { plan: planB.id });
    expect(await chargesOf(customer)).toEqual([
      { amount: 1200, paid: true, created: start, refunded: 0 },
      { amount: 1200, paid: true, created: start, refunded: 0 },
      { amount: 3000, paid: true, created: start, refunded: 0 },
      { amount: 3000, paid: true, created: start, refunded: 0 },
    ]);
    // Four authorizations under four references: a processor taking the reference as its idempotency
    // key would otherwise answer a change with the first charge's authorization.
    const references = network.asked.filter((a) => a.request.reference.startsWith(`${subscription.id}@`)).map((a) => a.request.reference);
    expect(references).toHaveLength(4);
    expect(new Set(references).size).toBe(4);
    // A prorated delete at the same instant refunds the last charge whole: none of its period was used.
    await payjp.subscriptions.delete(subscription.id, { prorate: true } as never);
    expect((await chargesOf(customer)).map((c) => [c.amount, c.refunded])).toEqual([[1200, 0], [1200, 0], [3000, 0], [3000, 3000]]);
  });

  it('with prorate, at the renewal instant after an advance: the remaining whole period of the new plan is charged and the period end kept', async () => {
    const start = seconds('2027-03-10T00:00:00.000Z');
    const renewal = seconds('2027-04-10T00:00:00.000Z');
    const { clock, customer, subscription } = await subscribedOnClock(start, true);
    const planB = await plan(3100);
    expect(await payjp.subscriptions.update(subscription.id, { plan: planB.id })).toMatchObject({ current_period_start: start, current_period_end: renewal });
    expect(await clockApi('POST', `/${clock}/advance`, { frozen_time: String(renewal) })).toMatchObject({ status: 200 });
    expect(await untilClockReady(server.baseUrl, key, clock)).toMatchObject({ status: 'ready', frozen_time: renewal });
    // The renewal charged plan B at its due instant; a change back at that instant pro-rates the whole new period.
    const back = await payjp.subscriptions.update(subscription.id, { plan: subscription.plan.id });
    expect(back).toMatchObject({ status: 'active', plan: { id: subscription.plan.id }, current_period_start: renewal, current_period_end: seconds('2027-05-10T00:00:00.000Z') });
    expect(await chargesOf(customer)).toEqual([
      { amount: 1200, paid: true, created: start, refunded: 0 },
      { amount: 3100, paid: true, created: start, refunded: 0 },
      { amount: 1200, paid: true, created: renewal, refunded: 0 },
      { amount: 3100, paid: true, created: renewal, refunded: 0 },
    ]);
    // The next renewal bills the plan now held, once.
    const next = seconds('2027-05-10T00:00:00.000Z');
    await clockApi('POST', `/${clock}/advance`, { frozen_time: String(next) });
    await untilClockReady(server.baseUrl, key, clock);
    expect((await chargesOf(customer)).slice(4)).toEqual([{ amount: 1200, paid: true, created: next, refunded: 0 }]);
  });
});
