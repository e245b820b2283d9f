import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import {
  assertBillingDay,
  assertSubscribablePlan,
  assertTrialEndAccepted,
  billingInstantInMonth,
  billingInstantOnOrAfter,
  latestAcceptedTrialEnd,
  nextAnniversary,
  nextBillingInstant,
  periodEndAfter,
  previousBillingInstant,
  successivePeriods,
  trialFor,
  utcCalendarDaysBetween,
  type PlanSchedule,
} from '../../src/domain/billing-calendar';
import { rejectionOf } from '../support/rejections';

const at = (iso: string): Date => new Date(iso);
const iso = (instant: Date): string => instant.toISOString();
const monthlyOn = (billingDay: number): PlanSchedule => ({ interval: 'month', billingDay });
const MONTHLY: PlanSchedule = { interval: 'month', billingDay: null };
const YEARLY: PlanSchedule = { interval: 'year', billingDay: null };

/** Renewal instants of a plan: the ends of `count` back-to-back periods. */
function renewals(plan: PlanSchedule, start: string, count: number): string[] {
  return successivePeriods(plan, at(start), count).map((period) => iso(period.end));
}


// Instants from 1970 to 2200, whole milliseconds: the engine's plausible range, with the leap rules of 2100.
const instantArb = fc.integer({ min: 0, max: Date.UTC(2200, 0, 1) }).map((ms) => new Date(ms));
const billingDayArb = fc.integer({ min: 1, max: 31 });
const planArb: fc.Arbitrary<PlanSchedule> = fc.oneof(
  billingDayArb.map((billingDay) => monthlyOn(billingDay)),
  fc.constant(MONTHLY),
  fc.constant(YEARLY),
);
const lastDayOfUtcMonth = (instant: Date): number =>
  new Date(Date.UTC(instant.getUTCFullYear(), instant.getUTCMonth() + 1, 0)).getUTCDate();
const monthNumber = (instant: Date): number => instant.getUTCFullYear() * 12 + instant.getUTCMonth();

describe('billing_day plans (service rules §1.2)', () => {
  it('renews at 09:00 JST = 00:00 UTC on the billing day: "every renewal happens at 09:00 JST (= 00:00 UTC the same calendar day)"', () => {
    expect(iso(nextBillingInstant(monthlyOn(15), at('2027-04-10T12:34:56Z')))).toBe('2027-04-15T00:00:00.000Z');
    // 09:00 JST on 4/15 is 00:00 UTC 4/15: the JST and UTC dates agree.
    expect(iso(nextBillingInstant(monthlyOn(15), at('2027-04-15T08:59:59+09:00')))).toBe('2027-04-15T00:00:00.000Z');
    expect(iso(nextBillingInstant(monthlyOn(15), at('2027-04-15T09:00:00+09:00')))).toBe('2027-05-15T00:00:00.000Z');
  });

  it('renews on Feb 28 when billing_day is 31, then on Mar 31: "d = 31 always means the month end" (2027)', () => {
    expect(renewals(monthlyOn(31), '2027-01-31T00:00:00Z', 4)).toEqual([
      '2027-02-28T00:00:00.000Z',
      '2027-03-31T00:00:00.000Z',
      '2027-04-30T00:00:00.000Z',
      '2027-05-31T00:00:00.000Z',
    ]);
  });

  it('renews on Feb 29 in leap 2028 when billing_day is 31', () => {
    expect(renewals(monthlyOn(31), '2028-01-31T00:00:00Z', 2)).toEqual(['2028-02-29T00:00:00.000Z', '2028-03-31T00:00:00.000Z']);
  });

  it('renews on the last day of February when billing_day is 30 or 29: "d = 29 or 30 in February means the last day of February"', () => {
    expect(renewals(monthlyOn(30), '2027-01-30T00:00:00Z', 2)).toEqual(['2027-02-28T00:00:00.000Z', '2027-03-30T00:00:00.000Z']);
    expect(renewals(monthlyOn(29), '2027-01-29T00:00:00Z', 2)).toEqual(['2027-02-28T00:00:00.000Z', '2027-03-29T00:00:00.000Z']);
    expect(renewals(monthlyOn(30), '2028-01-30T00:00:00Z', 2)).toEqual(['2028-02-29T00:00:00.000Z', '2028-03-30T00:00:00.000Z']);
    expect(renewals(monthlyOn(29), '2028-01-29T00:00:00Z', 2)).toEqual(['2028-02-29T00:00:00.000Z', '2028-03-29T00:00:00.000Z']);
  });

  it('never drifts after a short month: "Each month is computed from d again, so the day never drifts"', () => {
    expect(renewals(monthlyOn(30), '2027-01-30T00:00:00Z', 4)).toEqual([
      '2027-02-28T00:00:00.000Z',
      '2027-03-30T00:00:00.000Z',
      '2027-04-30T00:00:00.000Z',
      '2027-05-30T00:00:00.000Z',
    ]);
  });

  it('renews billing_day 1 at exactly 2027-03-01T00:00:00Z, and a period starting there runs a whole month', () => {
    expect(iso(periodEndAfter(monthlyOn(1), at('2027-02-01T00:00:00Z')))).toBe('2027-03-01T00:00:00.000Z');
    expect(iso(nextBillingInstant(monthlyOn(1), at('2027-02-28T23:59:59.999Z')))).toBe('2027-03-01T00:00:00.000Z');
    expect(iso(periodEndAfter(monthlyOn(1), at('2027-03-01T00:00:00Z')))).toBe('2027-04-01T00:00:00.000Z');
  });

  it('crosses the year end on billing_day 31', () => {
    expect(iso(nextBillingInstant(monthlyOn(31), at('2027-12-31T00:00:00Z')))).toBe('2028-01-31T00:00:00.000Z');
  });

  it('finds the previous billing instant at or before an instant (the start of its billing cycle)', () => {
    expect(iso(previousBillingInstant(monthlyOn(1), at('2018-08-27T03:00:00Z')))).toBe('2018-08-01T00:00:00.000Z');
    expect(iso(previousBillingInstant(monthlyOn(1), at('2018-09-01T00:00:00Z')))).toBe('2018-09-01T00:00:00.000Z');
    expect(iso(previousBillingInstant(monthlyOn(31), at('2027-03-15T00:00:00Z')))).toBe('2027-02-28T00:00:00.000Z');
    expect(iso(previousBillingInstant(monthlyOn(15), at('2027-01-10T00:00:00Z')))).toBe('2026-12-15T00:00:00.000Z');
  });

  it('treats an instant exactly on a billing instant as on or after it, and anything later as before the next one', () => {
    expect(iso(billingInstantOnOrAfter(monthlyOn(10), at('2027-05-10T00:00:00Z')))).toBe('2027-05-10T00:00:00.000Z');
    expect(iso(billingInstantOnOrAfter(monthlyOn(10), at('2027-05-10T00:00:00.001Z')))).toBe('2027-06-10T00:00:00.000Z');
  });

  it('places the billing instant of any month on day min(d, month end), also for years 0..99', () => {
    expect(iso(billingInstantInMonth(31, 2100, 1))).toBe('2100-02-28T00:00:00.000Z'); // 2100 is not a leap year
    expect(billingInstantInMonth(5, 50, 0).getUTCFullYear()).toBe(50);
  });

  it('rejects a billing_day outside 1..31 (invalid_billing_day) and a yearly plan with billing_day: "A yearly plan with billing_day cannot be subscribed (invalid_plan)"', () => {
    expect(rejectionOf(() => assertBillingDay(0))).toEqual({ code: 'invalid_billing_day', param: 'billing_day' });
    expect(rejectionOf(() => assertBillingDay(32))).toEqual({ code: 'invalid_billing_day', param: 'billing_day' });
    expect(rejectionOf(() => assertBillingDay(1.5))).toEqual({ code: 'invalid_billing_day', param: 'billing_day' });
    const yearlyOnDay: PlanSchedule = { interval: 'year', billingDay: 1 };
    expect(rejectionOf(() => assertSubscribablePlan(yearlyOnDay))).toEqual({ code: 'invalid_plan', param: 'plan' });
    expect(rejectionOf(() => periodEndAfter(yearlyOnDay, at('2027-01-01T00:00:00Z')))).toEqual({ code: 'invalid_plan', param: 'plan' });
    expect(rejectionOf(() => nextBillingInstant(yearlyOnDay, at('2027-01-01T00:00:00Z')))).toEqual({ code: 'invalid_plan', param: 'plan' });
  });

  it('refuses to compute a billing instant for a plan without billing_day (a caller bug, not a request error)', () => {
    expect(() => nextBillingInstant(MONTHLY, at('2027-01-01T00:00:00Z'))).toThrow(RangeError);
  });
});

describe('plans without billing_day (service rules §1.2)', () => {
  it('drifts from Jan 31 to the 28th and stays there: "created 2027-01-31 05:00 UTC → 2027-02-28 05:00 → 2027-03-28 05:00 → 2027-04-28 05:00"', () => {
    expect(renewals(MONTHLY, '2027-01-31T05:00:00Z', 3)).toEqual([
      '2027-02-28T05:00:00.000Z',
      '2027-03-28T05:00:00.000Z',
      '2027-04-28T05:00:00.000Z',
    ]);
  });

  it('renews a subscription created 6/1 00:00 JST at 6/30 15:00 UTC, then 7/30 15:00 UTC: "created 6/1 00:00 JST (= 5/31 15:00 UTC) renews 6/30 15:00 UTC, then 7/30 15:00 UTC"', () => {
    expect(renewals(MONTHLY, '2027-06-01T00:00:00+09:00', 2)).toEqual(['2027-06-30T15:00:00.000Z', '2027-07-30T15:00:00.000Z']);
  });

  it('moves a yearly plan from Feb 29 to Feb 28 and keeps it there: "Yearly: Feb 29 → Feb 28 of the next year, and stays on the 28th"', () => {
    expect(renewals(YEARLY, '2028-02-29T10:00:00Z', 5)).toEqual([
      '2029-02-28T10:00:00.000Z',
      '2030-02-28T10:00:00.000Z',
      '2031-02-28T10:00:00.000Z',
      '2032-02-28T10:00:00.000Z', // a leap year again, but the anchor is not sticky
      '2033-02-28T10:00:00.000Z',
    ]);
  });

  it('keeps the time of day to the millisecond and crosses the year end', () => {
    expect(iso(nextAnniversary('month', at('2027-12-15T23:59:59.999Z')))).toBe('2028-01-15T23:59:59.999Z');
    expect(iso(nextAnniversary('year', at('2027-12-15T23:59:59.999Z')))).toBe('2028-12-15T23:59:59.999Z');
  });
});

describe('billing calendar properties', () => {
  it('iterating periods gives contiguous periods: each start is the previous end, and each end is later than its start', () => {
    fc.assert(
      fc.property(planArb, instantArb, (plan, start) => {
        const periods = successivePeriods(plan, start, 30);
        expect(periods[0]?.start).toEqual(start);
        for (let i = 0; i < periods.length; i += 1) {
          const period = periods[i]!;
          expect(period.end.getTime()).toBeGreaterThan(period.start.getTime());
          if (i > 0) expect(period.start).toEqual(periods[i - 1]!.end);
        }
      }),
    );
  });

  it('a monthly plan never skips or repeats a month: consecutive renewals are in consecutive months', () => {
    const monthlyArb = fc.oneof(billingDayArb.map((billingDay) => monthlyOn(billingDay)), fc.constant(MONTHLY));
    fc.assert(
      fc.property(monthlyArb, instantArb, (plan, start) => {
        const ends = successivePeriods(plan, start, 30).map((period) => period.end);
        for (let i = 1; i < ends.length; i += 1) expect(monthNumber(ends[i]!) - monthNumber(ends[i - 1]!)).toBe(1);
      }),
    );
  });

  it('a yearly plan renews once per year, never skipping one', () => {
    fc.assert(
      fc.property(instantArb, (start) => {
        const ends = successivePeriods(YEARLY, start, 10).map((period) => period.end);
        for (let i = 1; i < ends.length; i += 1) expect(ends[i]!.getUTCFullYear() - ends[i - 1]!.getUTCFullYear()).toBe(1);
      }),
    );
  });

  it('every renewal instant of a billing_day plan is 00:00:00.000 UTC on day min(d, month end)', () => {
    fc.assert(
      fc.property(billingDayArb, instantArb, (billingDay, start) => {
        for (const { end } of successivePeriods(monthlyOn(billingDay), start, 30)) {
          expect(end.getTime() % 86_400_000).toBe(0);
          expect(end.getUTCDate()).toBe(Math.min(billingDay, lastDayOfUtcMonth(end)));
        }
      }),
    );
  });

  it('the next billing instant is strictly after the instant, with no billing instant in between', () => {
    fc.assert(
      fc.property(billingDayArb, instantArb, (billingDay, instant) => {
        const plan = monthlyOn(billingDay);
        const next = nextBillingInstant(plan, instant);
        const previous = previousBillingInstant(plan, instant);
        expect(next.getTime()).toBeGreaterThan(instant.getTime());
        expect(previous.getTime()).toBeLessThanOrEqual(instant.getTime());
        // The previous one is the billing instant just before the next one: nothing lies between.
        expect(previousBillingInstant(plan, new Date(next.getTime() - 1))).toEqual(previous);
      }),
    );
  });

  it('without billing_day the day of the month never increases and the time of day never changes (clamping is not sticky)', () => {
    fc.assert(
      fc.property(fc.constantFrom(MONTHLY, YEARLY), instantArb, (plan, start) => {
        const periods = successivePeriods(plan, start, 30);
        for (const { start: from, end } of periods) {
          expect(end.getUTCDate()).toBeLessThanOrEqual(from.getUTCDate());
          expect(end.getTime() % 86_400_000).toBe(((from.getTime() % 86_400_000) + 86_400_000) % 86_400_000);
        }
      }),
    );
  });
});

describe('UTC calendar days', () => {
  it('counts calendar days between the days of two instants, ignoring the time of day', () => {
    expect(utcCalendarDaysBetween(at('2018-08-27T03:00:00Z'), at('2018-09-01T00:00:00Z'))).toBe(5);
    expect(utcCalendarDaysBetween(at('2018-08-27T23:59:59Z'), at('2018-08-28T00:00:00Z'))).toBe(1);
    expect(utcCalendarDaysBetween(at('2018-08-27T00:00:00Z'), at('2018-08-27T23:59:59Z'))).toBe(0);
  });
});

describe('trials at creation (service rules §1.3)', () => {
  const now = at('2027-04-10T03:00:00Z'); // 2027-04-10 12:00 JST
  const withTrialDays = (plan: PlanSchedule, trialDays: number) => ({ ...plan, trialDays });

  it('uses a future trial_end as given: "trial_start = now, trial_end = given"', () => {
    const trialEnd = at('2027-05-01T12:00:00Z');
    expect(trialFor({ plan: withTrialDays(MONTHLY, 0), now, trialEnd, prorate: undefined })).toEqual({ trialStart: now, trialEnd });
  });

  it('uses the plan trial_days when no trial_end is given: "or now + trial_days days"', () => {
    expect(trialFor({ plan: withTrialDays(MONTHLY, 14), now, trialEnd: undefined, prorate: undefined })).toEqual({
      trialStart: now,
      trialEnd: at('2027-04-24T03:00:00Z'),
    });
  });

  it('gives no trial without trial_end and without plan trial_days', () => {
    expect(trialFor({ plan: withTrialDays(MONTHLY, 0), now, trialEnd: undefined, prorate: undefined })).toBeNull();
  });

  it('disables the plan trial with trial_end=now: "no trial even if the plan has trial_days"', () => {
    expect(trialFor({ plan: withTrialDays(MONTHLY, 30), now, trialEnd: 'now', prorate: undefined })).toBeNull();
  });

  it('a given trial_end wins over the plan trial_days', () => {
    const trialEnd = at('2027-04-12T00:00:00Z');
    expect(trialFor({ plan: withTrialDays(MONTHLY, 30), now, trialEnd, prorate: undefined })?.trialEnd).toEqual(trialEnd);
  });

  it('moves the trial end to the next billing day with prorate explicitly false: "trial_end is moved to 09:00 JST of the next billing day on or after the requested trial end"', () => {
    const plan = withTrialDays(monthlyOn(25), 0);
    expect(trialFor({ plan, now, trialEnd: at('2027-05-03T12:00:00Z'), prorate: false })?.trialEnd).toEqual(at('2027-05-25T09:00:00+09:00'));
    // Requested exactly at a billing instant: already on it, nothing moves.
    expect(trialFor({ plan, now, trialEnd: at('2027-05-25T00:00:00Z'), prorate: false })?.trialEnd).toEqual(at('2027-05-25T00:00:00Z'));
    // Later on the billing day itself: moved to the next month, never back (the trial is not shortened).
    expect(trialFor({ plan, now, trialEnd: at('2027-05-25T15:00:00+09:00'), prorate: false })?.trialEnd).toEqual(at('2027-06-25T00:00:00Z'));
  });

  it('moves a trial that comes from the plan trial_days too, when prorate is explicitly false', () => {
    const plan = withTrialDays(monthlyOn(31), 7);
    expect(trialFor({ plan, now, trialEnd: undefined, prorate: false })?.trialEnd).toEqual(at('2027-04-30T00:00:00Z'));
  });

  it('does not move the trial end when prorate is omitted or true, or the plan has no billing_day', () => {
    const trialEnd = at('2027-05-03T12:00:00Z');
    expect(trialFor({ plan: withTrialDays(monthlyOn(25), 0), now, trialEnd, prorate: undefined })?.trialEnd).toEqual(trialEnd);
    expect(trialFor({ plan: withTrialDays(monthlyOn(25), 0), now, trialEnd, prorate: true })?.trialEnd).toEqual(trialEnd);
    expect(trialFor({ plan: withTrialDays(MONTHLY, 0), now, trialEnd, prorate: false })?.trialEnd).toEqual(trialEnd);
  });

  it('rejects a trial_end in the past or at this very instant (invalid_trial_end, param trial_end)', () => {
    const plan = withTrialDays(MONTHLY, 0);
    expect(rejectionOf(() => trialFor({ plan, now, trialEnd: at('2027-04-10T02:59:59Z'), prorate: undefined }))).toEqual({
      code: 'invalid_trial_end',
      param: 'trial_end',
    });
    expect(rejectionOf(() => trialFor({ plan, now, trialEnd: now, prorate: undefined }))).toEqual({ code: 'invalid_trial_end', param: 'trial_end' });
    expect(rejectionOf(() => trialFor({ plan, now, trialEnd: new Date(Number.NaN), prorate: undefined }))).toEqual({
      code: 'invalid_trial_end',
      param: 'trial_end',
    });
  });

  it('accepts a trial_end up to 5 years ahead and rejects one beyond: "trial_end (UNIX seconds, at most 5 years ahead, or now)"', () => {
    expect(iso(latestAcceptedTrialEnd(now))).toBe('2032-04-10T03:00:00.000Z');
    expect(() => assertTrialEndAccepted(at('2032-04-10T03:00:00Z'), now)).not.toThrow();
    expect(rejectionOf(() => assertTrialEndAccepted(at('2032-04-10T03:00:01Z'), now))).toEqual({ code: 'invalid_trial_end', param: 'trial_end' });
    // Five years from Feb 29 is Feb 28, as the yearly cycle counts a year.
    expect(iso(latestAcceptedTrialEnd(at('2028-02-29T00:00:00Z')))).toBe('2033-02-28T00:00:00.000Z');
  });

  it('rejects a yearly plan with billing_day before looking at the trial (invalid_plan)', () => {
    const plan = { interval: 'year', billingDay: 5, trialDays: 0 } as const;
    expect(rejectionOf(() => trialFor({ plan, now, trialEnd: at('1999-01-01T00:00:00Z'), prorate: undefined }))).toEqual({
      code: 'invalid_plan',
      param: 'plan',
    });
  });
});
