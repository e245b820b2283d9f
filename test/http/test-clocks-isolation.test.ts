import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Payjp from 'payjp';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { Scheduler } from '../../src/engine/scheduler';
import { subscriptionRenewalsJob } from '../../jobs/subscription-renewals';
import { REFERENCE_INSTANT, testContext } from '../support/database';
import { startTestServer, type TestServer } from '../support/http-server';
import { gatedNetwork } from '../support/recording-network';
import { callTestClocks, untilClockReady } from '../support/test-clock-api';

const card = (number: string) => ({ number, exp_month: '12', exp_year: '2035', cvc: '123' });
const seconds = (at: Date | string) => (typeof at === 'string' ? Date.parse(at) : at.getTime()) / 1000;
/** The server's clock stands at REFERENCE_INSTANT: a monthly subscription created now renews a month later. */
const NOW = seconds(REFERENCE_INSTANT);
const RENEWAL = new Date('2027-02-01T00:00:00.000Z');

describe('test clocks are isolated: an advance and the live worker each touch only their own objects', () => {
  let server: TestServer;
  let payjp: Payjp.Payjp;
  let other: Payjp.Payjp;
  let key: string;
  /** The server's card network: calls pass, except while a test arms the gate to hold one mid-flight. */
  const gate = gatedNetwork({ armed: false });
  const clockApi = (method: string, path: string, body?: Record<string, string>) => callTestClocks(server.baseUrl, key, method, path, body);
  const ready = (id: string) => untilClockReady(server.baseUrl, key, id);
  /** A customer with a card (on `clock` when given) and a monthly subscription of `sdk`'s account. */
  const subscribed = async (sdk: Payjp.Payjp, clock?: string) => {
    const token = (await sdk.tokens.create({ card: card(TEST_CARDS.visa.number) } as never, { 'X-Payjp-Direct-Token-Generate': 'true' })).id;
    const customer = await sdk.customers.create({ card: token, ...(clock ? { test_clock: clock } : {}) } as never);
    const plan = await sdk.plans.create({ amount: 1200, currency: 'jpy', interval: 'month' });
    const subscription = await sdk.subscriptions.create({ customer: customer.id, plan: plan.id });
    expect(subscription).toMatchObject({ status: 'active', current_period_start: NOW, current_period_end: seconds(RENEWAL) });
    return { customer: customer.id, subscription: subscription.id };
  };
  const chargesOf = async (sdk: Payjp.Payjp, customer: string) => (await sdk.charges.list({ customer, limit: 100 } as never)).data;
  const periodOf = async (sdk: Payjp.Payjp, subscription: string) => {
    const s = await sdk.subscriptions.retrieve(subscription);
    return { status: s.status, current_period_start: s.current_period_start, current_period_end: s.current_period_end };
  };

  beforeAll(async () => {
    server = await startTestServer('harness', { processor: gate.processor });
    key = server.keys.a.test.secret;
    payjp = server.sdk(key);
    other = server.sdk(server.keys.b.test.secret);
  });
  afterAll(async () => {
    await server?.close();
  });

  it('an advance renews its clock’s subscription only: a same-account and another account’s subscription due in the interval do not move', async () => {
    const clock = (await clockApi('POST', '', { frozen_time: String(NOW), name: 'isolation' })).body;
    expect(clock).toMatchObject({ status: 'ready', frozen_time: NOW });
    const onClock = await subscribed(payjp, clock.id);
    const sameAccount = await subscribed(payjp);
    const otherAccount = await subscribed(other);
    const before = { same: await periodOf(payjp, sameAccount.subscription), other: await periodOf(other, otherAccount.subscription) };

    const to = seconds('2027-02-15T00:00:00.000Z');
    expect(await clockApi('POST', `/${clock.id}/advance`, { frozen_time: String(to) })).toMatchObject({ status: 200, body: { status: 'advancing' } });
    expect(await ready(clock.id)).toMatchObject({ status: 'ready', frozen_time: to });

    // The clock's subscription renewed once at its due instant: a second charge and the next period.
    expect(await periodOf(payjp, onClock.subscription)).toMatchObject({ status: 'active', current_period_start: seconds(RENEWAL), current_period_end: seconds('2027-03-01T00:00:00.000Z') });
    const clockCharges = await chargesOf(payjp, onClock.customer);
    expect(clockCharges.map((charge) => charge.created).sort()).toEqual([NOW, seconds(RENEWAL)]);
    // The others were due at the same instant, inside the advanced interval, and did not move.
    expect(await periodOf(payjp, sameAccount.subscription)).toEqual(before.same);
    expect(await periodOf(other, otherAccount.subscription)).toEqual(before.other);
    expect(before.same.current_period_end).toBe(seconds(RENEWAL));
    expect(await chargesOf(payjp, sameAccount.customer)).toHaveLength(1);
    expect(await chargesOf(other, otherAccount.customer)).toHaveLength(1);
  });

  it('the live worker renews a live subscription due at an instant and leaves the clock’s subscription due at the same instant alone', async () => {
    const clock = (await clockApi('POST', '', { frozen_time: String(NOW), name: 'live worker' })).body;
    const onClock = await subscribed(payjp, clock.id);
    const live = await subscribed(payjp);
    const clockBefore = await periodOf(payjp, onClock.subscription);

    // The live worker's renewal slot at the due instant, its clock a minute later.
    const worker = testContext(server.ctx.store, { at: new Date(RENEWAL.getTime() + 60_000), seed: 901 });
    const outcome = await new Scheduler(worker, [subscriptionRenewalsJob], { owner: 'live-worker' }).runSlot(subscriptionRenewalsJob.name, RENEWAL);
    expect(outcome.status, outcome.status === 'failed' ? outcome.error : '').toBe('succeeded');

    // The probe says yes: the live subscription due at that instant renewed …
    expect(await periodOf(payjp, live.subscription)).toMatchObject({ status: 'active', current_period_start: seconds(RENEWAL) });
    expect(await chargesOf(payjp, live.customer)).toHaveLength(2);
    // … and no: the clock's subscription, due at the same instant, has no new charge and its period did not move.
    expect(await periodOf(payjp, onClock.subscription)).toEqual(clockBefore);
    expect(await chargesOf(payjp, onClock.customer)).toHaveLength(1);
    expect((await clockApi('GET', `/${clock.id}`)).body).toMatchObject({ status: 'ready', frozen_time: NOW });
  });

  it('two advances of one clock at once: the first runs, the second is refused while the first is held mid-flight at the card network', async () => {
    const clock = (await clockApi('POST', '', { frozen_time: String(NOW), name: 'one at a time' })).body;
    const onClock = await subscribed(payjp, clock.id);
    const to = seconds('2027-02-10T00:00:00.000Z');
    // From here the renewal's network call waits at the gate: the first advance is in flight and stays so.
    gate.arm();
    const calls = gate.asked.length + gate.captured.length;
    try {
      expect(await clockApi('POST', `/${clock.id}/advance`, { frozen_time: String(to) })).toMatchObject({ status: 200, body: { status: 'advancing', advancing_to: to } });
      await gate.atNetwork();
      // The second advance, to another instant, is refused while the first holds the clock; the clock still says where the first goes.
      expect(await clockApi('POST', `/${clock.id}/advance`, { frozen_time: String(to + 86_400) })).toMatchObject({ status: 400, body: { error: { code: 'invalid_status', param: 'id' } } });
      expect((await clockApi('GET', `/${clock.id}`)).body).toMatchObject({ status: 'advancing', frozen_time: NOW, advancing_to: to });
    } finally {
      // Let the held call (and any later one) through, also when an expectation failed: the server closes after.
      gate.arm(false);
      gate.open();
    }
    // The first finishes at its own target, having renewed once.
    expect(await ready(clock.id)).toMatchObject({ status: 'ready', frozen_time: to, advancing_to: null });
    expect((await chargesOf(payjp, onClock.customer)).map((charge) => charge.created).sort()).toEqual([NOW, seconds(RENEWAL)]);
    expect(gate.asked.length + gate.captured.length - calls).toBeGreaterThan(0);
    // Once ready, the clock advances again.
    expect(await clockApi('POST', `/${clock.id}/advance`, { frozen_time: String(to + 86_400) })).toMatchObject({ status: 200, body: { status: 'advancing' } });
    expect(await ready(clock.id)).toMatchObject({ status: 'ready', frozen_time: to + 86_400 });
  });
});
