import { describe, expect, it } from 'vitest';
import {
  SCHEDULE_TIME_ZONE,
  assertCronExpression,
  currentSlot,
  isSlot,
  nextSlotAfter,
  slotAtOrAfter,
  slotAtOrBefore,
  slotsBetween,
} from '../../src/engine/cron';

const at = (iso: string): Date => new Date(iso);
const iso = (dates: readonly Date[]): string[] => dates.map((d) => d.toISOString());

const DAILY_9_JST = '0 9 * * *';
const MONTHLY_1ST_JST = '0 0 1 * *';
const EVERY_15_MIN = '*/15 * * * *';

describe('schedules are read in Asia/Tokyo', () => {
  it('the schedule time zone is Asia/Tokyo', () => {
    expect(SCHEDULE_TIME_ZONE).toBe('Asia/Tokyo');
  });

  it("'0 9 * * *' is 09:00 JST, which is 00:00 UTC", () => {
    expect(nextSlotAfter(DAILY_9_JST, at('2027-01-01T12:00:00Z')).toISOString()).toBe('2027-01-02T00:00:00.000Z');
  });

  it("'0 0 1 * *' is midnight JST on the 1st, which is 15:00 UTC on the last day of the previous month", () => {
    expect(nextSlotAfter(MONTHLY_1ST_JST, at('2027-01-15T00:00:00Z')).toISOString()).toBe('2027-01-31T15:00:00.000Z');
    expect(nextSlotAfter(MONTHLY_1ST_JST, at('2027-02-15T00:00:00Z')).toISOString()).toBe('2027-02-28T15:00:00.000Z');
    expect(nextSlotAfter(MONTHLY_1ST_JST, at('2027-04-15T00:00:00Z')).toISOString()).toBe('2027-04-30T15:00:00.000Z');
  });

  it("in a leap year '0 0 1 * *' before March is 15:00 UTC on Feb 29", () => {
    expect(nextSlotAfter(MONTHLY_1ST_JST, at('2028-02-10T00:00:00Z')).toISOString()).toBe('2028-02-29T15:00:00.000Z');
  });

  it('the JST date, not the UTC date, decides which day a slot is on', () => {
    // 2027-01-31T16:00Z is already Feb 1 01:00 JST: the Feb 1 slot has passed, the next is Mar 1.
    expect(nextSlotAfter(MONTHLY_1ST_JST, at('2027-01-31T16:00:00Z')).toISOString()).toBe('2027-02-28T15:00:00.000Z');
  });
});

describe('nextSlotAfter is strictly after', () => {
  it('an instant that is itself a slot gives the following slot', () => {
    expect(nextSlotAfter(DAILY_9_JST, at('2027-01-01T00:00:00Z')).toISOString()).toBe('2027-01-02T00:00:00.000Z');
  });

  it('one millisecond before a slot gives that slot', () => {
    expect(nextSlotAfter(DAILY_9_JST, at('2026-12-31T23:59:59.999Z')).toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });

  it('a few milliseconds past a slot gives the following slot, not the one just passed', () => {
    expect(nextSlotAfter(DAILY_9_JST, at('2027-01-01T00:00:00.500Z')).toISOString()).toBe('2027-01-02T00:00:00.000Z');
    expect(nextSlotAfter(EVERY_15_MIN, at('2027-01-01T00:15:00.001Z')).toISOString()).toBe('2027-01-01T00:30:00.000Z');
  });

  it('is strictly after for any instant (second-resolution schedule)', () => {
    for (const ms of [0, 1, 499, 999]) {
      const after = new Date(Date.UTC(2027, 0, 1, 0, 0, 0, ms));
      const next = nextSlotAfter('* * * * * *', after);
      expect(next.getTime()).toBeGreaterThan(after.getTime());
      expect(next.toISOString()).toBe('2027-01-01T00:00:01.000Z');
    }
  });
});

describe('slotAtOrAfter and slotAtOrBefore include the instant itself when it is a slot', () => {
  it('slotAtOrAfter of a slot is that slot', () => {
    expect(slotAtOrAfter(DAILY_9_JST, at('2027-01-01T00:00:00Z')).toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });

  it('slotAtOrAfter one millisecond past a slot is the next slot', () => {
    expect(slotAtOrAfter(DAILY_9_JST, at('2027-01-01T00:00:00.001Z')).toISOString()).toBe('2027-01-02T00:00:00.000Z');
  });

  it('slotAtOrBefore of a slot is that slot', () => {
    expect(slotAtOrBefore(DAILY_9_JST, at('2027-01-01T00:00:00Z')).toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(slotAtOrBefore(EVERY_15_MIN, at('2027-01-01T00:15:00Z')).toISOString()).toBe('2027-01-01T00:15:00.000Z');
  });

  it('slotAtOrBefore one millisecond before a slot is the previous slot', () => {
    expect(slotAtOrBefore(DAILY_9_JST, at('2026-12-31T23:59:59.999Z')).toISOString()).toBe('2026-12-31T00:00:00.000Z');
    expect(slotAtOrBefore(EVERY_15_MIN, at('2027-01-01T00:14:59.999Z')).toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });

  it('slotAtOrBefore between slots is the latest slot already passed', () => {
    expect(slotAtOrBefore(DAILY_9_JST, at('2027-01-01T00:00:00.500Z')).toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(slotAtOrBefore(MONTHLY_1ST_JST, at('2027-03-10T00:00:00Z')).toISOString()).toBe('2027-02-28T15:00:00.000Z');
  });
});

describe('isSlot', () => {
  it('is true exactly on a slot', () => {
    expect(isSlot(DAILY_9_JST, at('2027-01-01T00:00:00Z'))).toBe(true);
    expect(isSlot(MONTHLY_1ST_JST, at('2027-01-31T15:00:00Z'))).toBe(true);
  });

  it('is false a millisecond either side of a slot', () => {
    expect(isSlot(DAILY_9_JST, at('2027-01-01T00:00:00.001Z'))).toBe(false);
    expect(isSlot(DAILY_9_JST, at('2026-12-31T23:59:59.999Z'))).toBe(false);
  });

  it('is false at 09:00 UTC, which is 18:00 JST', () => {
    expect(isSlot(DAILY_9_JST, at('2027-01-01T09:00:00Z'))).toBe(false);
  });

  it('is false at midnight UTC on the 1st for the monthly JST schedule', () => {
    expect(isSlot(MONTHLY_1ST_JST, at('2027-02-01T00:00:00Z'))).toBe(false);
  });
});

describe('currentSlot is the last of slotsBetween, in one step', () => {
  it('equals slotsBetween(...).slice(-1) at the edges of the window', () => {
    const cases: [string, string, string][] = [
      [EVERY_15_MIN, '2027-01-01T00:00:00Z', '2027-01-02T00:00:00Z'],
      [EVERY_15_MIN, '2027-01-01T00:00:00Z', '2027-01-01T00:14:59.999Z'],
      [EVERY_15_MIN, '2027-01-01T00:00:00Z', '2027-01-01T00:15:00Z'],
      [DAILY_9_JST, '2027-01-01T00:00:00Z', '2027-01-01T23:59:59.999Z'],
      [DAILY_9_JST, '2026-12-31T23:59:59.999Z', '2027-01-01T00:00:00Z'],
      [DAILY_9_JST, '2027-01-01T00:00:00Z', '2027-01-01T00:00:00Z'],
      [MONTHLY_1ST_JST, '2027-01-01T00:00:00Z', '2027-03-01T00:00:00Z'],
      ['* * * * *', '2027-01-01T00:00:00.500Z', '2027-01-01T00:01:00Z'],
    ];
    for (const [expression, after, until] of cases) {
      expect(iso(currentSlot(expression, at(after), at(until))), `${expression} (${after}, ${until}]`).toEqual(iso(slotsBetween(expression, at(after), at(until)).slice(-1)));
    }
  });
});

describe('slotsBetween is half-open: (after, until]', () => {
  it('excludes a slot at `after` and includes a slot at `until`', () => {
    const slots = slotsBetween(DAILY_9_JST, at('2027-01-01T00:00:00Z'), at('2027-01-04T00:00:00Z'));
    expect(iso(slots)).toEqual(['2027-01-02T00:00:00.000Z', '2027-01-03T00:00:00.000Z', '2027-01-04T00:00:00.000Z']);
  });

  it('adjacent windows neither miss nor repeat a slot', () => {
    const whole = slotsBetween(EVERY_15_MIN, at('2027-01-01T00:00:00Z'), at('2027-01-01T02:00:00Z'));
    const first = slotsBetween(EVERY_15_MIN, at('2027-01-01T00:00:00Z'), at('2027-01-01T01:00:00Z'));
    const second = slotsBetween(EVERY_15_MIN, at('2027-01-01T01:00:00Z'), at('2027-01-01T02:00:00Z'));
    expect(whole).toHaveLength(8);
    expect(iso([...first, ...second])).toEqual(iso(whole));
  });

  it('with `after` a few milliseconds into a slot, that slot is not repeated', () => {
    const slots = slotsBetween(EVERY_15_MIN, at('2027-01-01T00:00:00.250Z'), at('2027-01-01T00:30:00Z'));
    expect(iso(slots)).toEqual(['2027-01-01T00:15:00.000Z', '2027-01-01T00:30:00.000Z']);
  });

  it('is empty when until is not after `after`', () => {
    expect(slotsBetween(DAILY_9_JST, at('2027-01-01T00:00:00Z'), at('2027-01-01T00:00:00Z'))).toEqual([]);
    expect(slotsBetween(DAILY_9_JST, at('2027-01-05T00:00:00Z'), at('2027-01-01T00:00:00Z'))).toEqual([]);
  });

  it('is empty when no slot falls in the window', () => {
    expect(slotsBetween(DAILY_9_JST, at('2027-01-01T00:00:00Z'), at('2027-01-01T23:59:59.999Z'))).toEqual([]);
  });

  it('returns at most `limit` slots, the oldest first', () => {
    const slots = slotsBetween(DAILY_9_JST, at('2027-01-01T00:00:00Z'), at('2027-12-31T00:00:00Z'), 2);
    expect(iso(slots)).toEqual(['2027-01-02T00:00:00.000Z', '2027-01-03T00:00:00.000Z']);
  });

  it('lists missed monthly slots across a year boundary (backfill)', () => {
    const slots = slotsBetween(MONTHLY_1ST_JST, at('2026-11-15T00:00:00Z'), at('2027-02-15T00:00:00Z'));
    expect(iso(slots)).toEqual(['2026-11-30T15:00:00.000Z', '2026-12-31T15:00:00.000Z', '2027-01-31T15:00:00.000Z']);
  });
});

describe('assertCronExpression', () => {
  it('accepts a valid expression', () => {
    expect(() => assertCronExpression(DAILY_9_JST)).not.toThrow();
    expect(() => assertCronExpression('*/5 * * * * *')).not.toThrow();
  });

  it('throws a readable error naming the expression', () => {
    expect(() => assertCronExpression('not a cron')).toThrow('schedule "not a cron" is not a cron expression: ');
  });

  it('names what the expression is for and keeps the parser error as the cause', () => {
    let thrown: unknown;
    try {
      assertCronExpression('61 * * * *', 'job close-terms');
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(Error);
    expect((thrown as Error).message).toMatch(/^job close-terms "61 \* \* \* \*" is not a cron expression: .*61/);
    expect((thrown as Error).cause).toBeInstanceOf(Error);
  });
});
