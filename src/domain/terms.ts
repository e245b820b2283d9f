/**
 * Settlement terms (service-rules §4 "Term"): half-open periods [start, end) on the JST calendar.
 * A charge belongs to the term in which it is captured, a refund to the term in which it is made,
 * so the only question this module answers is which boundaries surround an instant.
 */
import { jstDate, jstMidnight } from './time';

/** Settlement cycles: the calendar month (default), or halves 1st–15th and 16th–month end. */
export const TERM_CYCLES = ['monthly', 'semi_monthly'] as const;
export type TermCycle = (typeof TERM_CYCLES)[number];

/** The day of the month the second half of a semi-monthly month starts on. */
export const SEMI_MONTHLY_SECOND_HALF_DAY = 16;

/** A term's bounds: `start` inclusive, `end` exclusive, both at 00:00 JST. */
export interface TermBounds {
  readonly start: Date;
  readonly end: Date;
}

export function isTermCycle(value: string): value is TermCycle {
  return (TERM_CYCLES as readonly string[]).includes(value);
}

/**
 * The term of `cycle` that contains `instant`. Because the end is exclusive, 23:59:59.999 JST on
 * the last day belongs to the closing term and 00:00:00 JST on the next day to the new one.
 */
export function termContaining(cycle: TermCycle, instant: Date): TermBounds {
  if (Number.isNaN(instant.getTime())) throw new RangeError('termContaining needs a valid instant');
  const [year, month, day] = jstDate(instant).split('-').map(Number) as [number, number, number];
  const nextMonthStart = firstOfFollowingMonth(year, month);
  if (cycle === 'monthly') return { start: jstMidnight(calendarDate(year, month, 1)), end: jstMidnight(nextMonthStart) };
  const secondHalf = calendarDate(year, month, SEMI_MONTHLY_SECOND_HALF_DAY);
  return day < SEMI_MONTHLY_SECOND_HALF_DAY
    ? { start: jstMidnight(calendarDate(year, month, 1)), end: jstMidnight(secondHalf) }
    : { start: jstMidnight(secondHalf), end: jstMidnight(nextMonthStart) };
}

/**
 * The term that follows `term`: it starts where `term` ends. `term` must be a term of `cycle`,
 * so that a term stored under one cycle is never silently continued under another.
 */
export function nextTerm(cycle: TermCycle, term: TermBounds): TermBounds {
  assertTermOf(cycle, term);
  return termContaining(cycle, term.end);
}

/** Throws unless `term` is exactly a term of `cycle`. */
export function assertTermOf(cycle: TermCycle, term: TermBounds): void {
  const expected = termContaining(cycle, term.start);
  if (expected.start.getTime() !== term.start.getTime() || expected.end.getTime() !== term.end.getTime()) {
    throw new RangeError(
      `[${term.start.toISOString()}, ${term.end.toISOString()}) is not a ${cycle} term (expected [${expected.start.toISOString()}, ${expected.end.toISOString()}))`,
    );
  }
}

/** Whether `instant` falls in `term` (start inclusive, end exclusive). */
export function termIncludes(term: TermBounds, instant: Date): boolean {
  const at = instant.getTime();
  return at >= term.start.getTime() && at < term.end.getTime();
}

function firstOfFollowingMonth(year: number, month: number): string {
  return month === 12 ? calendarDate(year + 1, 1, 1) : calendarDate(year, month + 1, 1);
}

function calendarDate(year: number, month: number, day: number): string {
  return `${String(year).padStart(4, '0')}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
}
