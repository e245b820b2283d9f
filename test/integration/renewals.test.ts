import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql, type Insertable, type Kysely } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { subscriptionRenewalsJob } from '../../jobs/subscription-renewals';
import { createAccount } from '../../src/accounts/accounts';
import type { Database, SubscriptionsTable } from '../../src/db/schema';
import { toUnixSeconds } from '../../src/domain/time';
import { createLogger } from '../../src/engine/logger';
import { Scheduler } from '../../src/engine/scheduler';
import { listEvents } from '../../src/events/outbox';
import { cardFingerprint, findTestCard } from '../../src/processor/test-cards';
import { renewsAt } from '../../src/subscriptions/subscription-object';
import { createTestDatabase, isPostgres, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { spawnWorker } from '../support/spawn-worker';
import { seedDueSubscriptions, tallyRenewals } from '../support/renewal-seed';

const ACCOUNT = 'acct_renew';
const JOB = 'subscriptions.renew';
const MINUTE = 60_000;
const t = (iso: string): Date => new Date(iso);

let database: TestDatabase;
let db: Kysely<Database>;

beforeAll(async () => {
  database = await createTestDatabase();
  db = database.store.db;
  await createAccount(testContext(database.store), { name: 'Renewal Shop', id: ACCOUNT });
});
afterAll(async () => database?.drop());
beforeEach(async () => {
  await sql`TRUNCATE plans, subscriptions, charges, refunds, terms, customers, cards, events, job_runs, job_run_groups, job_schedule`.execute(db);
});

async function plan(id: string, amount: number, options: { billingDay?: number; interval?: 'month' | 'year'; trialDays?: number } = {}): Promise<void> {
  await db
    .insertInto('plans')
    .values({
      account_id: ACCOUNT,
      livemode: false,
      plan_id: id,
      amount,
      interval: options.interval ?? 'month',
      name: null,
      trial_days: options.trialDays ?? 0,
      billing_day: options.billingDay ?? null,
      metadata: '{}',
      created_at: t('2026-06-01T00:00:00Z'),
      updated_at: t('2026-06-01T00:00:00Z'),
      deleted_at: null,
    })
    .execute();
}

/** A customer with a default card of the given test-card number (null: no card at all). */
async function customer(id: string, cardNumber: string | null = '4242424242424242', options: { deleted?: boolean } = {}): Promise<void> {
  const created = t('2026-06-01T00:00:00Z');
  await db
    .insertInto('customers')
    .values({ account_id: ACCOUNT, livemode: false, customer_id: id, email: null, description: null, default_card_id: cardNumber ? `car_${id}` : null, metadata: '{}', created_at: created, updated_at: created, deleted_at: options.deleted ? created : null })
    .execute();
  if (cardNumber === null) return;
  const card = findTestCard(cardNumber)!;
  await db
    .insertInto('cards')
    .values({
      account_id: ACCOUNT,
      livemode: false,
      card_id: `car_${id}`,
      customer_id: id,
      fingerprint: cardFingerprint(cardNumber),
      brand: card.brand,
      last4: card.last4,
      exp_month: 12,
      exp_year: 2040,
      funding: card.funding,
      country: card.country,
      issuer: card.issuer,
      name: null,
      address_zip: null,
      address_state: null,
      address_city: null,
      address_line1: null,
      address_line2: null,
      email: null,
      phone: null,
      cvc_check: 'passed',
      metadata: '{}',
      created_at: created,
      updated_at: created,
      deleted_at: null,
    })
    .execute();
}

type SubscriptionFields = Pick<Insertable<SubscriptionsTable>, 'subscription_id' | 'customer_id' | 'plan_id' | 'status' | 'current_period_start' | 'current_period_end'> &
  Partial<Pick<Insertable<SubscriptionsTable>, 'next_cycle_plan_id' | 'prorate' | 'trial_start' | 'trial_end' | 'canceled_at'>>;

/** A subscription row as the operations would have left it, with renews_at from its state. */
async function subscription(fields: SubscriptionFields): Promise<void> {
  const start = fields.current_period_start as Date;
  const row = { trial_start: null, trial_end: null, canceled_at: null, next_cycle_plan_id: null, prorate: false, ...fields };
  await db
    .insertInto('subscriptions')
    .values({
      account_id: ACCOUNT,
      livemode: false,
      start_at: start,
      paused_at: null,
      resumed_at: null,
      last_charge_id: null,
      metadata: '{}',
      created_at: start,
      updated_at: start,
      deleted_at: null,
      ...row,
      renews_at: renewsAt({ status: row.status, trial_end: row.trial_end as Date | null, current_period_end: row.current_period_end as Date, deleted_at: null, canceled_at: (row.canceled_at as Date | null | undefined) ?? null }),
    })
    .execute();
}

const stored = (id: string) => db.selectFrom('subscriptions').selectAll().where('subscription_id', '=', id).executeTakeFirstOrThrow();
const chargesOf = (id: string) => db.selectFrom('charges').selectAll().where('subscription_id', '=', id).orderBy('period_start').execute();
const eventsOf = async (id: string) => (await listEvents(db, ACCOUNT)).filter((e) => e.data.id === id || e.data.subscription === id);

/** A scheduler on a manual clock, running the renewal job's slot `slot` with the clock at `now`. */
let runs = 0;
async function runSlot(slot: Date, options: { now?: Date; batchSize?: number } = {}) {
  // A seed per run: each run is a worker of its own, whose ids must not repeat an earlier run's.
  runs += 1;
  const ctx = testContext(database.store, { at: options.now ?? slot, seed: 100 + runs, config: options.batchSize ? { batchSize: options.batchSize } : {} });
  const outcome = await new Scheduler(ctx, [subscriptionRenewalsJob], { owner: 'test' }).runSlot(JOB, slot);
  expect(outcome.status, outcome.status === 'failed' ? outcome.error : '').toBe('succeeded');
  return outcome.status === 'succeeded' ? outcome.counts : {};
}

describe('subscriptions.renew (service rules §1.5)', () => {
  it('is registered and runs every minute', () => {
    expect(ALL_JOBS.map((job) => job.name)).toContain(JOB);
    expect(subscriptionRenewalsJob.schedule).toBe('* * * * *');
  });

  it('"the new period starts at the old period end (not at the moment the job ran)": due 10:15:30, run at the 10:20 slot', async () => {
    await plan('pln_m', 1000);
    await customer('cus_a');
    const due = t('2027-01-01T10:15:30Z');
    await subscription({ subscription_id: 'sub_late', customer_id: 'cus_a', plan_id: 'pln_m', status: 'active', current_period_start: t('2026-12-01T10:15:30Z'), current_period_end: due });

    const counts = await runSlot(t('2027-01-01T10:20:00Z'));
    expect(counts).toEqual({ renewed: 1, failed: 0, trials_ended: 0, deleted: 0, batches: 1 });

    const sub = await stored('sub_late');
    expect(sub).toMatchObject({ status: 'active', current_period_start: due, current_period_end: t('2027-02-01T10:15:30Z'), renews_at: t('2027-02-01T10:15:30Z') });
    const [charge, ...others] = await chargesOf('sub_late');
    expect(others).toEqual([]);
    expect(charge).toMatchObject({ amount: 1000, paid: true, captured: true, captured_at: due, created_at: due, period_start: due, card_id: 'car_cus_a', customer_id: 'cus_a' });
    expect(sub.last_charge_id).toBe(charge!.charge_id);

    const events = await eventsOf('sub_late');
    expect(events.map((e) => [e.type, e.createdAt.toISOString()])).toEqual([
      ['charge.succeeded', due.toISOString()],
      ['subscription.renewed', due.toISOString()],
    ]);
    // The event data is the subscription object, with its plan embedded.
    expect(events[1]!.data).toMatchObject({
      id: 'sub_late',
      object: 'subscription',
      status: 'active',
      current_period_start: toUnixSeconds(due),
      current_period_end: toUnixSeconds(t('2027-02-01T10:15:30Z')),
      plan: { id: 'pln_m', object: 'plan', amount: 1000 },
      next_cycle_plan: null,
    });
    expect(events[0]!.data).toMatchObject({ id: charge!.charge_id, object: 'charge', amount: 1000, subscription: 'sub_late', card: { id: 'car_cus_a', last4: '4242' } });
  });

  it('renews at each month end when billing_day is 31 (Feb 28, then Mar 31, then Apr 30)', async () => {
    await plan('pln_31', 1000, { billingDay: 31 });
    await customer('cus_b');
    await subscription({ subscription_id: 'sub_31', customer_id: 'cus_b', plan_id: 'pln_31', status: 'active', current_period_start: t('2026-12-31T00:00:00Z'), current_period_end: t('2027-01-31T00:00:00Z') });
    for (const slot of ['2027-01-31', '2027-02-28', '2027-03-31']) await runSlot(t(`${slot}T00:00:00Z`));
    expect((await chargesOf('sub_31')).map((c) => c.period_start!.toISOString().slice(0, 10))).toEqual(['2027-01-31', '2027-02-28', '2027-03-31']);
    expect(await stored('sub_31')).toMatchObject({ current_period_start: t('2027-03-31T00:00:00Z'), current_period_end: t('2027-04-30T00:00:00Z') });
  });

  it('a run late by more than a period charges every period it missed, each at its own instant', async () => {
    await plan('pln_m', 1000);
    await customer('cus_c');
    await subscription({ subscription_id: 'sub_behind', customer_id: 'cus_c', plan_id: 'pln_m', status: 'active', current_period_start: t('2026-11-15T03:00:00Z'), current_period_end: t('2026-12-15T03:00:00Z') });
    const counts = await runSlot(t('2027-01-20T00:00:00Z'));
    expect(counts).toMatchObject({ renewed: 2 });
    expect((await chargesOf('sub_behind')).map((c) => c.created_at.toISOString())).toEqual(['2026-12-15T03:00:00.000Z', '2027-01-15T03:00:00.000Z']);
    expect((await stored('sub_behind')).renews_at).toEqual(t('2027-02-15T03:00:00Z'));
  });

  it('"At trial end the first charge happens and the cycle starts there (without billing_day, trial end is the new anchor)"', async () => {
    await plan('pln_trial', 1500, { trialDays: 14 });
    await customer('cus_d');
    const trialEnd = t('2027-01-03T05:00:00Z');
    await subscription({ subscription_id: 'sub_trial', customer_id: 'cus_d', plan_id: 'pln_trial', status: 'trial', trial_start: t('2026-12-20T05:00:00Z'), trial_end: trialEnd, current_period_start: t('2026-12-20T05:00:00Z'), current_period_end: trialEnd });
    expect(await runSlot(t('2027-01-03T05:00:00Z'))).toEqual({ renewed: 0, failed: 0, trials_ended: 1, deleted: 0, batches: 1 });
    expect(await stored('sub_trial')).toMatchObject({ status: 'active', current_period_start: trialEnd, current_period_end: t('2027-02-03T05:00:00Z'), renews_at: t('2027-02-03T05:00:00Z'), trial_end: trialEnd });
    expect((await chargesOf('sub_trial')).map((c) => [c.amount, c.created_at.toISOString()])).toEqual([[1500, trialEnd.toISOString()]]);
  });

  it('"With billing_day and prorate = true: at trial end charge the pro-rated amount up to the next billing instant"; without prorate the full amount', async () => {
    await plan('pln_bd1', 3100, { billingDay: 1 });
    await customer('cus_e');
    await customer('cus_f');
    const trialEnd = t('2027-01-10T03:00:00Z'); // 12:00 JST
    const trial = { plan_id: 'pln_bd1', status: 'trial', trial_start: t('2026-12-27T03:00:00Z'), trial_end: trialEnd, current_period_start: t('2026-12-27T03:00:00Z'), current_period_end: trialEnd } as const;
    await subscription({ ...trial, subscription_id: 'sub_prorated', customer_id: 'cus_e', prorate: true });
    await subscription({ ...trial, subscription_id: 'sub_full', customer_id: 'cus_f', prorate: false });
    expect(await runSlot(t('2027-01-10T03:00:00Z'))).toMatchObject({ trials_ended: 2 });
    // N = Jan 10..31 = 22 UTC days, D = 31: floor(3100 × 22 / 31) = 2200.
    expect((await chargesOf('sub_prorated')).map((c) => c.amount)).toEqual([2200]);
    expect((await chargesOf('sub_full')).map((c) => c.amount)).toEqual([3100]);
    for (const id of ['sub_prorated', 'sub_full']) {
      expect(await stored(id)).toMatchObject({ status: 'active', current_period_start: trialEnd, current_period_end: t('2027-02-01T00:00:00Z') });
    }
  });

  it('"if next_cycle_plan is set, the plan switches to it first … and next_cycle_plan becomes null; the charge uses the new plan"', async () => {
    await plan('pln_small', 1000);
    await plan('pln_big', 2500);
    await customer('cus_g');
    const end = t('2027-01-05T08:30:00Z');
    await subscription({ subscription_id: 'sub_switch', customer_id: 'cus_g', plan_id: 'pln_small', next_cycle_plan_id: 'pln_big', status: 'active', current_period_start: t('2026-12-05T08:30:00Z'), current_period_end: end });
    await runSlot(t('2027-01-05T08:30:00Z'));
    expect(await stored('sub_switch')).toMatchObject({ plan_id: 'pln_big', next_cycle_plan_id: null, status: 'active', current_period_start: end });
    expect((await chargesOf('sub_switch')).map((c) => c.amount)).toEqual([2500]);
    const renewed = (await eventsOf('sub_switch')).find((e) => e.type === 'subscription.renewed')!;
    expect(renewed.data).toMatchObject({ plan: { id: 'pln_big', amount: 2500 }, next_cycle_plan: null });
  });

  it('"on failure: status paused, paused_at set, the cycle stops; current_period_end is left as it was"; no automatic retry', async () => {
    await plan('pln_m', 1000);
    await plan('pln_next', 2000);
    await customer('cus_h', '4000000000001026'); // every renewal is declined
    const end = t('2027-01-02T01:00:00Z');
    await subscription({ subscription_id: 'sub_declined', customer_id: 'cus_h', plan_id: 'pln_m', next_cycle_plan_id: 'pln_next', status: 'active', current_period_start: t('2026-12-02T01:00:00Z'), current_period_end: end });
    expect(await runSlot(t('2027-01-02T01:05:00Z'))).toEqual({ renewed: 0, failed: 1, trials_ended: 0, deleted: 0, batches: 1 });
    // The switch always happens, even when the charge then fails.
    expect(await stored('sub_declined')).toMatchObject({ status: 'paused', paused_at: end, current_period_start: t('2026-12-02T01:00:00Z'), current_period_end: end, renews_at: null, last_charge_id: null, plan_id: 'pln_next', next_cycle_plan_id: null });
    expect((await chargesOf('sub_declined')).map((c) => [c.amount, c.paid, c.failure_code, c.created_at.toISOString()])).toEqual([[2000, false, 'card_declined', end.toISOString()]]);
    expect((await eventsOf('sub_declined')).map((e) => e.type)).toEqual(['charge.failed', 'subscription.paused']);
    // Later slots leave it alone.
    expect(await runSlot(t('2027-02-02T01:05:00Z'))).toMatchObject({ failed: 0, batches: 0 });
    expect(await chargesOf('sub_declined')).toHaveLength(1);
  });

  it('a subscription whose customer has no default card, or was deleted, is paused like a declined renewal (no charge row)', async () => {
    await plan('pln_m', 1000);
    await customer('cus_nocard', null);
    await customer('cus_gone', '4242424242424242', { deleted: true });
    const end = t('2027-01-04T00:00:00Z');
    for (const [id, cus] of [['sub_nocard', 'cus_nocard'], ['sub_gone', 'cus_gone']] as const) {
      await subscription({ subscription_id: id, customer_id: cus, plan_id: 'pln_m', status: 'active', current_period_start: t('2026-12-04T00:00:00Z'), current_period_end: end });
    }
    expect(await runSlot(end)).toMatchObject({ failed: 2, renewed: 0 });
    for (const id of ['sub_nocard', 'sub_gone']) {
      expect(await stored(id)).toMatchObject({ status: 'paused', paused_at: end, current_period_end: end, renews_at: null });
      expect(await chargesOf(id)).toEqual([]);
      expect((await eventsOf(id)).map((e) => e.type)).toEqual(['subscription.paused']);
    }
  });

  it('"A canceled subscription reaching its period end is deleted (event subscription.deleted)"', async () => {
    await plan('pln_m', 1000);
    await customer('cus_i');
    const end = t('2027-01-06T12:00:00Z');
    await subscription({ subscription_id: 'sub_canceled', customer_id: 'cus_i', plan_id: 'pln_m', status: 'canceled', canceled_at: t('2026-12-20T00:00:00Z'), current_period_start: t('2026-12-06T12:00:00Z'), current_period_end: end });
    expect(await runSlot(t('2027-01-06T12:00:00Z'))).toEqual({ renewed: 0, failed: 0, trials_ended: 0, deleted: 1, batches: 1 });
    expect(await stored('sub_canceled')).toMatchObject({ status: 'canceled', deleted_at: end, renews_at: null, current_period_end: end });
    expect(await chargesOf('sub_canceled')).toEqual([]);
    const events = await eventsOf('sub_canceled');
    expect(events.map((e) => [e.type, e.createdAt.toISOString()])).toEqual([['subscription.deleted', end.toISOString()]]);
    expect(events[0]!.data).toMatchObject({ id: 'sub_canceled', object: 'subscription', status: 'canceled' });
  });

  it('a canceled subscription that was paused afterwards is still deleted at its period end (pausing does not undo a cancel)', async () => {
    await plan('pln_m', 1000);
    await customer('cus_pc');
    const end = t('2027-01-08T12:00:00Z');
    await subscription({ subscription_id: 'sub_paused_canceled', customer_id: 'cus_pc', plan_id: 'pln_m', status: 'paused', canceled_at: t('2026-12-20T00:00:00Z'), current_period_start: t('2026-12-08T12:00:00Z'), current_period_end: end });
    expect(await runSlot(t('2027-01-08T12:00:00Z'))).toEqual({ renewed: 0, failed: 0, trials_ended: 0, deleted: 1, batches: 1 });
    expect(await stored('sub_paused_canceled')).toMatchObject({ status: 'paused', deleted_at: end, renews_at: null });
    expect(await chargesOf('sub_paused_canceled')).toEqual([]);
    expect((await eventsOf('sub_paused_canceled')).map((e) => [e.type, e.createdAt.toISOString()])).toEqual([['subscription.deleted', end.toISOString()]]);
  });

  it('works in batches of the configured size, each due subscription once', async () => {
    const due = t('2027-01-01T00:00:00Z');
    await seedDueSubscriptions(db, { count: 10, dueAt: due });
    expect(await runSlot(due, { batchSize: 4 })).toEqual({ renewed: 10, failed: 0, trials_ended: 0, deleted: 0, batches: 3 });
    expect(await tallyRenewals(db, due)).toEqual({ subscriptions: 10, renewed: 10, charges: 10, charged_twice: 0, mismatched: 0, renewed_events: 10, charge_events: 10 });
  });

  it('packs small accounts into one batch; an account that fills batches gets one per round and starves nobody', async () => {
    const due = t('2027-01-01T00:00:00Z');
    // acct_r1 … acct_r5: 2 due each; acct_r0: 2 + 20.
    await seedDueSubscriptions(db, { count: 12, dueAt: due, accounts: 6 });
    await seedDueSubscriptions(db, { count: 20, dueAt: due, accounts: 1, prefix: 'big' });
    const lines: { msg?: string; account?: string; accounts?: number; batch?: number }[] = [];
    const log = createLogger({ level: 'debug', destination: { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) } });
    const ctx = { ...testContext(database.store, { at: due, seed: 7, config: { batchSize: 5 } }), log };
    const outcome = await new Scheduler(ctx, [subscriptionRenewalsJob], { owner: 'test' }).runSlot(JOB, due);
    expect(outcome).toMatchObject({ status: 'succeeded', counts: { renewed: 32, failed: 0, batches: 8 } });
    // Round 1: the big account's first batch, then the small ones two by two (2 + 2 ≤ 5); then the rest of the big one.
    const batches = lines.filter((line) => line.msg === 'batch committed').map((line) => [line.account, line.accounts]);
    expect(batches).toEqual([
      ['acct_r0', 1],
      ['acct_r1', 2],
      ['acct_r3', 2],
      ['acct_r5', 1],
      ['acct_r0', 1],
      ['acct_r0', 1],
      ['acct_r0', 1],
      ['acct_r0', 1],
    ]);
    const tally = await sql<{ n: number; twice: number }>`
      SELECT count(*)::int AS n, (SELECT count(*) FROM (SELECT 1 FROM charges GROUP BY account_id, subscription_id HAVING count(*) > 1) x)::int AS twice FROM charges`.execute(db);
    expect(tally.rows[0]).toEqual({ n: 32, twice: 0 });
  });

  it('running the same slot twice (a replay) charges nobody twice', async () => {
    const due = t('2027-01-01T00:00:00Z');
    await seedDueSubscriptions(db, { count: 7, dueAt: due });
    const slot = t('2027-01-01T00:03:00Z');
    expect(await runSlot(slot)).toMatchObject({ renewed: 7 });
    expect(await runSlot(slot, { now: t('2027-01-01T00:09:00Z') })).toEqual({ renewed: 0, failed: 0, trials_ended: 0, deleted: 0, batches: 0 });
    expect(await tallyRenewals(db, due)).toMatchObject({ subscriptions: 7, renewed: 7, charges: 7, charged_twice: 0, mismatched: 0, renewed_events: 7 });
    const ledger = await db.selectFrom('job_runs').select(['status', 'attempt']).where('job', '=', JOB).where('slot', '=', slot).executeTakeFirstOrThrow();
    expect(ledger).toEqual({ status: 'succeeded', attempt: 2 });
  });

  it('the (subscription, period start) unique charge is the last line of defence: a period billed already is not billed again', async () => {
    const due = t('2027-01-01T00:00:00Z');
    await seedDueSubscriptions(db, { count: 3, dueAt: due });
    await runSlot(due);
    const before = await stored('sub_r00000001');
    // As if the subscription's update had been lost while its charge was kept.
    await db.updateTable('subscriptions').set({ current_period_start: t('2026-12-01T00:00:00Z'), current_period_end: due, renews_at: due }).where('subscription_id', '=', 'sub_r00000001').execute();
    expect(await runSlot(t('2027-01-01T00:01:00Z'))).toMatchObject({ renewed: 1 });
    expect(await chargesOf('sub_r00000001')).toHaveLength(1);
    expect(await stored('sub_r00000001')).toMatchObject({ current_period_start: due, renews_at: before.renews_at, last_charge_id: before.last_charge_id });
    // No event for the charge that was not written; the subscription's move is reported.
    const events = await sql<{ type: string; n: number }>`
      SELECT type, count(*)::int AS n FROM events WHERE data->>'subscription' = 'sub_r00000001' OR resource_id = 'sub_r00000001' GROUP BY type ORDER BY type`.execute(db);
    expect(events.rows).toEqual([
      { type: 'charge.succeeded', n: 1 },
      { type: 'subscription.renewed', n: 2 },
    ]);
  });

  it('a batch where the unique index refuses one charge writes the others, their events and every subscription move', async () => {
    const due = t('2027-01-01T00:00:00Z');
    // One account: a batch holds one account's rows (jobs work account by account).
    await seedDueSubscriptions(db, { count: 3, dueAt: due, accounts: 1 });
    await runSlot(due);
    const next = (await stored('sub_r00000002')).renews_at!;
    // sub 1 as if its update had been lost (its January period is billed already); subs 2 and 3
    // are due for February at the same slot: one batch with one refused charge and two written.
    await db.updateTable('subscriptions').set({ current_period_start: t('2026-12-01T00:00:00Z'), current_period_end: due, renews_at: due }).where('subscription_id', '=', 'sub_r00000001').execute();
    // sub 1 moves on to February in that batch and is renewed for it in a second one.
    expect(await runSlot(next)).toMatchObject({ renewed: 4, failed: 0, batches: 2 });
    for (const id of ['sub_r00000001', 'sub_r00000002', 'sub_r00000003']) {
      expect((await chargesOf(id)).map((c) => c.period_start), id).toEqual([due, next]);
    }
    // One charge event per charge written (none for the refused one), one renewal event per move.
    const tally = await sql<{ type: string; n: number; charges: number }>`
      SELECT e.type, count(*)::int AS n, count(c.charge_id)::int AS charges FROM events e
      LEFT JOIN charges c ON e.type LIKE 'charge.%' AND c.charge_id = e.resource_id
      WHERE e.type IN ('charge.succeeded', 'subscription.renewed') GROUP BY e.type ORDER BY e.type`.execute(db);
    expect(tally.rows).toEqual([
      { type: 'charge.succeeded', n: 6, charges: 6 },
      { type: 'subscription.renewed', n: 7, charges: 0 },
    ]);
  });

  it('nextDueAt is the earliest renews_at strictly after the given instant', async () => {
    await plan('pln_m', 1000);
    await customer('cus_j');
    await subscription({ subscription_id: 'sub_n1', customer_id: 'cus_j', plan_id: 'pln_m', status: 'active', current_period_start: t('2026-12-10T00:00:00Z'), current_period_end: t('2027-01-10T00:00:42Z') });
    await subscription({ subscription_id: 'sub_n2', customer_id: 'cus_j', plan_id: 'pln_m', status: 'active', current_period_start: t('2026-12-05T00:00:00Z'), current_period_end: t('2027-01-05T07:00:00Z') });
    const ctx = testContext(database.store);
    expect(await subscriptionRenewalsJob.nextDueAt!(ctx, REFERENCE_INSTANT)).toEqual(t('2027-01-05T07:00:00Z'));
    expect(await subscriptionRenewalsJob.nextDueAt!(ctx, t('2027-01-05T07:00:00Z'))).toEqual(t('2027-01-10T00:00:42Z'));
    expect(await subscriptionRenewalsJob.nextDueAt!(ctx, t('2027-01-10T00:00:42Z'))).toBeNull();
  });
});

// Real concurrency and a real crash need separate processes on one server; PGlite is in-process.
describe.runIf(isPostgres())('subscriptions.renew across processes (PostgreSQL)', () => {
  const workerScript = fileURLToPath(new URL('../support/renewal-worker-process.ts', import.meta.url));
  const at = (minutes: number): Date => new Date(REFERENCE_INSTANT.getTime() + minutes * MINUTE);

  const startWorker = (env: Record<string, string>) => spawnWorker(workerScript, database.url!, env);

  it('two schedulers in two processes: every due subscription is charged exactly once', async () => {
    const due = at(0);
    await seedDueSubscriptions(db, { count: 2_000, dueAt: due, accounts: 5 });
    // Both wake at minute 5 after a downtime: slots 0..5 to share, each taking everything due as of it,
    // so the two processes work on the same due rows at once.
    await db.insertInto('job_schedule').values({ job: JOB, high_water: at(-1), updated_at: at(-1) }).execute();
    // Each process's first batch waits, its rows locked, until the other's is in flight too: both
    // do part of the work at the same time, whatever the machine's load.
    const meeting = mkdtempSync(join(tmpdir(), 'kessai-rendezvous-'));
    const env = { KESSAI_AT: at(5).toISOString(), KESSAI_BATCH_SIZE: '50', KESSAI_PAUSE_MS: '5', KESSAI_RENDEZVOUS: `${meeting}:2` };
    const workers = [startWorker({ ...env, KESSAI_OWNER: 'proc-a' }), startWorker({ ...env, KESSAI_OWNER: 'proc-b' })];
    const results = await Promise.all(workers.map((w) => w.exited));
    rmSync(meeting, { recursive: true, force: true });
    for (const [i, result] of results.entries()) expect(result, workers[i]!.errors()).toEqual({ code: 0, signal: null });
    for (const worker of workers) expect(worker.output()).toMatch(/batch 1 authorizing 50/);

    expect(await tallyRenewals(db, due)).toEqual({ subscriptions: 2_000, renewed: 2_000, charges: 2_000, charged_twice: 0, mismatched: 0, renewed_events: 2_000, charge_events: 2_000 });
    const ledger = await sql<{ n: number; ok: number }>`SELECT count(*)::int AS n, count(*) FILTER (WHERE status = 'succeeded')::int AS ok FROM job_runs WHERE job = ${JOB}`.execute(db);
    expect(ledger.rows[0]).toEqual({ n: 6, ok: 6 });
  });

  it('a worker killed with SIGKILL mid-batch leaves no partial batch; after a restart every due subscription is charged exactly once', async () => {
    const due = at(0);
    await seedDueSubscriptions(db, { count: 500, dueAt: due });
    const env = { KESSAI_AT: at(0).toISOString(), KESSAI_BATCH_SIZE: '40', KESSAI_PAUSE_MS: '300', KESSAI_LEASE_MS: String(5 * MINUTE) };
    const victim = startWorker({ ...env, KESSAI_OWNER: 'victim' });
    // Killed while batch 3 holds its rows and waits for the card network: batches 1 and 2 committed.
    await new Promise<void>((resolve) => {
      const poll = setInterval(() => {
        if (victim.output().includes('batch 3 authorizing')) {
          clearInterval(poll);
          victim.child.kill('SIGKILL');
          resolve();
        }
      }, 10);
    });
    expect(await victim.exited).toMatchObject({ signal: 'SIGKILL' });

    // Whole batches only: every renewed subscription has its charge and events, nothing else has any.
    const partial = await tallyRenewals(db, due);
    expect(partial.renewed).toBe(80);
    expect(partial).toMatchObject({ charges: 80, charged_twice: 0, mismatched: 0, renewed_events: 80, charge_events: 80 });
    expect((await db.selectFrom('job_runs').select(['status', 'owner']).where('slot', '=', at(0)).executeTakeFirstOrThrow())).toEqual({ status: 'running', owner: 'victim' });

    // Restart at minute 6: the lapsed slot 0 is taken over (attempt 2) and finishes the work.
    const rescuer = startWorker({ ...env, KESSAI_OWNER: 'rescuer', KESSAI_AT: at(6).toISOString(), KESSAI_PAUSE_MS: '0' });
    expect(await rescuer.exited, rescuer.errors()).toEqual({ code: 0, signal: null });
    expect(await tallyRenewals(db, due)).toEqual({ subscriptions: 500, renewed: 500, charges: 500, charged_twice: 0, mismatched: 0, renewed_events: 500, charge_events: 500 });
    expect(await db.selectFrom('job_runs').select(['status', 'owner', 'attempt']).where('slot', '=', at(0)).executeTakeFirstOrThrow()).toEqual({ status: 'succeeded', owner: 'rescuer', attempt: 2 });
  });
});
