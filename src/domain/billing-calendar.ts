/**
 * The subscription billing calendar of service rules §1.2 and §1.3: where a period ends, when a
 * renewal falls and when a trial ends. Instants only; what is charged at them is ./proration.
 *
 * All arithmetic is on the UTC calendar. That is not a shortcut: a billing-day renewal is 09:00
 * JST, which is 00:00 UTC of the same calendar date, and a plan without billing_day is anchored
 * "in UTC" by the rules, so the UTC date is the date both rules count in.
 */
import { reject } from './errors';
import { MS_PER_DAY } from './time';

export const PLAN_INTERVALS = ['month', 'year'] as const;
export type PlanInterval = (typeof PLAN_INTERVALS)[number];

/** What the calendar needs to know about a plan (v1 §2.4). */
export type PlanSchedule = {
  readonly interval: PlanInterval;
  /** 1..31 for a monthly plan renewed on a fixed day of the month; null to follow the first charge. */
  readonly billingDay: number | null;
};

/** A subscription period `[start, end)`. Subscriptions are prepaid: a period starts when its charge is made. */
export type BillingPeriod = {
  readonly start: Date;
  readonly end: Date;
};

export const FIRST_BILLING_DAY = 1;
export const LAST_BILLING_DAY = 31;
/** v1 §4.6 rule 2: `trial_end` may be at most this many years ahead. */
export const TRIAL_END_MAX_YEARS = 5;

/** v1 §4.5: `billing_day` is 1 to 31. */
export function assertBillingDay(billingDay: number): number {
  if (!Number.isInteger(billingDay) || billingDay < FIRST_BILLING_DAY || billingDay > LAST_BILLING_DAY) {
    reject('invalid_billing_day', 'billing_day', `billing_day must be an integer from 1 to 31, got ${billingDay}`);
  }
  return billingDay;
}

/**
 * §1.3 and v1 §4.5: a yearly plan with billing_day can be created but not subscribed to. Checked
 * wherever a plan starts or continues a cycle, so a plan that slipped through fails loudly instead
 * of being billed on a calendar the rules do not define.
 */
export function assertSubscribablePlan(plan: PlanSchedule): void {
  if (plan.interval === 'year' && plan.billingDay !== null) {
    reject('invalid_plan', 'plan', 'a yearly plan with billing_day cannot be subscribed to');
  }
  if (plan.billingDay !== null) assertBillingDay(plan.billingDay);
}

function assertInstant(instant: Date, what: string): void {
  if (Number.isNaN(instant.getTime())) throw new RangeError(`${what} is not a valid instant`);
}

/**
 * An instant from UTC calendar fields. Months and days out of range roll over (month 12 is
 * January of the next year, day 0 the last day of the previous month). setUTCFullYear is used
 * because Date.UTC reads the years 0..99 as 1900..1999.
 */
function utcInstant(year: number, monthIndex: number, day: number, msIntoDay: number): Date {
  const midnight = new Date(0);
  midnight.setUTCFullYear(year, monthIndex, day);
  return new Date(midnight.getTime() + msIntoDay);
}

function daysInUtcMonth(year: number, monthIndex: number): number {
  // Day 0 of the following month is the last day of this one.
  return utcInstant(year, monthIndex + 1, 0, 0).getUTCDate();
}

function msIntoUtcDay(instant: Date): number {
  // Written this way so that instants before 1970 (negative times) also give 0..MS_PER_DAY-1.
  return ((instant.getTime() % MS_PER_DAY) + MS_PER_DAY) % MS_PER_DAY;
}

/** The number of the UTC calendar day an instant falls on (days since 1970-01-01). */
export function utcDayNumber(instant: Date): number {
  assertInstant(instant, 'instant');
  return Math.floor(instant.getTime() / MS_PER_DAY);
}

/**
 * Whole UTC calendar days from the day of `from` to the day of `to`: the count of days d with
 * day(from) ≤ d < day(to). The times of day do not matter, which is how §1.4 and §1.6 count.
 */
export function utcCalendarDaysBetween(from: Date, to: Date): number {
  return utcDayNumber(to) - utcDayNumber(from);
}

/**
 * The same time of day, `months` later on the UTC calendar, the day clamped to the last day of
 * the target month. Only the clamped result is returned, so a caller stepping from it again
 * continues from the clamped day: that is the non-sticky clamping §1.2 asks for.
 */
function addMonthsOnUtcCalendar(instant: Date, months: number): Date {
  const year = instant.getUTCFullYear();
  const targetMonth = instant.getUTCMonth() + months;
  const day = Math.min(instant.getUTCDate(), daysInUtcMonth(year, targetMonth));
  return utcInstant(year, targetMonth, day, msIntoUtcDay(instant));
}

/** §1.2: the billing instant of a month is 00:00 UTC (09:00 JST) on day min(d, last day of month). */
export function billingInstantInMonth(billingDay: number, year: number, monthIndex: number): Date {
  assertBillingDay(billingDay);
  return utcInstant(year, monthIndex, Math.min(billingDay, daysInUtcMonth(year, monthIndex)), 0);
}

function billingDayOf(plan: PlanSchedule): number {
  assertSubscribablePlan(plan);
  if (plan.billingDay === null) {
    throw new RangeError('the plan has no billing_day: its periods follow nextAnniversary');
  }
  return plan.billingDay;
}

/**
 * The first billing instant of a billing_day plan strictly after `after`. Strictly, so that a
 * period starting exactly at a billing instant (a renewal) runs a whole month, not zero time.
 * Each month is computed from d again, so a short month never drags the later ones (§1.2).
 */
export function nextBillingInstant(plan: PlanSchedule, after: Date): Date {
  const billingDay = billingDayOf(plan);
  assertInstant(after, 'after');
  const year = after.getUTCFullYear();
  const month = after.getUTCMonth();
  const thisMonth = billingInstantInMonth(billingDay, year, month);
  return thisMonth.getTime() > after.getTime() ? thisMonth : billingInstantInMonth(billingDay, year, month + 1);
}

/** The last billing instant of a billing_day plan at or before `atOrBefore` (the start of its billing cycle). */
export function previousBillingInstant(plan: PlanSchedule, atOrBefore: Date): Date {
  const billingDay = billingDayOf(plan);
  assertInstant(atOrBefore, 'atOrBefore');
  const year = atOrBefore.getUTCFullYear();
  const month = atOrBefore.getUTCMonth();
  const thisMonth = billingInstantInMonth(billingDay, year, month);
  return thisMonth.getTime() <= atOrBefore.getTime() ? thisMonth : billingInstantInMonth(billingDay, year, month - 1);
}

/** `instant` itself when it is a billing instant, else the next one: used to move a trial end (§1.3). */
export function billingInstantOnOrAfter(plan: PlanSchedule, instant: Date): Date {
  const previous = previousBillingInstant(plan, instant);
  return previous.getTime() === instant.getTime() ? previous : nextBillingInstant(plan, instant);
}

/**
 * §1.2, plan without billing_day: the previous period end plus one interval on the UTC calendar,
 * same time of day, the day clamped to the month end. Pass the previous *end* (not the first
 * anchor): 2027-01-31 → 02-28 → 03-28, and a yearly Feb 29 → Feb 28, staying on the 28th.
 */
export function nextAnniversary(interval: PlanInterval, previousEnd: Date): Date {
  assertInstant(previousEnd, 'previousEnd');
  return addMonthsOnUtcCalendar(previousEnd, interval === 'month' ? 1 : 12);
}

/**
 * Where a period that starts at `periodStart` ends, for any subscribable plan: the next billing
 * instant for a billing_day plan, one interval later otherwise. Renewals pass the old period end,
 * never the time the job ran (§1.5), so a late job still produces the intended calendar.
 */
export function periodEndAfter(plan: PlanSchedule, periodStart: Date): Date {
  assertSubscribablePlan(plan);
  return plan.billingDay === null ? nextAnniversary(plan.interval, periodStart) : nextBillingInstant(plan, periodStart);
}

/** `count` back-to-back periods from `firstStart`, each starting at the previous end (simulation, previews, tests). */
export function successivePeriods(plan: PlanSchedule, firstStart: Date, count: number): readonly BillingPeriod[] {
  if (!Number.isInteger(count) || count < 0) throw new RangeError(`count must be a non-negative integer, got ${count}`);
  const periods: BillingPeriod[] = [];
  let start = firstStart;
  for (let i = 0; i < count; i += 1) {
    const end = periodEndAfter(plan, start);
    periods.push({ start, end });
    start = end;
  }
  return periods;
}

/**
 * The latest trial end accepted at `now`: five years later on the UTC calendar (a Feb 29 gives
 * Feb 28), the same clamping as the yearly cycle so the two rules never disagree about a "year".
 */
export function latestAcceptedTrialEnd(now: Date): Date {
  assertInstant(now, 'now');
  return addMonthsOnUtcCalendar(now, 12 * TRIAL_END_MAX_YEARS);
}

/**
 * v1 §4.6 rule 2: a `trial_end` timestamp must be in the future (strictly: a trial ending at the
 * moment it starts is no trial; `now` is the way to ask for none) and at most 5 years ahead.
 */
export function assertTrialEndAccepted(requestedTrialEnd: Date, now: Date): void {
  if (Number.isNaN(requestedTrialEnd.getTime())) reject('invalid_trial_end', 'trial_end', 'trial_end is not a valid timestamp');
  if (requestedTrialEnd.getTime() <= now.getTime()) {
    reject('invalid_trial_end', 'trial_end', 'trial_end must be in the future');
  }
  if (requestedTrialEnd.getTime() > latestAcceptedTrialEnd(now).getTime()) {
    reject('invalid_trial_end', 'trial_end', `trial_end must be at most ${TRIAL_END_MAX_YEARS} years ahead`);
  }
}

/** `trial_end` as a request gives it: a timestamp, the word `now` (no trial), or nothing (the plan decides). */
export type TrialEndRequest = Date | 'now' | undefined;

export type Trial = {
  readonly trialStart: Date;
  readonly trialEnd: Date;
};

export type TrialRequest = {
  readonly plan: PlanSchedule & { readonly trialDays: number };
  readonly now: Date;
  readonly trialEnd: TrialEndRequest;
  /** The `prorate` parameter as sent: undefined when omitted, which differs from false here. */
  readonly prorate: boolean | undefined;
};

/**
 * §1.3: the trial a new subscription gets, or null for none.
 * - `trial_end` = `now`: no trial, even when the plan has trial_days.
 * - `trial_end` timestamp: validated, then used.
 * - nothing given: the plan's trial_days (days of 24 h, which are UTC calendar days) or no trial.
 * - billing_day plan with `prorate` explicitly false: the end moves to 09:00 JST of the billing
 *   day on or after it. "On or after" is taken by instant: a trial asked to end at 15:00 JST on a
 *   billing day moves to the *next* billing day, because moving it back to 09:00 would shorten
 *   the trial the customer was promised (and could put its end before its start).
 */
export function trialFor(request: TrialRequest): Trial | null {
  const { plan, now, trialEnd, prorate } = request;
  assertSubscribablePlan(plan);
  assertInstant(now, 'now');
  if (trialEnd === 'now') return null;
  let requestedEnd: Date;
  if (trialEnd === undefined) {
    if (!Number.isInteger(plan.trialDays) || plan.trialDays < 0) {
      throw new RangeError(`plan trial_days must be a non-negative integer, got ${plan.trialDays}`);
    }
    if (plan.trialDays === 0) return null;
    requestedEnd = new Date(now.getTime() + plan.trialDays * MS_PER_DAY);
  } else {
    assertTrialEndAccepted(trialEnd, now);
    requestedEnd = trialEnd;
  }
  // The 5-year limit is checked on the requested end; the move below may add up to a month,
  // which the rules accept as part of asking for prorate=false.
  const end = plan.billingDay !== null && prorate === false ? billingInstantOnOrAfter(plan, requestedEnd) : requestedEnd;
  return { trialStart: now, trialEnd: end };
}
