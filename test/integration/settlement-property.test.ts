/**
 * Property through the database (service rules §4): over random charges, refunds and disputes
 * written through the settlement hooks and the disputes job, a random paid plan billed by the
 * service-fee job and random operator adjustments, closed by the term-close job: money in
 * (captured − refunded − disputed) = all owners' sales statement nets + the service's fees; the
 * service_fee statements bill exactly the plan fees and the misc statements carry exactly the
 * adjustments; every statement's net is its items' sum, and every balance's net is the sum of its
 * statements (sales, service_fee, misc, transfer_fee alike).
 */
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disputeOpeningJob } from '../../jobs/dispute-opening';
import { serviceFeeBillingJob } from '../../jobs/service-fee-billing';
import { termCloseJob } from '../../jobs/term-close';
import { createAccount } from '../../src/accounts/accounts';
import { Scheduler } from '../../src/engine/scheduler';
import { runOperation } from '../../src/api/operations';
import { bookAdjustment } from '../../src/settlement/adjustments';
import { setServicePlan } from '../../src/settlement/service-fees';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';
import { captureCharge, refundCharge } from '../support/settlement-seed';

const jst = (local: string): Date => new Date(`${local}+09:00`);
let database: TestDatabase;
let ctx: ReturnType<typeof testContext>;

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 5 });
});
afterAll(async () => database?.drop());

describe('conservation over random charges, refunds and disputes', () => {
  it('property: captured − refunded − disputed = Σ sales statement nets + Σ fee − Σ refund_fee_offset − Σ chargeback_fee_offset; service_fee and misc statements = plan fees and adjustments; each balance = Σ its statements', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            amount: fc.integer({ min: 50, max: 500_000 }),
            feeRate: fc.constantFrom('3.00', '3.30', '2.59'),
            tenant: fc.integer({ min: 0, max: 3 }),
            day: fc.integer({ min: 1, max: 28 }),
            refund: fc.option(fc.integer({ min: 1, max: 100 }), { nil: null }),
            // As if paid with a dispute card: disputed after the refunds (a full refund leaves nothing to dispute).
            disputed: fc.boolean(),
          }),
          { minLength: 1, maxLength: 12 },
        ),
        fc.option(fc.record({ subject: fc.constantFrom('proplan', 'plan_fee'), fee: fc.integer({ min: 0, max: 50_000 }) }), { nil: null }),
        fc.array(
          fc.record({
            amount: fc.integer({ min: -80_000, max: 80_000 }).filter((n) => n !== 0),
            subject: fc.constantFrom('reallocation', 'other'),
            // 0: the merchant, 1: the platform, 2..4: a tenant.
            owner: fc.integer({ min: 0, max: 4 }),
          }),
          { maxLength: 4 },
        ),
        async (charges, plan, adjustments) => {
          run += 1;
          const accountId = `acct_prop${run}`;
          await createAccount(ctx, { name: accountId, id: accountId });
          const caller = { accountId, livemode: false, kind: 'secret' as const };
          const tenantIds = [null] as (string | null)[];
          for (const [rate, inc] of [['10.00', false], ['7.25', true], ['0.50', false]] as const) {
            tenantIds.push(((await runOperation(ctx, caller, 'tenants.create', { platform_fee_rate: rate, payjp_fee_included: inc })) as { id: string }).id);
          }
          let i = 0;
          for (const c of charges) {
            i += 1;
            const chargeId = `ch_p${run}_${i}`;
            const at = jst(`2027-03-${String(c.day).padStart(2, '0')}T12:00:00`);
            await captureCharge(ctx.db, ctx, { accountId, chargeId, amount: c.amount, at, feeRate: c.feeRate, tenant: tenantIds[c.tenant] ?? undefined });
            if (c.refund !== null) {
              const refunded = Math.max(1, Math.floor((c.amount * c.refund) / 100));
              await refundCharge(ctx.db, ctx, { accountId, chargeId, refundId: `re_p${run}_${i}`, amount: refunded, at: jst('2027-03-29T12:00:00') });
            }
            if (c.disputed) await sql`UPDATE charges SET dispute_due_at = ${jst('2027-03-30T12:00:00')} WHERE account_id = ${accountId} AND charge_id = ${chargeId}`.execute(ctx.db);
          }
          if (plan !== null) {
            await setServicePlan(ctx, caller, { subject: plan.subject, monthlyFee: plan.fee, from: jst('2027-03-01T00:00:00') });
            const billCtx = testContext(database.store, { at: jst('2027-03-01T00:00:00'), seed: 500 + run });
            expect((await new Scheduler(billCtx, [serviceFeeBillingJob], { owner: 'test' }).runSlot(serviceFeeBillingJob.name, jst('2027-03-01T00:00:00'))).status).toBe('succeeded');
          }
          const bookCtx = testContext(database.store, { at: jst('2027-03-20T15:00:00'), seed: 600 + run });
          for (const a of adjustments) {
            const owner = a.owner === 0 ? 'merchant' : a.owner === 1 ? 'platform' : tenantIds[a.owner - 1]!;
            await bookAdjustment(bookCtx, caller, { amount: a.amount, subject: a.subject, reason: 'property test', owner });
          }
          const disputeCtx = testContext(database.store, { at: jst('2027-03-31T00:00:00'), seed: 700 + run });
          const opened = await new Scheduler(disputeCtx, [disputeOpeningJob], { owner: 'test' }).runSlot(disputeOpeningJob.name, jst('2027-03-31T00:00:00'));
          expect(opened).toMatchObject({ status: 'succeeded', counts: { opened: charges.filter((c) => c.disputed && c.refund !== 100).length } });
          const runCtx = testContext(database.store, { at: jst('2027-04-01T00:00:00'), seed: 900 + run });
          const outcome = await new Scheduler(runCtx, [termCloseJob], { owner: 'test' }).runSlot(termCloseJob.name, jst('2027-04-01T00:00:00'));
          expect(outcome.status).toBe('succeeded');
          const totals = await sql<{ money_in: number; nets: number; service: number; bad_items: number }>`
            SELECT
              (SELECT coalesce(sum(amount_captured), 0) FROM charges WHERE account_id = ${accountId})::bigint
                - (SELECT coalesce(sum(amount), 0) FROM refunds WHERE account_id = ${accountId})::bigint
                - (SELECT coalesce(sum(amount), 0) FROM disputes WHERE account_id = ${accountId})::bigint AS money_in,
              (SELECT coalesce(sum(net), 0) FROM statements WHERE account_id = ${accountId} AND type = 'sales')::bigint AS nets,
              ((SELECT coalesce(sum(fee), 0) FROM charges WHERE account_id = ${accountId})
                - (SELECT coalesce(sum(refund_fee_offset), 0) FROM refunds WHERE account_id = ${accountId})
                - (SELECT coalesce(sum(chargeback_fee_offset), 0) FROM disputes WHERE account_id = ${accountId}))::bigint AS service,
              (SELECT count(*) FROM statements s WHERE s.account_id = ${accountId}
                 AND s.net <> (SELECT coalesce(sum(amount), 0) FROM statement_items i WHERE i.account_id = s.account_id AND i.statement_id = s.statement_id))::int AS bad_items`.execute(ctx.db);
          const t = totals.rows[0]!;
          expect(t.money_in).toBe(t.nets + t.service);
          expect(t.bad_items).toBe(0);
          // The statements that do not come from payments carry exactly what was billed and booked.
          const others = await sql<{ service_fee: number; billed: number; misc: number; adjusted: number; bad_balances: number }>`
            SELECT
              (SELECT coalesce(sum(net), 0) FROM statements WHERE account_id = ${accountId} AND type = 'service_fee')::bigint AS service_fee,
              (SELECT coalesce(-sum(amount), 0) FROM service_fee_charges WHERE account_id = ${accountId})::bigint AS billed,
              (SELECT coalesce(sum(net), 0) FROM statements WHERE account_id = ${accountId} AND type = 'misc')::bigint AS misc,
              (SELECT coalesce(sum(amount), 0) FROM adjustments WHERE account_id = ${accountId})::bigint AS adjusted,
              (SELECT count(*) FROM balances b WHERE b.account_id = ${accountId}
                 AND b.net <> (SELECT coalesce(sum(net), 0) FROM statements s WHERE s.account_id = b.account_id AND s.livemode = b.livemode AND s.balance_id = b.balance_id))::int AS bad_balances`.execute(ctx.db);
          const o = others.rows[0]!;
          expect(o.service_fee).toBe(plan !== null && plan.fee > 0 ? -plan.fee : 0);
          expect(o.service_fee).toBe(o.billed);
          expect(o.misc).toBe(adjustments.reduce((sum, a) => sum + a.amount, 0));
          expect(o.misc).toBe(o.adjusted);
          expect(o.bad_balances).toBe(0);
          // Every dispute was booked: the closed term counts them, and their chargebacks are on statements.
          const booked = await sql<{ counted: number; disputed: number; chargeback: number }>`
            SELECT (SELECT coalesce(sum(dispute_count), 0) FROM terms WHERE account_id = ${accountId} AND closed)::int AS counted,
                   (SELECT count(*) FROM disputes WHERE account_id = ${accountId})::int AS disputed,
                   (SELECT coalesce(-sum(amount), 0) FROM statement_items WHERE account_id = ${accountId} AND subject = 'chargeback')::bigint
                     - (SELECT coalesce(sum(amount), 0) FROM disputes WHERE account_id = ${accountId})::bigint AS chargeback`.execute(ctx.db);
          const expectedDisputes = charges.filter((c) => c.disputed && c.refund !== 100).length;
          expect(booked.rows[0]).toEqual({ counted: expectedDisputes, disputed: expectedDisputes, chargeback: 0 });
          // Every charge and refund was settled into the closed term.
          const unsettled = await sql<{ n: number }>`SELECT (SELECT count(*) FROM charges WHERE account_id = ${accountId} AND term_id IS NULL)::int
            + (SELECT count(*) FROM refunds WHERE account_id = ${accountId} AND term_id IS NULL)::int AS n`.execute(ctx.db);
          expect(unsettled.rows[0]!.n).toBe(0);
        },
      ),
      { numRuns: 8 },
    );
  });
});
