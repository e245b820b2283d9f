/**
 * Japanese business days and balance due dates (service-rules §4 "Balance", `due_date`).
 *
 * Everything works on calendar dates as `YYYY-MM-DD` strings of the JST calendar, and weekday
 * arithmetic is done in UTC on those strings. That keeps the result independent of the machine's
 * time zone: @holiday-jp/holiday_jp formats Date arguments with local-time getters, so it is only
 * ever asked by string key here.
 */
import holidayJp from '@holiday-jp/holiday_jp';
import { assertCalendarDate, jstDate, jstMidnight, MS_PER_DAY } from './time';
import { assertTermOf, type TermBounds, type TermCycle } from './terms';

/** National holidays (including substitute and citizens' holidays) from the package's table. */
const NATIONAL_HOLIDAYS: ReadonlySet<string> = new Set(Object.keys(holidayJp.holidays));

/**
 * The years the holiday table covers. Outside them a holiday would silently count as a business
 * day, so dates there are refused rather than guessed.
 */
const HOLIDAY_YEARS = (() => {
  const years = [...NATIONAL_HOLIDAYS].map((date) => Number(date.slice(0, 4)));
  return { first: Math.min(...years), last: Math.max(...years) } as const;
})();

/**
 * Bank holidays that are not national holidays (Decision): Japanese banks are closed Dec 31 –
 * Jan 3 and payouts are bank transfers, so those days are not business days either. Jan 1 is also
 * a national holiday; it is listed so the rule reads as the banks state it.
 */
export const BANK_HOLIDAYS_MONTH_DAY = ['12-31', '01-01', '01-02', '01-03'] as const;

/** The day of the month the semi-monthly second-half term is paid on, in the following month. */
export const SEMI_MONTHLY_SECOND_HALF_PAYOUT_DAY = 15;

/** Whether a calendar date is a weekday that is neither a national holiday nor a bank holiday. */
export function isJapaneseBusinessDay(date: string): boolean {
  assertCoveredDate(date);
  const weekday = new Date(`${date}T00:00:00Z`).getUTCDay();
  if (weekday === 0 || weekday === 6) return false;
  if (NATIONAL_HOLIDAYS.has(date)) return false;
  return !(BANK_HOLIDAYS_MONTH_DAY as readonly string[]).includes(date.slice(5));
}

/** `date` itself if it is a business day, else the closest business day before it. */
export function previousBusinessDayOnOrBefore(date: string): string {
  let candidate = date;
  // At most a handful of steps: the longest run of non-business days (Golden Week, New Year) is
  // well under two weeks; the bound only guards against a broken holiday table.
  for (let step = 0; step < 31; step += 1) {
    if (isJapaneseBusinessDay(candidate)) return candidate;
    candidate = addDays(candidate, -1);
  }
  throw new Error(`no business day in the 31 days up to ${date}`);
}

/** A balance's payout date: the calendar date and its 00:00 JST instant (`due_date`). */
export interface BalanceDueDate {
  readonly date: string;
  readonly at: Date;
}

/**
 * The payout date of the balance of `term`, before moving it off non-business days:
 * - monthly: the last day of the month following the term's month (service-rules §4);
 * - semi-monthly (Decision, the real service's published half-month cycle): the term of the 1st–
 *   15th is paid on the last day of the same month, the term of the 16th–month end on the 15th of
 *   the following month, so each half is paid about half a month after it closes.
 */
export function nominalPayoutDate(term: TermBounds, cycle: TermCycle): string {
  assertTermOf(cycle, term);
  const start = jstDate(term.start);
  const year = Number(start.slice(0, 4));
  const month = Number(start.slice(5, 7));
  const following = month === 12 ? { year: year + 1, month: 1 } : { year, month: month + 1 };
  if (cycle === 'monthly') return lastDayOfMonth(following.year, following.month);
  const firstHalf = start.endsWith('-01');
  return firstHalf
    ? lastDayOfMonth(year, month)
    : calendarDate(following.year, following.month, SEMI_MONTHLY_SECOND_HALF_PAYOUT_DAY);
}

/**
 * `due_date` of the balance fixed when `term` closes: the nominal payout date, moved to the
 * previous business day if it is not one (service-rules §4), at 00:00 JST. Moving earlier never
 * reaches back before the term's end: the earliest nominal date is 15 days after it.
 */
export function balanceDueDate(term: TermBounds, cycle: TermCycle): BalanceDueDate {
  const date = previousBusinessDayOnOrBefore(nominalPayoutDate(term, cycle));
  return { date, at: jstMidnight(date) };
}

function assertCoveredDate(date: string): void {
  assertCalendarDate(date);
  const year = Number(date.slice(0, 4));
  if (year < HOLIDAY_YEARS.first || year > HOLIDAY_YEARS.last) {
    throw new RangeError(`no Japanese holiday data for ${date} (covered: ${HOLIDAY_YEARS.first}–${HOLIDAY_YEARS.last}); update @holiday-jp/holiday_jp`);
  }
}

function addDays(date: string, days: number): string {
  return new Date(Date.parse(`${date}T00:00:00Z`) + days * MS_PER_DAY).toISOString().slice(0, 10);
}

function lastDayOfMonth(year: number, month: number): string {
  // Day 0 of the next month is the last day of this one (UTC, so no time zone is involved).
  return new Date(Date.UTC(year, month, 0)).toISOString().slice(0, 10);
}

function calendarDate(year: number, month: number, day: number): string {
  return `${String(year).padStart(4, '0')}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
}
