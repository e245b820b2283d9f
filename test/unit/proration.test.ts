import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import {
  assertProratedRefundAllowed,
  periodRemainder,
  planCreation,
  planRenewal,
  planTrialEnd,
  proratedAmount,
  proratedPlanChangeCharge,
  proratedRefund,
  prorateFirstPeriod,
  type SubscribablePlan,
} from '../../src/domain/proration';
import { rejectionOf } from '../support/rejections';

const at = (iso: string): Date => new Date(iso);


const plan = (overrides: Partial<SubscribablePlan> = {}): SubscribablePlan => ({
  interval: 'month',
  billingDay: null,
  amount: 1000,
  trialDays: 0,
  ...overrides,
});

const instantArb = fc.integer({ min: 0, max: Date.UTC(2200, 0, 1) }).map((ms) => new Date(ms));
const amountArb = fc.integer({ min: 50, max: 9_999_999 });
const billingDayArb = fc.integer({ min: 1, max: 31 });

describe('pro-rata amount (service rules §1.4)', () => {
  it('charges 161 yen in the example: "billing_day 1, amount 1000, created 2018-08-27 12:00 JST → N = 5 (27..31), D = 31 → 161"', () => {
    expect(prorateFirstPeriod(1000, 1, at('2018-08-27T12:00:00+09:00'))).toEqual({
      amount: 161,
      chargedDays: 5,
      cycleDays: 31,
      cycleStart: at('2018-08-01T00:00:00Z'),
      periodEnd: at('2018-09-01T00:00:00Z'),
    });
    expect(proratedAmount(1000, 1, at('2018-08-27T12:00:00+09:00'))).toBe(161);
  });

  it('counts from the previous UTC day between 00:00 and 08:59 JST: "a subscription created between 00:00 and 08:59 JST counts from the previous UTC day"', () => {
    // 2018-08-28 00:00 and 08:59 JST are still 2018-08-27 in UTC: N = 5 as on the 27th.
    expect(prorateFirstPeriod(1000, 1, at('2018-08-28T00:00:00+09:00')).chargedDays).toBe(5);
    expect(proratedAmount(1000, 1, at('2018-08-28T08:59:59+09:00'))).toBe(161);
    // From 09:00 JST the UTC day is the 28th: N = 4 → floor(4000 / 31) = 129.
    expect(proratedAmount(1000, 1, at('2018-08-28T09:00:00+09:00'))).toBe(129);
  });

  it('charges the whole amount when created on a billing day from 09:00 JST, including exactly at the billing instant', () => {
    expect(prorateFirstPeriod(1000, 1, at('2018-09-01T00:00:00Z'))).toMatchObject({ amount: 1000, chargedDays: 30, cycleDays: 30 });
    expect(prorateFirstPeriod(1000, 1, at('2018-09-01T15:00:00+09:00'))).toMatchObject({
      amount: 1000,
      periodEnd: at('2018-10-01T00:00:00Z'),
    });
  });

  it('charges one day when created on a billing day before 09:00 JST (the last UTC day of the ending cycle)', () => {
    // 2018-09-01 08:59 JST = 2018-08-31 23:59 UTC: N = 1 (Aug 31), D = 31.
    expect(prorateFirstPeriod(1000, 1, at('2018-09-01T08:59:00+09:00'))).toMatchObject({
      amount: 32,
      chargedDays: 1,
      cycleDays: 31,
      periodEnd: at('2018-09-01T00:00:00Z'),
    });
  });

  it('counts the cycle of a billing_day 31 plan in February from Jan 31 to Feb 27 (D = 28)', () => {
    expect(prorateFirstPeriod(2800, 31, at('2027-02-15T03:00:00Z'))).toMatchObject({
      amount: 1300, // N = 13 (Feb 15..27)
      chargedDays: 13,
      cycleDays: 28,
      cycleStart: at('2027-01-31T00:00:00Z'),
      periodEnd: at('2027-02-28T00:00:00Z'),
    });
  });

  it('counts a cycle that starts on a clamped Feb 28 for billing_day 30 (D = 30: Feb 28, Mar 1..29)', () => {
    expect(prorateFirstPeriod(3000, 30, at('2027-03-05T00:00:00Z'))).toMatchObject({ chargedDays: 25, cycleDays: 30, amount: 2500 });
  });

  it('rounds down, never up', () => {
    expect(proratedAmount(999, 1, at('2018-08-27T03:00:00Z'))).toBe(161); // 999 × 5 / 31 = 161.1…
  });

  it('is between 0 and the plan amount, with 1 ≤ N ≤ D and D between 28 and 31', () => {
    fc.assert(
      fc.property(amountArb, billingDayArb, instantArb, (amount, billingDay, createdAt) => {
        const proration = prorateFirstPeriod(amount, billingDay, createdAt);
        expect(proration.amount).toBeGreaterThanOrEqual(0);
        expect(proration.amount).toBeLessThanOrEqual(amount);
        expect(proration.chargedDays).toBeGreaterThanOrEqual(1);
        expect(proration.chargedDays).toBeLessThanOrEqual(proration.cycleDays);
        expect(proration.cycleDays).toBeGreaterThanOrEqual(28);
        expect(proration.cycleDays).toBeLessThanOrEqual(31);
        expect(proration.amount).toBe(Math.floor((amount * proration.chargedDays) / proration.cycleDays));
      }),
    );
  });
});

describe('pro-rata refund on delete and pro-rata plan change (service rules §1.6)', () => {
  const marchStart = at('2027-03-01T00:00:00Z');
  const marchEnd = at('2027-04-01T00:00:00Z'); // 31 UTC days

  it('refunds the remaining UTC days of the period: "with prorate=true refund floor(last charge amount × remaining UTC days / period days)"', () => {
    // Remaining = Mar 10..31 = 22 days, the day of deletion included.
    expect(periodRemainder(marchStart, marchEnd, at('2027-03-10T12:00:00Z'))).toEqual({ remainingDays: 22, periodDays: 31 });
    expect(proratedRefund(3100, marchStart, marchEnd, at('2027-03-10T12:00:00Z'))).toBe(2200);
    expect(proratedRefund(1000, marchStart, marchEnd, at('2027-03-10T12:00:00Z'))).toBe(709); // 709.67 rounded down
  });

  it('refunds everything on the day the period started and nothing from the day it ends', () => {
    expect(proratedRefund(3100, marchStart, marchEnd, at('2027-03-01T23:59:59Z'))).toBe(3100);
    expect(proratedRefund(3100, marchStart, marchEnd, at('2027-03-31T23:59:59Z'))).toBe(100);
    expect(proratedRefund(3100, marchStart, marchEnd, marchEnd)).toBe(0);
    expect(proratedRefund(3100, marchStart, marchEnd, at('2027-05-01T00:00:00Z'))).toBe(0);
  });

  it('counts a period anchored at 15:00 UTC by its UTC days (6/1 00:00 JST to 6/30 15:00 UTC is 30 days)', () => {
    const start = at('2027-06-01T00:00:00+09:00');
    const end = at('2027-06-30T15:00:00Z');
    expect(periodRemainder(start, end, start)).toEqual({ remainingDays: 30, periodDays: 30 });
    // Still June 30 in UTC, before the period end: that day belongs to the next period.
    expect(proratedRefund(3000, start, end, at('2027-06-30T10:00:00Z'))).toBe(0);
    expect(proratedRefund(3000, start, end, at('2027-06-29T10:00:00Z'))).toBe(100);
  });

  it('refunds a pro-rated first period against its own (short) period', () => {
    // Created 2018-08-27 12:00 JST with prorate: 161 yen for Aug 27..31; deleted on Aug 29 → 3 of 5 days.
    expect(proratedRefund(161, at('2018-08-27T03:00:00Z'), at('2018-09-01T00:00:00Z'), at('2018-08-29T05:00:00Z'))).toBe(96);
  });

  it('charges the remaining share of the new plan on a prorated plan change: "charge floor(new amount × remaining days / period days), keep current_period_end"', () => {
    expect(proratedPlanChangeCharge(5000, marchStart, marchEnd, at('2027-03-10T12:00:00Z'))).toBe(3548); // 5000 × 22 / 31
    expect(proratedPlanChangeCharge(5000, marchStart, marchEnd, marchStart)).toBe(5000);
  });

  it('refuses a period that does not cross a UTC midnight (a caller bug)', () => {
    expect(() => proratedRefund(1000, at('2027-03-01T01:00:00Z'), at('2027-03-01T02:00:00Z'), at('2027-03-01T01:30:00Z'))).toThrow(RangeError);
  });

  it('rejects a prorated delete after the 180-day window: "past the 180-day refund window: cannot_prorated_refund_of_subscription"', () => {
    const charged = at('2027-01-01T00:00:00Z');
    expect(() => assertProratedRefundAllowed(charged, at('2027-06-30T00:00:00Z'))).not.toThrow(); // exactly 180 days
    expect(rejectionOf(() => assertProratedRefundAllowed(charged, at('2027-06-30T00:00:00.001Z')))).toEqual({
      code: 'cannot_prorated_refund_of_subscription',
      param: 'prorate',
    });
  });

  it('refunds between 0 and the charged amount, less the later the deletion', () => {
    fc.assert(
      fc.property(
        amountArb,
        fc.oneof(billingDayArb, fc.constant(null)),
        instantArb,
        fc.integer({ min: 0, max: 40 * 86_400_000 }),
        fc.integer({ min: 0, max: 86_400_000 }),
        (amount, billingDay, start, offset, step) => {
          const end = planRenewal(plan({ billingDay, amount }), start).periodEnd;
          const earlier = new Date(start.getTime() + offset);
          const later = new Date(earlier.getTime() + step);
          const refundEarlier = proratedRefund(amount, start, end, earlier);
          const refundLater = proratedRefund(amount, start, end, later);
          expect(refundEarlier).toBeGreaterThanOrEqual(0);
          expect(refundEarlier).toBeLessThanOrEqual(amount);
          expect(refundLater).toBeLessThanOrEqual(refundEarlier);
        },
      ),
    );
  });
});

describe('creation (service rules §1.3)', () => {
  const now = at('2027-04-10T03:00:00Z'); // 2027-04-10 12:00 JST

  it('charges the plan amount now without trial or billing_day: "No trial, no billing_day: charge the plan amount now; period = [now, now + 1 interval)"', () => {
    expect(planCreation({ plan: plan(), now, trialEnd: undefined, prorate: undefined })).toEqual({
      status: 'active',
      prorate: false,
      trialStart: null,
      trialEnd: null,
      currentPeriodStart: now,
      currentPeriodEnd: at('2027-05-10T03:00:00Z'),
      chargeNow: 1000,
      firstCharge: { at: now, amount: 1000, kind: 'full' },
    });
    expect(planCreation({ plan: plan({ interval: 'year' }), now, trialEnd: undefined, prorate: undefined }).currentPeriodEnd).toEqual(
      at('2028-04-10T03:00:00Z'),
    );
  });

  it('charges nothing now on a billing_day plan without prorate: "billing_day, prorate not true: no charge now; status active; current_period_end = the next billing instant"', () => {
    for (const prorate of [undefined, false]) {
      expect(planCreation({ plan: plan({ billingDay: 25 }), now, trialEnd: undefined, prorate })).toEqual({
        status: 'active',
        prorate: false,
        trialStart: null,
        trialEnd: null,
        currentPeriodStart: now,
        currentPeriodEnd: at('2027-04-25T00:00:00Z'),
        chargeNow: null,
        firstCharge: { at: at('2027-04-25T00:00:00Z'), amount: 1000, kind: 'full' },
      });
    }
  });

  it('charges the pro-rated amount now on a billing_day plan with prorate=true: "charge the pro-rated amount now (1.4); period = [now, next billing instant)"', () => {
    const created = at('2018-08-27T12:00:00+09:00');
    expect(planCreation({ plan: plan({ billingDay: 1 }), now: created, trialEnd: undefined, prorate: true })).toEqual({
      status: 'active',
      prorate: true,
      trialStart: null,
      trialEnd: null,
      currentPeriodStart: created,
      currentPeriodEnd: at('2018-09-01T00:00:00Z'),
      chargeNow: 161,
      firstCharge: { at: created, amount: 161, kind: 'prorated' },
    });
  });

  it('starts a trial for a future trial_end without billing_day; the trial end becomes the anchor: "(without billing_day, trial end is the new anchor)"', () => {
    const trialEnd = at('2027-05-03T12:00:00Z');
    const creation = planCreation({ plan: plan(), now, trialEnd, prorate: undefined });
    expect(creation).toEqual({
      status: 'trial',
      prorate: false,
      trialStart: now,
      trialEnd,
      currentPeriodStart: now,
      currentPeriodEnd: trialEnd,
      chargeNow: null,
      firstCharge: { at: trialEnd, amount: 1000, kind: 'full' },
    });
    expect(planTrialEnd({ plan: plan(), trialEnd, prorate: false })).toEqual({
      amount: 1000,
      kind: 'full',
      periodStart: trialEnd,
      periodEnd: at('2027-06-03T12:00:00Z'),
    });
  });

  it('starts a trial of the plan trial_days when no trial_end is given: "plan trial_days > 0 and no trial_end given … trial_end = now + trial_days days"', () => {
    const creation = planCreation({ plan: plan({ trialDays: 30 }), now, trialEnd: undefined, prorate: undefined });
    expect(creation).toMatchObject({ status: 'trial', trialStart: now, trialEnd: at('2027-05-10T03:00:00Z'), chargeNow: null });
    expect(creation.currentPeriodEnd).toEqual(creation.trialEnd);
  });

  it('charges the pro-rated amount at trial end with billing_day and prorate=true: "at trial end charge the pro-rated amount up to the next billing instant"', () => {
    const trialEnd = at('2018-08-27T12:00:00+09:00');
    const trialStart = at('2018-08-20T00:00:00Z');
    const billingDayPlan = plan({ billingDay: 1 });
    const creation = planCreation({ plan: billingDayPlan, now: trialStart, trialEnd, prorate: true });
    expect(creation).toMatchObject({ status: 'trial', prorate: true, trialEnd, currentPeriodEnd: trialEnd, chargeNow: null });
    expect(creation.firstCharge).toEqual({ at: trialEnd, amount: 161, kind: 'prorated' });
    expect(planTrialEnd({ plan: billingDayPlan, trialEnd, prorate: true })).toEqual({
      amount: 161,
      kind: 'prorated',
      periodStart: trialEnd,
      periodEnd: at('2018-09-01T00:00:00Z'),
    });
  });

  it('moves the trial end onto the billing day with prorate explicitly false, and charges the full amount there: "trial_end is moved to 09:00 JST of the next billing day on or after the requested trial end; the full amount is charged there"', () => {
    const billingDayPlan = plan({ billingDay: 25 });
    const creation = planCreation({ plan: billingDayPlan, now, trialEnd: at('2027-05-03T12:00:00Z'), prorate: false });
    const movedEnd = at('2027-05-25T09:00:00+09:00');
    expect(creation).toMatchObject({ status: 'trial', prorate: false, trialStart: now, trialEnd: movedEnd, currentPeriodEnd: movedEnd, chargeNow: null });
    expect(creation.firstCharge).toEqual({ at: movedEnd, amount: 1000, kind: 'full' });
    // The first paid period is a whole cycle, billing day to billing day.
    expect(planTrialEnd({ plan: billingDayPlan, trialEnd: movedEnd, prorate: false })).toEqual({
      amount: 1000,
      kind: 'full',
      periodStart: movedEnd,
      periodEnd: at('2027-06-25T00:00:00Z'),
    });
  });

  it('charges the full amount at the unmoved trial end with billing_day and prorate omitted: "Decision … the full amount is charged at trial end and the period runs to the next billing instant after it"', () => {
    const billingDayPlan = plan({ billingDay: 25 });
    const trialEnd = at('2027-05-03T12:00:00Z');
    const creation = planCreation({ plan: billingDayPlan, now, trialEnd, prorate: undefined });
    expect(creation).toMatchObject({ status: 'trial', prorate: false, trialEnd, currentPeriodEnd: trialEnd, chargeNow: null });
    expect(creation.firstCharge).toEqual({ at: trialEnd, amount: 1000, kind: 'full' });
    expect(planTrialEnd({ plan: billingDayPlan, trialEnd, prorate: false })).toEqual({
      amount: 1000,
      kind: 'full',
      periodStart: trialEnd,
      periodEnd: at('2027-05-25T00:00:00Z'),
    });
  });

  it('combines plan trial_days with billing_day and prorate explicitly false: the trial end is moved too', () => {
    const creation = planCreation({ plan: plan({ billingDay: 1, trialDays: 14 }), now, trialEnd: undefined, prorate: false });
    expect(creation).toMatchObject({ status: 'trial', trialEnd: at('2027-05-01T00:00:00Z'), firstCharge: { amount: 1000, kind: 'full' } });
  });

  it('ignores the plan trial_days with trial_end=now and charges now: "trial_end = now: no trial even if the plan has trial_days; charge now"', () => {
    expect(planCreation({ plan: plan({ trialDays: 30 }), now, trialEnd: 'now', prorate: undefined })).toMatchObject({
      status: 'active',
      trialStart: null,
      trialEnd: null,
      currentPeriodStart: now,
      currentPeriodEnd: at('2027-05-10T03:00:00Z'),
      chargeNow: 1000,
    });
  });

  it('charges now with trial_end=now on a billing_day plan: v1 §3.2 "trial_end = now | trial ends at once | charged immediately"; the full amount up to the billing day without prorate, the pro-rated amount with it', () => {
    for (const prorate of [undefined, false] as const) {
      expect(planCreation({ plan: plan({ billingDay: 25, trialDays: 30 }), now, trialEnd: 'now', prorate })).toMatchObject({
        status: 'active',
        trialStart: null,
        trialEnd: null,
        currentPeriodStart: now,
        currentPeriodEnd: at('2027-04-25T00:00:00Z'),
        chargeNow: 1000,
        firstCharge: { at: now, amount: 1000, kind: 'full' },
      });
    }
    // Apr 10..24 = 15 of the 31 days from Mar 25 to Apr 24.
    expect(planCreation({ plan: plan({ billingDay: 25, trialDays: 30 }), now, trialEnd: 'now', prorate: true })).toMatchObject({
      status: 'active',
      currentPeriodEnd: at('2027-04-25T00:00:00Z'),
      chargeNow: 483,
    });
  });

  it('rejects a yearly plan with billing_day (invalid_plan) and a bad trial_end (invalid_trial_end)', () => {
    expect(rejectionOf(() => planCreation({ plan: plan({ interval: 'year', billingDay: 1 }), now, trialEnd: undefined, prorate: undefined }))).toEqual({
      code: 'invalid_plan',
      param: 'plan',
    });
    expect(rejectionOf(() => planCreation({ plan: plan(), now, trialEnd: at('2027-04-01T00:00:00Z'), prorate: undefined }))).toEqual({
      code: 'invalid_trial_end',
      param: 'trial_end',
    });
    expect(rejectionOf(() => planCreation({ plan: plan(), now, trialEnd: at('2032-04-11T00:00:00Z'), prorate: undefined }))).toEqual({
      code: 'invalid_trial_end',
      param: 'trial_end',
    });
  });

  it('holds the creation invariants for every combination: period starts now, a charge now only without trial and unless billing_day without prorate', () => {
    const planArb = fc.record({
      interval: fc.constant('month' as const),
      billingDay: fc.oneof(billingDayArb, fc.constant(null)),
      amount: amountArb,
      trialDays: fc.integer({ min: 0, max: 365 }),
    });
    const yearlyArb = fc.record({ interval: fc.constant('year' as const), billingDay: fc.constant(null), amount: amountArb, trialDays: fc.integer({ min: 0, max: 365 }) });
    fc.assert(
      fc.property(
        fc.oneof(planArb, yearlyArb),
        instantArb,
        fc.oneof(fc.constant(undefined), fc.constant('now' as const), fc.integer({ min: 1, max: 4 * 365 * 86_400_000 })),
        fc.constantFrom(undefined, true, false),
        (subscribed, now, trialEndChoice, prorate) => {
          const trialEnd = typeof trialEndChoice === 'number' ? new Date(now.getTime() + trialEndChoice) : trialEndChoice;
          const creation = planCreation({ plan: subscribed, now, trialEnd, prorate });
          expect(creation.currentPeriodStart).toEqual(now);
          expect(creation.currentPeriodEnd.getTime()).toBeGreaterThan(now.getTime());
          expect(creation.prorate).toBe(prorate === true);
          const inTrial = trialEnd instanceof Date || (trialEnd === undefined && subscribed.trialDays > 0);
          expect(creation.status).toBe(inTrial ? 'trial' : 'active');
          // trial_end=now charges now on every plan (v1 §3.2); only billing_day without prorate and no trial_end=now waits.
          const chargesNow = !inTrial && (trialEnd === 'now' || !(subscribed.billingDay !== null && prorate !== true));
          expect(creation.chargeNow === null).toBe(!chargesNow);
          if (chargesNow) expect(creation.firstCharge).toEqual({ at: now, amount: creation.chargeNow, kind: creation.firstCharge.kind });
          else expect(creation.firstCharge.at).toEqual(creation.currentPeriodEnd);
          expect(creation.firstCharge.amount).toBeGreaterThanOrEqual(0);
          expect(creation.firstCharge.amount).toBeLessThanOrEqual(subscribed.amount);
          if (inTrial) {
            expect(creation.trialStart).toEqual(now);
            expect(creation.trialEnd).toEqual(creation.currentPeriodEnd);
          }
        },
      ),
    );
  });
});

describe('renewal (service rules §1.5)', () => {
  it('starts the new period at the old period end, not when the job ran: "the new period starts at the old period end (not at the moment the job ran)"', () => {
    expect(planRenewal(plan({ billingDay: 31 }), at('2027-01-31T00:00:00Z'))).toEqual({
      amount: 1000,
      kind: 'full',
      periodStart: at('2027-01-31T00:00:00Z'),
      periodEnd: at('2027-02-28T00:00:00Z'),
    });
    expect(planRenewal(plan({ amount: 1200 }), at('2027-02-28T05:00:00Z'))).toEqual({
      amount: 1200,
      kind: 'full',
      periodStart: at('2027-02-28T05:00:00Z'),
      periodEnd: at('2027-03-28T05:00:00Z'),
    });
  });
});
