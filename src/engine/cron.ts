/**
 * Job schedules are cron expressions read in Asia/Tokyo (the business calendar). A slot is one
 * instant the expression names. Parsing is cron-parser's; this module only fixes the time zone
 * and the half-open conventions the scheduler relies on.
 */
import { CronExpressionParser } from 'cron-parser';

export const SCHEDULE_TIME_ZONE = 'Asia/Tokyo';

/** Throws a readable error for an expression cron-parser cannot read. */
export function assertCronExpression(expression: string, what = 'schedule'): void {
  try {
    CronExpressionParser.parse(expression, { tz: SCHEDULE_TIME_ZONE, currentDate: new Date(0) });
  } catch (error) {
    throw new Error(`${what} ${JSON.stringify(expression)} is not a cron expression: ${(error as Error).message}`, { cause: error });
  }
}

/** The first slot strictly after `after`. */
export function nextSlotAfter(expression: string, after: Date): Date {
  return CronExpressionParser.parse(expression, { tz: SCHEDULE_TIME_ZONE, currentDate: after }).next().toDate();
}

/** The first slot at or after `at`. */
export function slotAtOrAfter(expression: string, at: Date): Date {
  return nextSlotAfter(expression, new Date(at.getTime() - 1));
}

/** The latest slot at or before `at`. */
export function slotAtOrBefore(expression: string, at: Date): Date {
  return CronExpressionParser.parse(expression, { tz: SCHEDULE_TIME_ZONE, currentDate: new Date(at.getTime() + 1) }).prev().toDate();
}

/** Whether `at` is exactly one of the expression's slots. */
export function isSlot(expression: string, at: Date): boolean {
  return slotAtOrAfter(expression, at).getTime() === at.getTime();
}

/** The latest slot in (afterExclusive, untilInclusive], as a list of none or one: the last of `slotsBetween`, found in one step. */
export function currentSlot(expression: string, afterExclusive: Date, untilInclusive: Date): Date[] {
  if (untilInclusive.getTime() <= afterExclusive.getTime()) return [];
  const latest = slotAtOrBefore(expression, untilInclusive);
  return latest.getTime() > afterExclusive.getTime() ? [latest] : [];
}

/** Slots in (afterExclusive, untilInclusive], oldest first, at most `limit` of them. */
export function slotsBetween(expression: string, afterExclusive: Date, untilInclusive: Date, limit = 100_000): Date[] {
  const slots: Date[] = [];
  if (untilInclusive.getTime() <= afterExclusive.getTime()) return slots;
  const iterator = CronExpressionParser.parse(expression, { tz: SCHEDULE_TIME_ZONE, currentDate: afterExclusive });
  while (slots.length < limit) {
    const slot = iterator.next().toDate();
    if (slot.getTime() > untilInclusive.getTime()) break;
    slots.push(slot);
  }
  return slots;
}
