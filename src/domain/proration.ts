/**
 * What a subscription is charged and refunded, and when: the pro-rata first period (service rules
 * §1.4), the pro-rata refund on delete and the pro-rata plan change (§1.6), and the first charge
 * of a new subscription, at creation or at trial end (§1.3). The instants come from
 * ./billing-calendar; this module puts amounts on them. Days are whole UTC calendar days
 * throughout, so the first-period charge and the refund count the same way.
 */
import {
  assertSubscribablePlan,
  nextAnniversary,
  nextBillingInstant,
  periodEndAfter,
  previousBillingInstant,
  trialFor,
  utcCalendarDaysBetween,
  type PlanSchedule,
  type TrialEndRequest,
} from './billing-calendar';
import { reject } from './errors';
import { assertYen, shareOf } from './money';
import { REFUND_WINDOW_MS } from './limits';

export const CHARGE_KINDS = ['full', 'prorated'] as const;
/** Whether a charge is the plan amount or a pro-rata share of it. */
export type ChargeKind = (typeof CHARGE_KINDS)[number];

/** A plan as the subscription rules need it (v1 §2.4). */
export type SubscribablePlan = PlanSchedule & {
  /** Integer yen. */
  readonly amount: number;
  /** 0 to 365. */
  readonly trialDays: number;
};

/** A charge and the period it pays for. The period starts when the charge is made (prepaid). */
export type ChargedPeriod = {
  readonly amount: number;
  readonly kind: ChargeKind;
  readonly periodStart: Date;
  readonly periodEnd: Date;
};

/** §1.4 worked out, with the day counts kept so a charge description or a test can show them. */
export type FirstPeriodProration = {
  /** floor(plan amount × chargedDays / cycleDays). */
  readonly amount: number;
  /** N: UTC days from the day of the start up to and including the day before the next billing day. */
  readonly chargedDays: number;
  /** D: UTC days from the previous billing day (inclusive) to the next billing day (exclusive). */
  readonly cycleDays: number;
  /** The previous billing instant: the start of the billing cycle the period falls in. */
  readonly cycleStart: Date;
  /** The next billing instant: where the pro-rated period ends. */
  readonly periodEnd: Date;
};

/**
 * §1.4: the share of the plan amount for a period from `startAt` to the next billing instant.
 *
 * "Next billing day" is the day of the first billing instant strictly after `startAt`, and
 * "previous billing day" the day of the last one at or before it; both are 00:00 UTC, so:
 * - a start on a billing day at or after 09:00 JST (00:00 UTC), including exactly at the billing
 *   instant, is at the start of a cycle: N = D and the whole plan amount is charged;
 * - a start between 00:00 and 08:59 JST is still the previous UTC day, and that day is counted
 *   (on a billing day this gives N = 1, the last day of the cycle that is ending).
 * N is therefore always between 1 and D, and the amount between floor(amount / 31) and amount.
 */
export function prorateFirstPeriod(planAmount: number, billingDay: number, startAt: Date): FirstPeriodProration {
  assertYen(planAmount, 'plan amount');
  const plan: PlanSchedule = { interval: 'month', billingDay };
  const periodEnd = nextBillingInstant(plan, startAt);
  const cycleStart = previousBillingInstant(plan, startAt);
  const chargedDays = utcCalendarDaysBetween(startAt, periodEnd);
  const cycleDays = utcCalendarDaysBetween(cycleStart, periodEnd);
  return { amount: shareOf(planAmount, chargedDays, cycleDays, 'floor'), chargedDays, cycleDays, cycleStart, periodEnd };
}

/** §1.4 amount only: floor(amount × N / D). Example: billing_day 1, 1000 yen, 2018-08-27 12:00 JST → 161. */
export function proratedAmount(planAmount: number, billingDay: number, createdAt: Date): number {
  return prorateFirstPeriod(planAmount, billingDay, createdAt).amount;
}

/** The day counts of §1.6: how much of a period is left at an instant. */
export type PeriodRemainder = {
  /** UTC days from the day of `at` (inclusive) to the day of the period end (exclusive), within 0..periodDays. */
  readonly remainingDays: number;
  /** UTC days from the day of the period start (inclusive) to the day of the period end (exclusive). */
  readonly periodDays: number;
};

/**
 * §1.6 "remaining days / period days", counted like §1.4: whole UTC calendar days, the day of
 * `at` counted as remaining (as the day of creation is counted as charged in §1.4), the day of
 * the period end not counted (it belongs to the next period). So deleting on the day a period
 * started leaves all of it; deleting on the UTC day of the period end leaves none. An `at` before
 * the period counts as its start, one after it as its end.
 */
export function periodRemainder(periodStart: Date, periodEnd: Date, at: Date): PeriodRemainder {
  const periodDays = utcCalendarDaysBetween(periodStart, periodEnd);
  if (periodDays < 1) {
    // Every period the calendar produces crosses at least one UTC midnight; anything else is a caller bug.
    throw new RangeError(`period ${periodStart.toISOString()}..${periodEnd.toISOString()} does not span a UTC calendar day`);
  }
  const remainingDays = Math.min(periodDays, Math.max(0, utcCalendarDaysBetween(at, periodEnd)));
  return { remainingDays, periodDays };
}

/**
 * §1.6 delete with prorate=true: floor(last charge amount × remaining UTC days / period days).
 * The period is the one the last charge paid for; a period that was never charged (billing_day
 * without prorate, before its first renewal) has nothing to refund, which is the caller's check.
 */
export function proratedRefund(lastChargeAmount: number, periodStart: Date, periodEnd: Date, at: Date): number {
  const { remainingDays, periodDays } = periodRemainder(periodStart, periodEnd, at);
  return shareOf(lastChargeAmount, remainingDays, periodDays, 'floor');
}

/**
 * §1.6 **Decision**, plan change with prorate=true: floor(new plan amount × remaining days /
 * period days) of the current period, which keeps its end. Same day counting as the refund.
 */
export function proratedPlanChangeCharge(newPlanAmount: number, periodStart: Date, periodEnd: Date, at: Date): number {
  const { remainingDays, periodDays } = periodRemainder(periodStart, periodEnd, at);
  return shareOf(newPlanAmount, remainingDays, periodDays, 'floor');
}

/**
 * §1.6 / §2: a pro-rata refund is possible up to 180 days after the last charge, like any refund.
 * Rejects a prorated delete past the refund window (REFUND_WINDOW_MS, 180 × 24 h from the instant
 * of the last charge), the boundary included (matching "up to 180 days after" in §2).
 */
export function assertProratedRefundAllowed(lastChargedAt: Date, at: Date): void {
  if (at.getTime() - lastChargedAt.getTime() > REFUND_WINDOW_MS) {
    reject('cannot_prorated_refund_of_subscription', 'prorate');
  }
}

/** A charge that will be made later, with what it will be. */
export type ScheduledCharge = {
  readonly at: Date;
  readonly amount: number;
  readonly kind: ChargeKind;
};

export type CreationRequest = {
  readonly plan: SubscribablePlan;
  readonly now: Date;
  readonly trialEnd: TrialEndRequest;
  /** As sent: undefined when omitted, which §1.3 treats differently from false in a trial. */
  readonly prorate: boolean | undefined;
};

/** Everything a new subscription starts with (§1.3), before any write. */
export type CreationPlan = {
  readonly status: 'trial' | 'active';
  /** The stored `prorate` flag: omitted means false (v1 §4.6 rule 3). */
  readonly prorate: boolean;
  readonly trialStart: Date | null;
  readonly trialEnd: Date | null;
  readonly currentPeriodStart: Date;
  readonly currentPeriodEnd: Date;
  /**
   * Yen to charge before the subscription exists (charge first: if it fails nothing is created);
   * null when the subscription is created without a charge (trial, or billing_day without prorate).
   */
  readonly chargeNow: number | null;
  /** The first charge, now or later, as the plan stands today (a renewal recomputes it). */
  readonly firstCharge: ScheduledCharge;
};

/**
 * §1.3 creation as a pure decision. Validation order: the plan, then `trial_end`. The card check
 * (`doesnt_have_card`) and `already_subscribed` need stored state and are the caller's.
 *
 * `trial_end=now` ends the trial at once and charges now (v1 §3.2 "trial ends at once … charged
 * immediately", service rules §1.3 "charge now"), also on a billing_day plan without prorate=true:
 * the charge is the one trial end makes (the full amount for the period up to the next billing
 * instant, or the pro-rated amount with prorate=true), as `subscriptions.update` does on a trial.
 */
export function planCreation(request: CreationRequest): CreationPlan {
  const { plan, now, prorate } = request;
  assertSubscribablePlan(plan);
  assertYen(plan.amount, 'plan amount');
  const trial = trialFor(request);
  const storedProrate = prorate === true;

  if (trial !== null) {
    const atTrialEnd = planTrialEnd({ plan, trialEnd: trial.trialEnd, prorate: storedProrate });
    return {
      status: 'trial',
      prorate: storedProrate,
      trialStart: trial.trialStart,
      trialEnd: trial.trialEnd,
      currentPeriodStart: now,
      currentPeriodEnd: trial.trialEnd,
      chargeNow: null,
      firstCharge: { at: trial.trialEnd, amount: atTrialEnd.amount, kind: atTrialEnd.kind },
    };
  }

  if (plan.billingDay !== null && !storedProrate && request.trialEnd !== 'now') {
    // Free until the billing day: the first (full) charge is the first renewal.
    const periodEnd = nextBillingInstant(plan, now);
    return {
      status: 'active',
      prorate: storedProrate,
      trialStart: null,
      trialEnd: null,
      currentPeriodStart: now,
      currentPeriodEnd: periodEnd,
      chargeNow: null,
      firstCharge: { at: periodEnd, amount: plan.amount, kind: 'full' },
    };
  }

  const first = firstChargedPeriod(plan, now, storedProrate);
  return {
    status: 'active',
    prorate: storedProrate,
    trialStart: null,
    trialEnd: null,
    currentPeriodStart: first.periodStart,
    currentPeriodEnd: first.periodEnd,
    chargeNow: first.amount,
    firstCharge: { at: now, amount: first.amount, kind: first.kind },
  };
}

/** A charge made at `startAt` that opens a cycle: pro-rated to the billing day, or a full interval. */
function firstChargedPeriod(plan: SubscribablePlan, startAt: Date, prorate: boolean): ChargedPeriod {
  if (plan.billingDay === null) {
    // Without billing_day the charge instant is the new anchor (§1.3: "trial end is the new anchor").
    return { amount: plan.amount, kind: 'full', periodStart: startAt, periodEnd: nextAnniversary(plan.interval, startAt) };
  }
  if (prorate) {
    const proration = prorateFirstPeriod(plan.amount, plan.billingDay, startAt);
    return { amount: proration.amount, kind: 'prorated', periodStart: startAt, periodEnd: proration.periodEnd };
  }
  // **Decision** (prorate omitted) and prorate=false (whose trial end was already moved onto a
  // billing instant): the full amount, for a period that runs to the next billing instant.
  return { amount: plan.amount, kind: 'full', periodStart: startAt, periodEnd: nextBillingInstant(plan, startAt) };
}

export type TrialEndRequestForRenewal = {
  readonly plan: SubscribablePlan;
  /** The subscription's `trial_end`: the charge instant, whenever the job actually runs. */
  readonly trialEnd: Date;
  /** The stored flag. Explicit false and omitted no longer differ here: false already moved the trial end. */
  readonly prorate: boolean;
};

/**
 * §1.3 at trial end (called by the renewal job): the first charge and the period it opens,
 * starting at the trial end. With billing_day: pro-rated to the next billing instant when
 * prorate is true, else the full amount for the period up to the next billing instant.
 */
export function planTrialEnd(request: TrialEndRequestForRenewal): ChargedPeriod {
  assertSubscribablePlan(request.plan);
  return firstChargedPeriod(request.plan, request.trialEnd, request.prorate);
}

/**
 * §1.5 an ordinary renewal: the full amount of the (possibly just switched) plan, for the period
 * from the old period end, never from the time the job ran.
 */
export function planRenewal(plan: SubscribablePlan, previousPeriodEnd: Date): ChargedPeriod {
  assertYen(plan.amount, 'plan amount');
  return { amount: plan.amount, kind: 'full', periodStart: previousPeriodEnd, periodEnd: periodEndAfter(plan, previousPeriodEnd) };
}
