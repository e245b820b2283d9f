import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { holdExpiryJob } from '../../jobs/hold-expiry';
import { holdReauthorizationsJob } from '../../jobs/hold-reauthorizations';
import { threeDSecureTimeoutsJob } from '../../jobs/three-d-secure-timeouts';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { expireHolds, nextHoldExpiryDueAt, nextReauthDueAt, nextThreeDSecureTimeoutAt, setReauthSettings } from '../../src/charges/hold-jobs';
import { MS_PER_DAY } from '../../src/domain/time';
import type { Context } from '../../src/engine/context';
import type { JobDefinition, SlotRun } from '../../src/engine/job';
import { Scheduler } from '../../src/engine/scheduler';
import { listEvents } from '../../src/events/outbox';
import { runOperation } from '../../src/api/operations';
import type { SettlementRequest } from '../../src/processor/card-network';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { createTestDatabase, isPostgres, testContext, type TestDatabase } from '../support/database';
import { rejection } from '../support/rejections';

let database: TestDatabase;
let ctx: ReturnType<typeof testContext>;
const merchant: Caller = { accountId: 'acct_holds', livemode: false, kind: 'secret' };
const optedIn: Caller = { accountId: 'acct_reauth', livemode: false, kind: 'secret' };
const HOUR = 3600_000;
const t = (iso: string): Date => new Date(iso);

interface Charge {
  id: string;
  expired_at: number | null;
  captured: boolean;
  paid: boolean;
  failure_code: string | null;
}

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 77 });
  await createAccount(ctx, { name: 'Holds Shop', id: merchant.accountId });
  await createAccount(ctx, { name: 'Reauth Shop', id: optedIn.accountId });
});
afterAll(async () => database?.drop());

// Every test starts with no live hold and no pending 3-D Secure charge left by an earlier one.
beforeEach(async () => {
  await sql`UPDATE charges SET released_at = expired_at WHERE paid AND NOT captured AND NOT refunded AND released_at IS NULL AND expired_at IS NOT NULL`.execute(ctx.db);
  await sql`UPDATE charges SET tds_expires_at = NULL WHERE tds_expires_at IS NOT NULL`.execute(ctx.db);
  await setReauthSettings(ctx.db, optedIn.accountId, { enabled: true, leadHours: 24, maxCount: 1 });
});

async function hold(who: Caller, at: Date, params: Record<string, unknown> = {}, number: string = TEST_CARDS.visa.number): Promise<Charge> {
  ctx.clock.set(at);
  const token = (await runOperation(ctx, who, 'tokens.create', { card: { number, exp_month: '12', exp_year: '2035', cvc: '123' } })) as { id: string };
  return (await runOperation(ctx, who, 'charges.create', { amount: 1000, currency: 'jpy', card: token.id, capture: false, ...params })) as Charge;
}

/** A network that records every release it is asked for. */
function watched(base: Context): { ctx: Context; released: SettlementRequest[]; authorized: string[] } {
  const released: SettlementRequest[] = [];
  const authorized: string[] = [];
  const processor = {
    ...base.processor,
    release: async (requests: readonly SettlementRequest[]) => {
      released.push(...requests);
      return base.processor.release(requests);
    },
    authorize: async (requests: Parameters<Context['processor']['authorize']>[0]) => {
      authorized.push(...requests.map((r) => r.reference));
      return base.processor.authorize(requests);
    },
  };
  return { ctx: { ...base, processor }, released, authorized };
}

let runs = 0;
/** Runs one slot of a job through the scheduler (a fresh worker with its own id seed). */
async function runSlot(job: JobDefinition, slot: Date, options: { now?: Date; batchSize?: number; watch?: ReturnType<typeof watched> } = {}) {
  runs += 1;
  const base = testContext(database.store, { at: options.now ?? slot, seed: 500 + runs, config: options.batchSize ? { batchSize: options.batchSize } : {} });
  const runCtx = options.watch ? { ...base, processor: options.watch.ctx.processor } : base;
  const outcome = await new Scheduler(runCtx, [job], { owner: `test-${runs}` }).runSlot(job.name, slot);
  expect(outcome.status, outcome.status === 'failed' ? outcome.error : '').toBe('succeeded');
  return outcome.status === 'succeeded' ? outcome.counts : {};
}

const row = (id: string) => ctx.db.selectFrom('charges').selectAll().where('charge_id', '=', id).executeTakeFirstOrThrow();
const eventsOf = async (who: Caller, id: string) => (await listEvents(ctx.db, who.accountId, { resourceId: id })).map((e) => [e.type, e.createdAt]);

describe('charges.expire_holds (service rules §2: "After expired_at the hold is released by a scheduled job")', () => {
  it('is registered every minute, after the renewals and the reauthorizations', () => {
    const names = ALL_JOBS.map((job) => job.name);
    expect(names.indexOf('subscriptions.renew')).toBeLessThan(names.indexOf('charges.reauthorize'));
    expect(names.indexOf('charges.reauthorize')).toBeLessThan(names.indexOf('charges.expire_holds'));
    expect(names).toContain('charges.expire_three_d_secure');
    expect(holdExpiryJob.schedule).toBe('* * * * *');
  });

  it('releases each due hold once, dated at its own expired_at; not-yet-due holds are untouched; the same slot twice releases nothing twice', async () => {
    const a = await hold(merchant, t('2027-01-01T00:00:00Z'), { expiry_days: 1 });
    const b = await hold(merchant, t('2027-01-01T00:30:00Z'), { expiry_days: 1 });
    const later = await hold(merchant, t('2027-01-01T02:00:00Z'), { expiry_days: 1 });
    const captured = await hold(merchant, t('2027-01-01T00:00:00Z'), { expiry_days: 1 });
    await runOperation(ctx, merchant, 'charges.capture', { id: captured.id });
    const watch = watched(ctx);
    // A late slot: 01:05 the next day covers a (due 00:00) and b (due 00:30), not `later` (due 02:00).
    const slot = t('2027-01-02T01:05:00Z');
    expect(await runSlot(holdExpiryJob, slot, { watch, batchSize: 1 })).toEqual({ released: 2, batches: 2 });
    expect(watch.released.map((r) => [r.reference, r.amount, r.at])).toEqual([
      [a.id, 1000, t('2027-01-02T00:00:00Z')],
      [b.id, 1000, t('2027-01-02T00:30:00Z')],
    ]);
    expect(await row(a.id)).toMatchObject({ released_at: t('2027-01-02T00:00:00Z'), captured: false, refunded: false, amount_refunded: 0 });
    expect(await eventsOf(merchant, a.id)).toEqual([['charge.succeeded', t('2027-01-01T00:00:00Z')], ['charge.updated', t('2027-01-02T00:00:00Z')]]);
    expect((await row(later.id)).released_at).toBeNull();
    expect((await row(captured.id)).released_at).toBeNull();
    // The same slot again (a replay, or a second worker after the first): nothing left.
    expect(await runSlot(holdExpiryJob, slot, { watch, now: t('2027-01-02T01:09:00Z') })).toEqual({ released: 0, batches: 0 });
    expect(watch.released).toHaveLength(2);
    expect(await runSlot(holdExpiryJob, t('2027-01-02T02:01:00Z'), { watch })).toEqual({ released: 1, batches: 1 });
    expect(await eventsOf(merchant, later.id)).toEqual([['charge.succeeded', t('2027-01-01T02:00:00Z')], ['charge.updated', t('2027-01-02T02:00:00Z')]]);
  });

  it('"the hold is still good at the expired_at instant itself": a slot exactly at expired_at releases nothing; nextDueAt is just past it', async () => {
    const h = await hold(merchant, t('2027-01-05T00:00:00Z'), { expiry_days: 2 });
    const expiry = t('2027-01-07T00:00:00Z');
    expect(await nextHoldExpiryDueAt(ctx.db, t('2027-01-05T00:00:00Z'))).toEqual(new Date(expiry.getTime() + 1));
    expect(await runSlot(holdExpiryJob, expiry)).toMatchObject({ released: 0 });
    expect(await runSlot(holdExpiryJob, t('2027-01-07T00:01:00Z'))).toMatchObject({ released: 1 });
    expect((await row(h.id)).released_at).toEqual(expiry);
    expect(await nextHoldExpiryDueAt(ctx.db, t('2027-01-05T00:00:00Z'))).toBeNull();
  });

  it('the release event carries the same charge object as charges.retrieve (rendered by PostgreSQL)', async () => {
    await runOperation(ctx, merchant, 'customers.create', { id: 'cus_hold_render', email: 'a@example.com', card: ((await runOperation(ctx, merchant, 'tokens.create', { card: { number: TEST_CARDS.jcb.number, exp_month: '3', exp_year: '2031', cvc: '123', name: 'TARO YAMADA' } })) as { id: string }).id });
    ctx.clock.set(t('2027-02-01T00:00:00Z'));
    const byCustomer = (await runOperation(ctx, merchant, 'charges.create', { amount: 777, currency: 'jpy', customer: 'cus_hold_render', capture: false, expiry_days: 1, description: 'desc', metadata: { k: 'v' } })) as Charge;
    const byToken = await hold(merchant, t('2027-02-01T00:00:00Z'), { expiry_days: 1 }, TEST_CARDS.overseas.number);
    await runSlot(holdExpiryJob, t('2027-02-02T00:01:00Z'));
    for (const id of [byCustomer.id, byToken.id]) {
      const [event] = (await listEvents(ctx.db, merchant.accountId, { resourceId: id, type: 'charge.updated' })).map((e) => e.data);
      expect(event).toEqual(await runOperation(ctx, merchant, 'charges.retrieve', { id }));
    }
  });

  it('capture after release is charge_expired; a refund of a released hold writes no refunds row and releases nothing again', async () => {
    const h = await hold(merchant, t('2027-03-01T00:00:00Z'), { expiry_days: 1 });
    await runSlot(holdExpiryJob, t('2027-03-02T00:01:00Z'));
    ctx.clock.set(t('2027-03-02T01:00:00Z'));
    expect((await rejection(runOperation(ctx, merchant, 'charges.capture', { id: h.id }))).code).toBe('charge_expired');
    const watch = watched(ctx);
    expect(await runOperation(watch.ctx, merchant, 'charges.refund', { id: h.id })).toMatchObject({ refunded: true, amount_refunded: 1000 });
    expect(watch.released).toEqual([]);
    expect(await ctx.db.selectFrom('refunds').select('refund_id').where('charge_id', '=', h.id).execute()).toEqual([]);
  });

  it.runIf(isPostgres())('two workers taking batches at once release each hold once (FOR UPDATE SKIP LOCKED)', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 12; i += 1) ids.push((await hold(merchant, new Date(t('2027-04-01T00:00:00Z').getTime() + i * 1000), { expiry_days: 1 })).id);
    const other = await database.openAnother();
    const released: SettlementRequest[] = [];
    const worker = (db: Context['db'], seed: number) => {
      const base = testContext(database.store, { at: t('2027-04-02T01:00:00Z'), seed, config: { batchSize: 2 } });
      const wctx: Context = { ...base, db, processor: { ...base.processor, release: async (r) => (released.push(...r), base.processor.release(r)) } };
      const run: SlotRun = { slot: t('2027-04-02T01:00:00Z'), attempt: 1, leaseClock: base.clock, signal: new AbortController().signal, assertClaim: async () => {}, recordBatch: async () => {} };
      return expireHolds(wctx, run);
    };
    const [one, two] = await Promise.all([worker(ctx.db, 901), worker(other.db, 902)]);
    expect((one.released ?? 0) + (two.released ?? 0)).toBe(12);
    expect(released.map((r) => r.reference).sort()).toEqual([...ids].sort());
    const events = await ctx.db.selectFrom('events').select('resource_id').where('type', '=', 'charge.updated').where('resource_id', 'in', ids).execute();
    expect(events).toHaveLength(12);
  });
});

describe('charges.expire_three_d_secure (service rules §2: "a pending charge can be finished for 30 minutes after creation")', () => {
  it('abandons a charge left pending past its window, once, with charge.failed at the window end; tds_finish then says three_d_secure_expired', async () => {
    const created = t('2027-05-01T00:00:00Z');
    const pending = await hold(merchant, created, { three_d_secure: true, capture: true });
    const fresh = await hold(merchant, t('2027-05-01T00:20:00Z'), { three_d_secure: true, capture: true });
    await runOperation(ctx, merchant, 'charges.tds_authenticate', { id: pending.id });
    const windowEnd = new Date(created.getTime() + 30 * 60_000);
    expect(await nextThreeDSecureTimeoutAt(ctx.db, created)).toEqual(new Date(windowEnd.getTime() + 1));
    expect(await runSlot(threeDSecureTimeoutsJob, t('2027-05-01T00:31:00Z'))).toEqual({ abandoned: 1, batches: 1 });
    expect(await runSlot(threeDSecureTimeoutsJob, t('2027-05-01T00:31:00Z'))).toEqual({ abandoned: 0, batches: 0 });
    expect(await row(pending.id)).toMatchObject({ paid: false, failure_code: 'three_d_secure_expired', tds_expires_at: null, updated_at: windowEnd });
    expect(await eventsOf(merchant, pending.id)).toEqual([['charge.failed', windowEnd]]);
    expect((await row(fresh.id)).tds_expires_at).not.toBeNull();
    ctx.clock.set(t('2027-05-01T00:32:00Z'));
    expect((await rejection(runOperation(ctx, merchant, 'charges.tds_finish', { id: pending.id }))).code).toBe('three_d_secure_expired');
  });
});

describe('charges.reauthorize (service rules §2 Decision: scheduled reauthorization)', () => {
  it('"opt-in per account": holds of an account that did not opt in are never reauthorized', async () => {
    const h = await hold(merchant, t('2027-06-01T00:00:00Z'), { expiry_days: 2 });
    expect(await runSlot(holdReauthorizationsJob, t('2027-06-02T12:00:00Z'))).toEqual({ reauthorized: 0, failed: 0, batches: 0 });
    expect(await ctx.db.selectFrom('reauthorizations').select('reauth_id').where('charge_id', '=', h.id).execute()).toEqual([]);
  });

  it('reauthorizes at expired_at − lead (its own due instant, also from a late slot), with expiry from the hold table at that instant, once', async () => {
    const created = t('2027-06-10T00:00:00Z');
    const h = await hold(optedIn, created, { expiry_days: 3 });
    const oldExpiry = new Date(created.getTime() + 3 * MS_PER_DAY);
    const due = new Date(oldExpiry.getTime() - 24 * HOUR);
    expect(await nextReauthDueAt(ctx.db, created)).toEqual(due);
    const watch = watched(ctx);
    // Late by five hours.
    const slot = new Date(due.getTime() + 5 * HOUR);
    expect(await runSlot(holdReauthorizationsJob, slot, { watch })).toEqual({ reauthorized: 1, failed: 0, batches: 1 });
    const newExpiry = new Date(due.getTime() + 3 * MS_PER_DAY);
    expect(await row(h.id)).toMatchObject({ expired_at: newExpiry, authorized_at: due, reauth_count: 1, released_at: null });
    const attempts = await ctx.db.selectFrom('reauthorizations').selectAll().where('charge_id', '=', h.id).execute();
    expect(attempts).toMatchObject([{ scheduled: true, outcome: 'succeeded', previous_expired_at: oldExpiry, expired_at: newExpiry, attempted_at: due }]);
    expect(await eventsOf(optedIn, h.id)).toEqual([['charge.succeeded', created], ['charge.updated', due]]);
    // "the earlier hold is not cancelled"
    expect(watch.released).toEqual([]);
    // Same slot again, and the next due instant of the new hold: the count (1) is used up.
    expect(await runSlot(holdReauthorizationsJob, slot)).toEqual({ reauthorized: 0, failed: 0, batches: 0 });
    expect(await runSlot(holdReauthorizationsJob, new Date(newExpiry.getTime() - HOUR))).toEqual({ reauthorized: 0, failed: 0, batches: 0 });
    // The expiry job then releases the new hold at its own expiry, not the old one.
    expect(await runSlot(holdExpiryJob, new Date(oldExpiry.getTime() + 60_000))).toMatchObject({ released: 0 });
    expect(await runSlot(holdExpiryJob, new Date(newExpiry.getTime() + 60_000))).toMatchObject({ released: 1 });
  });

  it('an attempt the unique (charge, hold) index refuses gives its new hold back: nothing stays authorized that no row records', async () => {
    const created = t('2027-07-10T00:00:00Z');
    const h = await hold(optedIn, created, { expiry_days: 3 });
    const oldExpiry = new Date(created.getTime() + 3 * MS_PER_DAY);
    const due = new Date(oldExpiry.getTime() - 24 * HOUR);
    // Another worker recorded this hold's scheduled attempt but its batch has not touched the charge
    // row yet (as seen from this worker): the index refuses the second attempt.
    await ctx.db
      .insertInto('reauthorizations')
      .values({ account_id: optedIn.accountId, livemode: false, reauth_id: 'rea_other_worker', charge_id: h.id, scheduled: true, amount: 1000, outcome: 'succeeded', failure_code: null, failure_message: null, authorization_code: 'x', previous_expired_at: oldExpiry, expired_at: null, attempted_at: due })
      .execute();
    const watch = watched(ctx);
    await runSlot(holdReauthorizationsJob, due, { watch });
    expect(watch.authorized).toHaveLength(1);
    expect(watch.released.map((r) => r.reference)).toEqual(watch.authorized);
    expect(await row(h.id)).toMatchObject({ expired_at: oldExpiry, reauth_count: 0 });
  });

  it('"up to a configured count": with a count of 2 a hold is reauthorized twice, each time lead hours before its expiry', async () => {
    await setReauthSettings(ctx.db, optedIn.accountId, { enabled: true, leadHours: 12, maxCount: 2 });
    const created = t('2027-06-20T00:00:00Z');
    const h = await hold(optedIn, created, { expiry_days: 1 });
    // One slot long after both due instants: the second attempt comes from the first one's new hold.
    const slot = t('2027-06-21T23:00:00Z');
    const counts = await runSlot(holdReauthorizationsJob, slot);
    expect(counts).toMatchObject({ reauthorized: 2, failed: 0 });
    const attempts = await ctx.db.selectFrom('reauthorizations').select(['attempted_at', 'expired_at']).where('charge_id', '=', h.id).orderBy('attempted_at').execute();
    expect(attempts).toEqual([
      { attempted_at: t('2027-06-20T12:00:00Z'), expired_at: t('2027-06-21T12:00:00Z') },
      { attempted_at: t('2027-06-21T00:00:00Z'), expired_at: t('2027-06-22T00:00:00Z') },
    ]);
  });

  it('"never for debit cards (double debit)"; prepaid cards neither', async () => {
    const debit = await hold(optedIn, t('2027-07-01T00:00:00Z'), { expiry_days: 2 }, TEST_CARDS.debit.number);
    const prepaid = await hold(optedIn, t('2027-07-01T00:00:00Z'), { expiry_days: 2 }, TEST_CARDS.prepaid.number);
    expect(await runSlot(holdReauthorizationsJob, t('2027-07-02T12:00:00Z'))).toEqual({ reauthorized: 0, failed: 0, batches: 0 });
    expect(await ctx.db.selectFrom('reauthorizations').select('reauth_id').where('charge_id', 'in', [debit.id, prepaid.id]).execute()).toEqual([]);
  });

  it.runIf(isPostgres())('two workers taking batches at once reauthorize each hold once (FOR UPDATE SKIP LOCKED, one scheduled attempt per hold)', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 10; i += 1) ids.push((await hold(optedIn, new Date(t('2027-07-10T00:00:00Z').getTime() + i * 1000), { expiry_days: 2 })).id);
    const other = await database.openAnother();
    const slot = t('2027-07-11T06:00:00Z');
    const worker = (db: Context['db'], seed: number) => {
      const base = testContext(database.store, { at: slot, seed, config: { batchSize: 2 } });
      const run: SlotRun = { slot, attempt: 1, leaseClock: base.clock, signal: new AbortController().signal, assertClaim: async () => {}, recordBatch: async () => {} };
      return holdReauthorizationsJob.run({ ...base, db }, run);
    };
    const [one, two] = await Promise.all([worker(ctx.db, 911), worker(other.db, 912)]);
    expect((one.reauthorized ?? 0) + (two.reauthorized ?? 0)).toBe(10);
    const attempts = await ctx.db.selectFrom('reauthorizations').select('charge_id').where('charge_id', 'in', ids).execute();
    expect(attempts.map((a) => a.charge_id).sort()).toEqual([...ids].sort());
  });

  it('"each attempt recorded with its outcome … a failed reauth leaves the original hold to lapse"', async () => {
    const created = t('2027-08-01T00:00:00Z');
    const h = await hold(optedIn, created, { expiry_days: 2 }, TEST_CARDS.reauthFails.number);
    const expiry = new Date(created.getTime() + 2 * MS_PER_DAY);
    expect(await runSlot(holdReauthorizationsJob, t('2027-08-02T06:00:00Z'))).toEqual({ reauthorized: 0, failed: 1, batches: 1 });
    const attempts = await ctx.db.selectFrom('reauthorizations').selectAll().where('charge_id', '=', h.id).execute();
    expect(attempts).toMatchObject([{ scheduled: true, outcome: 'failed', failure_code: 'card_declined', expired_at: null, previous_expired_at: expiry }]);
    expect(await row(h.id)).toMatchObject({ expired_at: expiry, reauth_count: 1 });
    expect(await eventsOf(optedIn, h.id)).toEqual([['charge.succeeded', created], ['charge.updated', t('2027-08-02T00:00:00Z')]]);
    // Not tried again for the same hold, even with attempts left.
    await setReauthSettings(ctx.db, optedIn.accountId, { enabled: true, leadHours: 24, maxCount: 5 });
    expect(await runSlot(holdReauthorizationsJob, t('2027-08-02T07:00:00Z'))).toEqual({ reauthorized: 0, failed: 0, batches: 0 });
    expect(await runSlot(holdExpiryJob, t('2027-08-03T00:01:00Z'))).toMatchObject({ released: 1 });
    expect((await row(h.id)).released_at).toEqual(expiry);
  });
});
