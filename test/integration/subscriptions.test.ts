import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { KessaiError } from '../../src/domain/errors';
import { toUnixSeconds } from '../../src/domain/time';
import { listEvents } from '../../src/events/outbox';
import { operationNames, runOperation } from '../../src/api/operations';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { createTestDatabase, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { rejection, expectRefused } from '../support/rejections';

type Json = Record<string, unknown> & { id: string };
type List = { object: string; count: number; data: Json[]; has_more: boolean; url: string };

let database: TestDatabase;
let ctx: ReturnType<typeof testContext>;
let test: Caller;

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 23 });
  const { account } = await createAccount(ctx, { name: 'Subscriptions Shop', id: 'acct_subscriptions', liveEnabled: true });
  test = { accountId: account.id, livemode: false, kind: 'secret' };
});
afterAll(async () => database?.drop());

const DAY_MS = 24 * 60 * 60 * 1000;
const at = (iso: string) => new Date(iso);
const seconds = (iso: string) => toUnixSeconds(at(iso));

async function run<T = Json>(name: string, params?: unknown): Promise<T> {
  return (await runOperation(ctx, test, name, params)) as T;
}

/** Every row this file's account owns, so "a rejected call changes nothing" compares whole tables. */
async function snapshot(): Promise<unknown> {
  const [subscriptions, charges, customers, events] = await Promise.all([
    ctx.db.selectFrom('subscriptions').selectAll().where('account_id', '=', test.accountId).orderBy('subscription_id').execute(),
    ctx.db.selectFrom('charges').selectAll().where('account_id', '=', test.accountId).orderBy('charge_id').execute(),
    ctx.db.selectFrom('customers').selectAll().where('account_id', '=', test.accountId).orderBy('customer_id').execute(),
    ctx.db.selectFrom('events').select(({ fn }) => fn.countAll<number>().as('n')).where('account_id', '=', test.accountId).executeTakeFirstOrThrow(),
  ]);
  return { subscriptions, charges, customers, events: events.n };
}

/** Asserts the call is refused with the code and param, and that no row or event was written. */
async function refused(name: string, params: unknown, code: string, param: string | undefined): Promise<KessaiError> {
  return expectRefused(`${name} ${JSON.stringify(params)}`, () => runOperation(ctx, test, name, params), code, param, snapshot);
}

async function token(number: string = TEST_CARDS.visa.number): Promise<string> {
  return (await run('tokens.create', { card: { number, exp_month: '12', exp_year: '2035', cvc: '123' } })).id;
}

/** A new customer whose default card is the given test card (or none). */
async function customer(number: string | null = TEST_CARDS.visa.number): Promise<string> {
  return (await run('customers.create', number === null ? {} : { card: await token(number) })).id;
}

async function plan(fields: Record<string, string> = {}): Promise<Json> {
  return run('plans.create', { amount: '1000', currency: 'jpy', interval: 'month', ...fields });
}

async function row(id: string) {
  return ctx.db.selectFrom('subscriptions').selectAll().where('account_id', '=', test.accountId).where('subscription_id', '=', id).executeTakeFirstOrThrow();
}

async function chargesOf(subscriptionId: string) {
  return ctx.db.selectFrom('charges').selectAll().where('account_id', '=', test.accountId).where('subscription_id', '=', subscriptionId).orderBy('created_at').orderBy('charge_id').execute();
}

async function chargesOfCustomer(customerId: string) {
  return ctx.db.selectFrom('charges').selectAll().where('account_id', '=', test.accountId).where('customer_id', '=', customerId).orderBy('created_at').execute();
}

/** The renews_at column, which the renewal job selects by, in UNIX seconds. */
async function renewsAtOf(id: string): Promise<number | null> {
  const stored = (await row(id)).renews_at;
  return stored === null ? null : toUnixSeconds(stored);
}

describe('subscriptions.create (service rules §1.3)', () => {
  it('registers every subscription operation', () => {
    expect(operationNames()).toEqual(
      expect.arrayContaining(['subscriptions.create', 'subscriptions.retrieve', 'subscriptions.list', 'subscriptions.update', 'subscriptions.pause', 'subscriptions.resume', 'subscriptions.cancel', 'subscriptions.delete']),
    );
  });

  it('"No trial, no billing_day: charge the plan amount now; period = [now, now + 1 interval)"', async () => {
    ctx.clock.set(at('2027-01-31T05:00:00Z'));
    const cus = await customer();
    const pln = await plan({ amount: '1200' });
    const sub = await run('subscriptions.create', { customer: cus, plan: pln.id, metadata: { order: '42' } });
    expect(sub).toMatchObject({
      object: 'subscription',
      livemode: false,
      customer: cus,
      status: 'active',
      prorate: false,
      created: seconds('2027-01-31T05:00:00Z'),
      start: seconds('2027-01-31T05:00:00Z'),
      current_period_start: seconds('2027-01-31T05:00:00Z'),
      current_period_end: seconds('2027-02-28T05:00:00Z'),
      trial_start: null,
      trial_end: null,
      paused_at: null,
      canceled_at: null,
      resumed_at: null,
      next_cycle_plan: null,
      metadata: { order: '42' },
    });
    expect(sub.id).toMatch(/^sub_/);
    expect(sub.plan).toEqual(pln);
    const charges = await chargesOf(sub.id);
    expect(charges.map((c) => [c.amount, c.paid, c.captured, c.customer_id, c.period_start?.toISOString()])).toEqual([[1200, true, true, cus, '2027-01-31T05:00:00.000Z']]);
    expect((await row(sub.id)).last_charge_id).toBe(charges[0]!.charge_id);
    expect(await renewsAtOf(sub.id)).toBe(seconds('2027-02-28T05:00:00Z'));
    const events = (await listEvents(ctx.db, test.accountId)).filter((e) => e.data.id === sub.id || e.data.id === charges[0]!.charge_id);
    expect(events.map((e) => e.type)).toEqual(['charge.succeeded', 'subscription.created']);
    expect(events[1]!.data).toEqual(sub);
    expect(await run('subscriptions.retrieve', { id: sub.id })).toEqual(sub);
  });

  it('a yearly plan without billing_day runs one year from the charge', async () => {
    ctx.clock.set(at('2028-02-29T10:00:00Z'));
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan({ interval: 'year', amount: '10000' })).id });
    expect([sub.current_period_start, sub.current_period_end]).toEqual([seconds('2028-02-29T10:00:00Z'), seconds('2029-02-28T10:00:00Z')]);
    expect((await chargesOf(sub.id)).map((c) => c.amount)).toEqual([10000]);
  });

  it('"billing_day, prorate not true: no charge now; status active; current_period_end = the next billing instant"', async () => {
    ctx.clock.set(at('2027-03-10T03:00:00Z'));
    const pln = await plan({ billing_day: '31' });
    for (const prorate of [undefined, 'false']) {
      const sub = await run('subscriptions.create', { customer: await customer(), plan: pln.id, ...(prorate === undefined ? {} : { prorate }) });
      expect(sub).toMatchObject({ status: 'active', prorate: false, current_period_start: seconds('2027-03-10T03:00:00Z'), current_period_end: seconds('2027-03-31T00:00:00Z') });
      expect(await chargesOf(sub.id)).toEqual([]);
      expect((await row(sub.id)).last_charge_id).toBeNull();
      expect(await renewsAtOf(sub.id)).toBe(seconds('2027-03-31T00:00:00Z'));
    }
  });

  it('§1.4 example end to end: "billing_day 1, amount 1000, created 2018-08-27 12:00 JST → N = 5 (27..31), D = 31 → 161"', async () => {
    ctx.clock.set(at('2018-08-27T03:00:00Z')); // 12:00 JST
    const pln = await plan({ amount: '1000', billing_day: '1' });
    const sub = await run('subscriptions.create', { customer: await customer(), plan: pln.id, prorate: 'true' });
    expect(sub).toMatchObject({ status: 'active', prorate: true, current_period_start: seconds('2018-08-27T03:00:00Z'), current_period_end: seconds('2018-09-01T00:00:00Z') });
    const charges = await chargesOf(sub.id);
    expect(charges.map((c) => [c.amount, c.paid])).toEqual([[161, true]]);
    expect(await renewsAtOf(sub.id)).toBe(seconds('2018-09-01T00:00:00Z'));
  });

  it('"Trial (trial_end in the future)": status trial, trial_start = now, period = [now, trial_end), no charge', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const trialEnd = seconds('2027-01-15T12:00:00Z');
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan()).id, trial_end: String(trialEnd) });
    expect(sub).toMatchObject({ status: 'trial', trial_start: toUnixSeconds(REFERENCE_INSTANT), trial_end: trialEnd, current_period_start: toUnixSeconds(REFERENCE_INSTANT), current_period_end: trialEnd });
    expect(await chargesOf(sub.id)).toEqual([]);
    expect(await renewsAtOf(sub.id)).toBe(trialEnd);
  });

  it('"plan trial_days > 0 and no trial_end given": trial_end = now + trial_days days', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan({ trial_days: '14' })).id });
    expect(sub).toMatchObject({ status: 'trial', trial_end: toUnixSeconds(REFERENCE_INSTANT) + 14 * 86400 });
    expect(await chargesOf(sub.id)).toEqual([]);
  });

  it('"trial_end = now: no trial even if the plan has trial_days; charge now"', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan({ trial_days: '14', amount: '700' })).id, trial_end: 'now' });
    expect(sub).toMatchObject({ status: 'active', trial_start: null, trial_end: null, current_period_end: seconds('2027-02-01T00:00:00Z') });
    expect((await chargesOf(sub.id)).map((c) => c.amount)).toEqual([700]);
  });

  it('"trial_end = now" on a billing_day plan: v1 §3.2 "trial ends at once … charged immediately": the full amount now, the period up to the billing day', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const pln = await plan({ billing_day: '20', trial_days: '14', amount: '900' });
    for (const prorate of [undefined, 'false'] as const) {
      const sub = await run('subscriptions.create', { customer: await customer(), plan: pln.id, trial_end: 'now', ...(prorate === undefined ? {} : { prorate }) });
      expect(sub).toMatchObject({ status: 'active', trial_start: null, trial_end: null, current_period_start: seconds('2027-01-01T00:00:00Z'), current_period_end: seconds('2027-01-20T00:00:00Z') });
      expect((await chargesOf(sub.id)).map((c) => [c.amount, c.created_at.toISOString()])).toEqual([[900, '2027-01-01T00:00:00.000Z']]);
      // The next charge is the renewal on the billing day.
      expect(await renewsAtOf(sub.id)).toBe(seconds('2027-01-20T00:00:00Z'));
    }
    // With prorate=true the charge now is the pro-rated one (Jan 1..19 = 19 of the 31 days from Dec 20).
    const prorated = await run('subscriptions.create', { customer: await customer(), plan: pln.id, trial_end: 'now', prorate: 'true' });
    expect((await chargesOf(prorated.id)).map((c) => c.amount)).toEqual([Math.floor((900 * 19) / 31)]);
  });

  it('"With billing_day and prorate explicitly false: trial_end is moved to 09:00 JST of the next billing day on or after the requested trial end"', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const pln = await plan({ billing_day: '20' });
    const moved = await run('subscriptions.create', { customer: await customer(), plan: pln.id, trial_end: String(seconds('2027-01-10T12:00:00Z')), prorate: 'false' });
    expect(moved).toMatchObject({ status: 'trial', trial_end: seconds('2027-01-20T00:00:00Z'), current_period_end: seconds('2027-01-20T00:00:00Z') });
    expect(await renewsAtOf(moved.id)).toBe(seconds('2027-01-20T00:00:00Z'));
    // prorate=true (and omitted) keep the requested end: the trial-end charge is what differs.
    const kept = await run('subscriptions.create', { customer: await customer(), plan: pln.id, trial_end: String(seconds('2027-01-10T12:00:00Z')), prorate: 'true' });
    expect(kept).toMatchObject({ status: 'trial', prorate: true, trial_end: seconds('2027-01-10T12:00:00Z') });
  });

  it('"Charge first": a declined first charge creates nothing and fails with the card error, the failed charge kept', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const cus = await customer(TEST_CARDS.declinesOnCharge.number);
    const pln = await plan();
    const error = await rejection(run('subscriptions.create', { customer: cus, plan: pln.id }));
    expect([error.code, error.status, error.type]).toEqual(['card_declined', 402, 'card_error']);
    const charges = await chargesOfCustomer(cus);
    expect(charges.map((c) => [c.paid, c.failure_code, c.amount])).toEqual([[false, 'card_declined', 1000]]);
    expect(error.charge).toBe(charges[0]!.charge_id);
    expect(error.toV1().error.charge).toBe(charges[0]!.charge_id);
    const subscriptions = await ctx.db.selectFrom('subscriptions').selectAll().where('customer_id', '=', cus).execute();
    expect(subscriptions).toEqual([]);
    // The only event about this customer's money or subscriptions is the failed charge.
    const events = (await listEvents(ctx.db, test.accountId)).filter((e) => e.data.customer === cus && e.data.object !== 'card');
    expect(events.map((e) => e.type)).toEqual(['charge.failed']);
  });

  it('"Subscriptions whose first charge is not immediate … are created without a charge", even on a card that would decline', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(TEST_CARDS.declinesOnCharge.number), plan: (await plan({ trial_days: '7' })).id });
    expect(sub.status).toBe('trial');
  });

  it('"The customer must have a default card (doesnt_have_card)"', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    await refused('subscriptions.create', { customer: await customer(null), plan: (await plan()).id }, 'doesnt_have_card', 'customer');
  });

  it('"A yearly plan with billing_day cannot be subscribed (invalid_plan)"', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    await refused('subscriptions.create', { customer: await customer(), plan: (await plan({ interval: 'year', billing_day: '5' })).id }, 'invalid_plan', 'plan');
  });

  it('"Decision: a customer may not hold two subscriptions to the same plan that are not deleted (already_subscribed)"', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const cus = await customer();
    const pln = await plan();
    const first = await run('subscriptions.create', { customer: cus, plan: pln.id });
    await refused('subscriptions.create', { customer: cus, plan: pln.id }, 'already_subscribed', 'plan');
    // Canceled and paused subscriptions still count; a deleted one does not.
    await run('subscriptions.cancel', { id: first.id });
    await refused('subscriptions.create', { customer: cus, plan: pln.id }, 'already_subscribed', 'plan');
    await run('subscriptions.delete', { id: first.id });
    expect((await run('subscriptions.create', { customer: cus, plan: pln.id })).status).toBe('active');
    // Another customer may subscribe to the same plan.
    expect((await run('subscriptions.create', { customer: await customer(), plan: pln.id })).status).toBe('active');
  });

  it('refuses bad parameters naming them, and changes nothing', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const cus = await customer();
    const pln = await plan();
    await refused('subscriptions.create', { plan: pln.id }, 'missing_param', 'customer');
    await refused('subscriptions.create', { customer: cus }, 'missing_param', 'plan');
    await refused('subscriptions.create', { customer: 'cus_nope', plan: pln.id }, 'invalid_id', 'customer');
    await refused('subscriptions.create', { customer: cus, plan: 'pln_nope' }, 'invalid_id', 'plan');
    await refused('subscriptions.create', { customer: cus, plan: pln.id, trial_end: 'tomorrow' }, 'invalid_trial_end', 'trial_end');
    await refused('subscriptions.create', { customer: cus, plan: pln.id, trial_end: String(toUnixSeconds(REFERENCE_INSTANT)) }, 'invalid_trial_end', 'trial_end');
    await refused('subscriptions.create', { customer: cus, plan: pln.id, trial_end: String(seconds('2032-01-01T00:00:01Z')) }, 'invalid_trial_end', 'trial_end');
    await refused('subscriptions.create', { customer: cus, plan: pln.id, prorate: 'yes' }, 'invalid_boolean', 'prorate');
    await refused('subscriptions.create', { customer: cus, plan: pln.id, quantity: '2' }, 'invalid_param_key', 'quantity');
    await refused('subscriptions.create', { customer: cus, plan: pln.id, metadata: { 'a[b]': 'x' } }, 'invalid_metadata_key', 'metadata[a[b]]');
  });
});

describe('subscriptions.retrieve and subscriptions.list', () => {
  it('lists newest first with the plan, customer and status filters and pagination; retrieve through the customer (v1 §4.4)', async () => {
    ctx.clock.set(at('2029-06-01T00:00:00Z'));
    const cus = await customer();
    const planA = await plan();
    const planB = await plan({ trial_days: '3' });
    const a = await run('subscriptions.create', { customer: cus, plan: planA.id });
    ctx.clock.advance(1000);
    const b = await run('subscriptions.create', { customer: cus, plan: planB.id });
    const mine = await run<List>('subscriptions.list', { customer: cus });
    expect(mine).toMatchObject({ object: 'list', count: 2, has_more: false, url: '/v1/subscriptions' });
    expect(mine.data.map((s) => s.id)).toEqual([b.id, a.id]);
    expect((await run<List>('subscriptions.list', { customer: cus, limit: '1' })).data.map((s) => s.id)).toEqual([b.id]);
    expect((await run<List>('subscriptions.list', { customer: cus, limit: '1' })).has_more).toBe(true);
    expect((await run<List>('subscriptions.list', { customer: cus, offset: '1' })).data.map((s) => s.id)).toEqual([a.id]);
    expect((await run<List>('subscriptions.list', { plan: planA.id })).data.map((s) => s.id)).toEqual([a.id]);
    expect((await run<List>('subscriptions.list', { customer: cus, status: 'trial' })).data.map((s) => s.id)).toEqual([b.id]);
    expect((await run<List>('subscriptions.list', { customer: cus, status: 'paused' })).data).toEqual([]);
    await refused('subscriptions.list', { status: 'sleeping' }, 'invalid_querystring', 'status');
    expect(await run('subscriptions.retrieve', { id: a.id, customer: cus })).toEqual(a);
    await refused('subscriptions.retrieve', { id: a.id, customer: await customer() }, 'invalid_id', 'id');
    await refused('subscriptions.retrieve', { id: 'sub_nope' }, 'invalid_id', 'id');
  });

  it('the customer-scoped routes of v1 §4.4: GET /v1/customers/{id}/subscriptions[/{subscription_id}]', async () => {
    ctx.clock.set(at('2029-07-01T00:00:00Z'));
    const cus = await customer();
    const other = await customer();
    const sub = await run('subscriptions.create', { customer: cus, plan: (await plan()).id });
    await run('subscriptions.create', { customer: other, plan: (await plan()).id });
    const list = await run<List>('customers.subscriptions.list', { customer: cus });
    expect(list).toMatchObject({ object: 'list', count: 1, url: `/v1/customers/${cus}/subscriptions` });
    expect(list.data.map((s) => s.id)).toEqual([sub.id]);
    expect((await run<List>('customers.subscriptions.list', { customer: cus, status: 'paused' })).data).toEqual([]);
    expect(await run('customers.subscriptions.retrieve', { customer: cus, id: sub.id })).toEqual(sub);
    await refused('customers.subscriptions.retrieve', { customer: other, id: sub.id }, 'invalid_id', 'id');
    await refused('customers.subscriptions.list', { customer: 'cus_nobody' }, 'invalid_id', 'customer');
    await refused('customers.subscriptions.list', {}, 'missing_param', 'customer');
    // The v1 codec checks every parameter before the customer is looked up (docs/decisions/api-conventions.md).
    await refused('customers.subscriptions.list', { customer: 'cus_nobody', limit: '0' }, 'invalid_querystring', 'limit');
    await refused('customers.subscriptions.retrieve', { customer: 'cus_nobody' }, 'missing_param', 'id');
    await refused('customers.subscriptions.retrieve', { customer: 'cus_nobody', id: sub.id }, 'invalid_id', 'customer');
  });
});

describe('pause and resume (service rules §1.6)', () => {
  it('a resume declined at one instant can be retried at the same instant with another card: the declined charge does not hold the period', async () => {
    ctx.clock.set(at('2029-08-01T00:00:00Z'));
    const cus = await customer();
    const sub = await run('subscriptions.create', { customer: cus, plan: (await plan()).id });
    await run('subscriptions.pause', { id: sub.id });
    await run('cards.create', { customer: cus, card: await token(TEST_CARDS.declinesOnCharge.number), default: 'true' });
    ctx.clock.set(at('2029-09-15T00:00:00Z'));
    const declined = await rejection(run('subscriptions.resume', { id: sub.id }));
    expect(declined).toMatchObject({ code: 'card_declined', status: 402 });
    await run('cards.create', { customer: cus, card: await token(TEST_CARDS.mastercard.number), default: 'true' });
    const resumed = await run('subscriptions.resume', { id: sub.id });
    expect(resumed).toMatchObject({ status: 'active', current_period_start: seconds('2029-09-15T00:00:00Z') });
    const charges = (await chargesOf(sub.id)).map((c) => [c.period_start?.toISOString(), c.paid]).sort();
    expect(charges).toEqual([
      ['2029-08-01T00:00:00.000Z', true],
      ['2029-09-15T00:00:00.000Z', false],
      ['2029-09-15T00:00:00.000Z', true],
    ]);
  });

  it('pause: status paused, paused_at set, renews_at null; pausing again is already_paused', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan()).id });
    ctx.clock.set(at('2027-01-05T00:00:00Z'));
    const paused = await run('subscriptions.pause', { id: sub.id });
    expect(paused).toMatchObject({ status: 'paused', paused_at: seconds('2027-01-05T00:00:00Z'), current_period_end: sub.current_period_end });
    expect(await renewsAtOf(sub.id)).toBeNull();
    await refused('subscriptions.pause', { id: sub.id }, 'already_paused', undefined);
    const events = await listEvents(ctx.db, test.accountId, { resourceId: sub.id });
    expect(events.map((e) => e.type)).toEqual(['subscription.created', 'subscription.paused']);
  });

  it('resume before the period end: active with the same period, no charge', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan()).id });
    await run('subscriptions.pause', { id: sub.id });
    ctx.clock.set(at('2027-01-20T00:00:00Z'));
    const resumed = await run('subscriptions.resume', { id: sub.id });
    expect(resumed).toMatchObject({ status: 'active', paused_at: null, resumed_at: seconds('2027-01-20T00:00:00Z'), current_period_start: sub.current_period_start, current_period_end: sub.current_period_end });
    expect(await chargesOf(sub.id)).toHaveLength(1);
    expect(await renewsAtOf(sub.id)).toBe(sub.current_period_end as number);
    await refused('subscriptions.resume', { id: sub.id }, 'subscription_worked', undefined);
  });

  it('"else if current_period_end is past → charge now and start a new period now"', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan({ amount: '900' })).id });
    await run('subscriptions.pause', { id: sub.id });
    ctx.clock.set(at('2027-03-10T06:30:00Z'));
    const resumed = await run('subscriptions.resume', { id: sub.id });
    expect(resumed).toMatchObject({ status: 'active', current_period_start: seconds('2027-03-10T06:30:00Z'), current_period_end: seconds('2027-04-10T06:30:00Z') });
    const charges = await chargesOf(sub.id);
    expect(charges.map((c) => [c.amount, c.created_at.toISOString()])).toEqual([
      [900, '2027-01-01T00:00:00.000Z'],
      [900, '2027-03-10T06:30:00.000Z'],
    ]);
    expect((await row(sub.id)).last_charge_id).toBe(charges[1]!.charge_id);
    expect(await renewsAtOf(sub.id)).toBe(seconds('2027-04-10T06:30:00Z'));
  });

  it('"If the resume charge fails the subscription stays as it was and the call fails"', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const cus = await customer();
    const sub = await run('subscriptions.create', { customer: cus, plan: (await plan()).id });
    await run('subscriptions.pause', { id: sub.id });
    await run('customers.update', { id: cus, card: await token(TEST_CARDS.declinesOnCharge.number) });
    ctx.clock.set(at('2027-02-15T00:00:00Z'));
    const before = await row(sub.id);
    const error = await rejection(run('subscriptions.resume', { id: sub.id }));
    expect([error.code, error.status]).toEqual(['card_declined', 402]);
    expect(await row(sub.id)).toEqual(before);
    const charges = await chargesOf(sub.id);
    expect(charges.map((c) => c.paid)).toEqual([true, false]);
    expect(error.charge).toBe(charges[1]!.charge_id);
  });

  it('resume inside the trial goes back to trial; trial_end=now ends it with a charge', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const pln = await plan({ trial_days: '10', amount: '1500' });
    const sub = await run('subscriptions.create', { customer: await customer(), plan: pln.id });
    await run('subscriptions.pause', { id: sub.id });
    ctx.clock.set(at('2027-01-03T00:00:00Z'));
    const resumed = await run('subscriptions.resume', { id: sub.id });
    expect(resumed).toMatchObject({ status: 'trial', trial_end: sub.trial_end });
    expect(await renewsAtOf(sub.id)).toBe(sub.trial_end as number);
    await run('subscriptions.pause', { id: sub.id });
    const ended = await run('subscriptions.resume', { id: sub.id, trial_end: 'now' });
    expect(ended).toMatchObject({ status: 'active', trial_end: seconds('2027-01-03T00:00:00Z'), current_period_start: seconds('2027-01-03T00:00:00Z'), current_period_end: seconds('2027-02-03T00:00:00Z') });
    expect((await chargesOf(sub.id)).map((c) => c.amount)).toEqual([1500]);
  });
});

describe('cancel (service rules §1.6)', () => {
  it('cancel: status canceled, canceled_at set, renews_at = period end; again is already_canceled; resume before the end undoes it', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan()).id });
    ctx.clock.set(at('2027-01-10T00:00:00Z'));
    const canceled = await run('subscriptions.cancel', { id: sub.id });
    expect(canceled).toMatchObject({ status: 'canceled', canceled_at: seconds('2027-01-10T00:00:00Z') });
    expect(await renewsAtOf(sub.id)).toBe(sub.current_period_end as number);
    await refused('subscriptions.cancel', { id: sub.id }, 'already_canceled', undefined);
    const resumed = await run('subscriptions.resume', { id: sub.id });
    expect(resumed).toMatchObject({ status: 'active', canceled_at: null, current_period_end: sub.current_period_end });
    expect(await chargesOf(sub.id)).toHaveLength(1);
    expect(await renewsAtOf(sub.id)).toBe(sub.current_period_end as number);
    const events = await listEvents(ctx.db, test.accountId, { resourceId: sub.id });
    expect(events.map((e) => e.type)).toEqual(['subscription.created', 'subscription.canceled', 'subscription.resumed']);
  });
});

describe('cancel after the period has ended', () => {
  it('a paused subscription canceled after its period end is deleted at the cancel, never before it', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan()).id });
    await run('subscriptions.pause', { id: sub.id });
    ctx.clock.set(at('2027-04-01T00:00:00Z')); // two months past the period end
    await run('subscriptions.cancel', { id: sub.id });
    expect(await renewsAtOf(sub.id)).toBe(seconds('2027-04-01T00:00:00Z'));
  });
});

describe('delete (service rules §1.6)', () => {
  it('"with prorate=true refund floor(last charge amount × remaining UTC days / period days) of the last charge"', async () => {
    ctx.clock.set(REFERENCE_INSTANT); // period 2027-01-01 .. 2027-02-01: 31 days
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan({ amount: '3100' })).id });
    ctx.clock.set(at('2027-01-11T15:00:00Z')); // 21 days left (Jan 11..31)
    const deleted = await run('subscriptions.delete', { id: sub.id, prorate: 'true' });
    expect(deleted).toEqual({ deleted: true, id: sub.id, livemode: false });
    const [charge] = await chargesOf(sub.id);
    expect([charge!.amount_refunded, charge!.refunded, charge!.refund_reason, charge!.amount_captured]).toEqual([2100, false, null, 3100]);
    // Settlement reads the refund as a row of its own, dated at the delete.
    const refunds = await ctx.db.selectFrom('refunds').selectAll().where('charge_id', '=', charge!.charge_id).execute();
    expect(refunds.map((r) => [r.refund_id.slice(0, 3), r.amount, r.reason, r.created_at.toISOString()])).toEqual([['re_', 2100, null, '2027-01-11T15:00:00.000Z']]);
    const stored = await row(sub.id);
    expect(stored.deleted_at?.toISOString()).toBe('2027-01-11T15:00:00.000Z');
    expect(stored.renews_at).toBeNull();
    const refundEvents = await listEvents(ctx.db, test.accountId, { resourceId: charge!.charge_id });
    expect(refundEvents.map((e) => e.type)).toEqual(['charge.succeeded', 'charge.refunded']);
    expect(refundEvents[1]!.data).toMatchObject({ amount_refunded: 2100, refunded: false });
    const events = await listEvents(ctx.db, test.accountId, { resourceId: sub.id });
    expect(events.map((e) => e.type)).toEqual(['subscription.created', 'subscription.deleted']);
    await refused('subscriptions.retrieve', { id: sub.id }, 'invalid_id', 'id');
    await refused('subscriptions.delete', { id: sub.id }, 'invalid_id', 'id');
  });

  it('deleting on the day the period started refunds the whole charge (refunded = true)', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan({ amount: '3100' })).id });
    ctx.clock.set(at('2027-01-01T10:00:00Z'));
    await run('subscriptions.delete', { id: sub.id, prorate: 'true' });
    const [charge] = await chargesOf(sub.id);
    expect([charge!.amount_refunded, charge!.refunded]).toEqual([3100, true]);
  });

  it('without prorate nothing is refunded', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan({ amount: '3100' })).id });
    ctx.clock.set(at('2027-01-11T00:00:00Z'));
    await run('subscriptions.delete', { id: sub.id });
    const [charge] = await chargesOf(sub.id);
    expect(charge!.amount_refunded).toBe(0);
  });

  it('"past the 180-day refund window: cannot_prorated_refund_of_subscription"', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan({ interval: 'year', amount: '36500' })).id });
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 181 * DAY_MS));
    await refused('subscriptions.delete', { id: sub.id, prorate: 'true' }, 'cannot_prorated_refund_of_subscription', 'prorate');
    // At 180 days it is still allowed.
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 180 * DAY_MS));
    await run('subscriptions.delete', { id: sub.id, prorate: 'true' });
    const [charge] = await chargesOf(sub.id);
    expect(charge!.amount_refunded).toBe(Math.floor((36500 * 185) / 365));
  });
});

describe('update (service rules §1.6)', () => {
  it('"plan change: the new plan is charged in full immediately and a new cycle starts now"', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan({ amount: '1000' })).id });
    const bigger = await plan({ amount: '5000' });
    ctx.clock.set(at('2027-01-20T08:00:00Z'));
    const changed = await run('subscriptions.update', { id: sub.id, plan: bigger.id });
    expect(changed).toMatchObject({ status: 'active', plan: bigger, current_period_start: seconds('2027-01-20T08:00:00Z'), current_period_end: seconds('2027-02-20T08:00:00Z') });
    const charges = await chargesOf(sub.id);
    expect(charges.map((c) => c.amount)).toEqual([1000, 5000]);
    expect((await row(sub.id)).last_charge_id).toBe(charges[1]!.charge_id);
    expect(await renewsAtOf(sub.id)).toBe(seconds('2027-02-20T08:00:00Z'));
    const events = await listEvents(ctx.db, test.accountId, { resourceId: sub.id });
    expect(events.map((e) => e.type)).toEqual(['subscription.created', 'subscription.updated']);
  });

  it('a plan change to a billing_day plan ends the new period at the next billing instant', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan()).id });
    ctx.clock.set(at('2027-01-20T08:00:00Z'));
    const changed = await run('subscriptions.update', { id: sub.id, plan: (await plan({ amount: '2000', billing_day: '25' })).id });
    expect(changed).toMatchObject({ current_period_start: seconds('2027-01-20T08:00:00Z'), current_period_end: seconds('2027-01-25T00:00:00Z') });
    expect((await chargesOf(sub.id)).map((c) => c.amount)).toEqual([1000, 2000]);
  });

  it('"Decision with prorate=true: charge floor(new amount × remaining days / period days), keep current_period_end"', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan({ amount: '1000' })).id });
    ctx.clock.set(at('2027-01-11T00:00:00Z')); // 21 of 31 days left
    const changed = await run('subscriptions.update', { id: sub.id, plan: (await plan({ amount: '3100' })).id, prorate: 'true' });
    expect(changed).toMatchObject({ prorate: true, current_period_start: sub.current_period_start, current_period_end: sub.current_period_end });
    expect((await chargesOf(sub.id)).map((c) => c.amount)).toEqual([1000, 2100]);
    expect(await renewsAtOf(sub.id)).toBe(sub.current_period_end as number);
  });

  it('prorate=true across calendars (monthly → yearly) is not pro-rated: the yearly plan is charged in full and a new cycle starts', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan({ amount: '1000' })).id });
    ctx.clock.set(at('2027-01-16T00:00:00Z'));
    const yearly = await plan({ amount: '12000', interval: 'year' });
    const changed = await run('subscriptions.update', { id: sub.id, plan: yearly.id, prorate: 'true' });
    expect(changed).toMatchObject({ prorate: true, current_period_start: seconds('2027-01-16T00:00:00Z'), current_period_end: seconds('2028-01-16T00:00:00Z') });
    expect((await chargesOf(sub.id)).map((c) => c.amount)).toEqual([1000, 12000]);
  });

  it('plan change with trial_end starts a trial instead of charging', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan()).id });
    ctx.clock.set(at('2027-01-05T00:00:00Z'));
    const trialEnd = seconds('2027-01-25T00:00:00Z');
    const changed = await run('subscriptions.update', { id: sub.id, plan: (await plan({ amount: '4000' })).id, trial_end: String(trialEnd) });
    expect(changed).toMatchObject({ status: 'trial', trial_start: seconds('2027-01-05T00:00:00Z'), trial_end: trialEnd, current_period_start: seconds('2027-01-05T00:00:00Z'), current_period_end: trialEnd });
    expect(await chargesOf(sub.id)).toHaveLength(1);
    expect(await renewsAtOf(sub.id)).toBe(trialEnd);
  });

  it('a declined plan-change charge leaves the subscription as it was', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const cus = await customer(TEST_CARDS.declinesAbove10000.number);
    const sub = await run('subscriptions.create', { customer: cus, plan: (await plan({ amount: '1000' })).id });
    const expensive = await plan({ amount: '20000' });
    ctx.clock.set(at('2027-01-05T00:00:00Z'));
    const before = await row(sub.id);
    const error = await rejection(run('subscriptions.update', { id: sub.id, plan: expensive.id }));
    expect([error.code, error.status]).toEqual(['card_declined', 402]);
    expect(await row(sub.id)).toEqual(before);
    expect((await chargesOf(sub.id)).map((c) => [c.amount, c.paid])).toEqual([
      [1000, true],
      [20000, false],
    ]);
  });

  it('a plan change onto a plan the customer holds elsewhere is already_subscribed', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const cus = await customer();
    const [a, b] = [await plan(), await plan()];
    const subA = await run('subscriptions.create', { customer: cus, plan: a.id });
    await run('subscriptions.create', { customer: cus, plan: b.id });
    await refused('subscriptions.update', { id: subA.id, plan: b.id }, 'already_subscribed', 'plan');
  });

  it('next_cycle_plan: set to a plan, cleared with an empty string; no charge either way', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const cus = await customer();
    const sub = await run('subscriptions.create', { customer: cus, plan: (await plan()).id });
    const next = await plan({ amount: '2500' });
    const scheduled = await run('subscriptions.update', { id: sub.id, next_cycle_plan: next.id });
    expect(scheduled.next_cycle_plan).toEqual(next);
    expect(scheduled).toMatchObject({ current_period_end: sub.current_period_end, status: 'active' });
    expect((await row(sub.id)).next_cycle_plan_id).toBe(next.id);
    // The customer may already hold the next plan: the switch must always succeed (§1.5).
    await run('subscriptions.create', { customer: cus, plan: next.id });
    const cleared = await run('subscriptions.update', { id: sub.id, next_cycle_plan: '' });
    expect(cleared.next_cycle_plan).toBeNull();
    expect(await chargesOf(sub.id)).toHaveLength(1);
    await refused('subscriptions.update', { id: sub.id, next_cycle_plan: 'pln_nope' }, 'invalid_id', 'next_cycle_plan');
    await refused('subscriptions.update', { id: sub.id, next_cycle_plan: (await plan({ interval: 'year', billing_day: '1' })).id }, 'invalid_plan', 'next_cycle_plan');
  });

  it('"prorate may change only together with a plan change (cannot_change_prorate_status)"', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan()).id });
    await refused('subscriptions.update', { id: sub.id, prorate: 'true' }, 'cannot_change_prorate_status', 'prorate');
    // Sending the value it already has changes nothing and is accepted.
    expect((await run('subscriptions.update', { id: sub.id, prorate: 'false' })).prorate).toBe(false);
  });

  it('metadata merges; trial_end on a trial moves it; trial_end=now on a trial charges now', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan({ trial_days: '30', amount: '800' })).id, metadata: { a: '1' } });
    const updated = await run('subscriptions.update', { id: sub.id, metadata: { b: '2' }, trial_end: String(seconds('2027-01-10T00:00:00Z')) });
    expect(updated).toMatchObject({ metadata: { a: '1', b: '2' }, status: 'trial', trial_end: seconds('2027-01-10T00:00:00Z') });
    expect(await renewsAtOf(sub.id)).toBe(seconds('2027-01-10T00:00:00Z'));
    ctx.clock.set(at('2027-01-04T00:00:00Z'));
    const ended = await run('subscriptions.update', { id: sub.id, trial_end: 'now' });
    expect(ended).toMatchObject({ status: 'active', current_period_start: seconds('2027-01-04T00:00:00Z'), current_period_end: seconds('2027-02-04T00:00:00Z') });
    expect((await chargesOf(sub.id)).map((c) => c.amount)).toEqual([800]);
    expect(await renewsAtOf(sub.id)).toBe(seconds('2027-02-04T00:00:00Z'));
  });

  it('refuses unknown subscriptions, plans and parameters, changing nothing', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const sub = await run('subscriptions.create', { customer: await customer(), plan: (await plan()).id });
    await refused('subscriptions.update', { id: 'sub_nope', metadata: { a: 'b' } }, 'invalid_id', 'id');
    await refused('subscriptions.update', { id: sub.id, plan: 'pln_nope' }, 'invalid_id', 'plan');
    await refused('subscriptions.update', { id: sub.id, plan: (await plan({ interval: 'year', billing_day: '3' })).id }, 'invalid_plan', 'plan');
    await refused('subscriptions.update', { id: sub.id, trial_end: String(toUnixSeconds(REFERENCE_INSTANT) - 1) }, 'invalid_trial_end', 'trial_end');
    await refused('subscriptions.update', { id: sub.id, status: 'active' }, 'invalid_param_key', 'status');
    await refused('subscriptions.pause', { id: 'sub_nope' }, 'invalid_id', 'id');
    await refused('subscriptions.resume', { id: sub.id }, 'subscription_worked', undefined);
  });
});
