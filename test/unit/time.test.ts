import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  JST_OFFSET_MS,
  MS_PER_DAY,
  assertCalendarDate,
  fromUnixSeconds,
  jstDate,
  jstMidnight,
  parseInstant,
  toIsoSeconds,
  toUnixSeconds,
} from '../../src/domain/time';

const parsed = (text: string): string => parseInstant(text).toISOString();

describe('parseInstant: a date or a zone-less date-time is read in JST', () => {
  it("'2027-01-01' is 00:00 JST, which is 2026-12-31T15:00:00Z", () => {
    expect(parsed('2027-01-01')).toBe('2026-12-31T15:00:00.000Z');
  });

  it("'2027-01-01T09:00' is 09:00 JST, which is 2027-01-01T00:00:00Z", () => {
    expect(parsed('2027-01-01T09:00')).toBe('2027-01-01T00:00:00.000Z');
  });

  it('reads seconds and milliseconds of a zone-less date-time in JST', () => {
    expect(parsed('2027-01-01T09:00:30')).toBe('2027-01-01T00:00:30.000Z');
    expect(parsed('2027-01-01T09:00:00.5')).toBe('2027-01-01T00:00:00.500Z');
  });

  it('ignores surrounding whitespace', () => {
    expect(parsed('  2027-01-01\n')).toBe('2026-12-31T15:00:00.000Z');
  });
});

describe('parseInstant: an ISO instant with Z or an offset is taken as given', () => {
  it('reads Z as UTC', () => {
    expect(parsed('2027-01-01T09:00:00Z')).toBe('2027-01-01T09:00:00.000Z');
    expect(parsed('2027-01-01T09:00Z')).toBe('2027-01-01T09:00:00.000Z');
    expect(parsed('2027-01-01T09:00:00.123Z')).toBe('2027-01-01T09:00:00.123Z');
  });

  it('applies the given offset', () => {
    expect(parsed('2027-01-01T09:00:00+09:00')).toBe('2027-01-01T00:00:00.000Z');
    expect(parsed('2027-01-01T09:00+05:30')).toBe('2027-01-01T03:30:00.000Z');
    expect(parsed('2026-12-31T19:00:00-05:00')).toBe('2027-01-01T00:00:00.000Z');
  });
});

describe('parseInstant rejects what is not an instant, with a message', () => {
  it.each(['', 'tomorrow', '2027/01/01', '2027-1-1', '20270101', '2027-01-01 09:00', '2027-01-01T09', '2027-01-01T09:00:00+0900', '1767225600'])(
    'rejects %j',
    (text) => {
      expect(() => parseInstant(text)).toThrow(RangeError);
      expect(() => parseInstant(text)).toThrow(/not an instant|expected a date/);
    },
  );

  it('the message quotes the input and shows the accepted forms', () => {
    expect(() => parseInstant('tomorrow')).toThrow('not an instant: "tomorrow" (use 2027-01-01, 2027-01-01T09:00 in JST, or an ISO instant with Z or an offset)');
  });

  it.each(['2027-02-30', '2027-02-29', '2027-04-31', '2027-13-01', '2027-00-10'])('rejects the impossible date %s', (text) => {
    expect(() => parseInstant(text)).toThrow(RangeError);
    expect(() => parseInstant(text)).toThrow(/2027-/);
  });

  it('accepts Feb 29 in a leap year', () => {
    expect(parsed('2028-02-29')).toBe('2028-02-28T15:00:00.000Z');
  });

  it('rejects an impossible date in a zone-less date-time', () => {
    expect(() => parseInstant('2027-02-30T09:00')).toThrow('no such calendar date: 2027-02-30');
  });

  it('rejects an impossible date in an instant with Z or an offset, rather than rolling it into the next month', () => {
    // new Date('2027-02-30T00:00Z') is 2027-03-02 in V8; the calendar date must be checked here too.
    expect(() => parseInstant('2027-02-30T00:00Z')).toThrow(RangeError);
    expect(() => parseInstant('2027-04-31T00:00:00+09:00')).toThrow(RangeError);
  });

  it('rejects impossible times', () => {
    expect(() => parseInstant('2027-01-01T25:00')).toThrow(RangeError);
    expect(() => parseInstant('2027-01-01T23:60Z')).toThrow(RangeError);
  });
});

describe('JST calendar dates', () => {
  it('jstDate is the Japan calendar date: 15:00 UTC is already the next day', () => {
    expect(jstDate(new Date('2026-12-31T14:59:59.999Z'))).toBe('2026-12-31');
    expect(jstDate(new Date('2026-12-31T15:00:00.000Z'))).toBe('2027-01-01');
  });

  it('jstMidnight is 00:00 JST, which is 15:00 UTC the day before', () => {
    expect(jstMidnight('2027-01-01').toISOString()).toBe('2026-12-31T15:00:00.000Z');
    expect(jstMidnight('2028-03-01').toISOString()).toBe('2028-02-29T15:00:00.000Z');
  });

  it('jstMidnight refuses an impossible date', () => {
    expect(() => jstMidnight('2027-02-30')).toThrow('no such calendar date: 2027-02-30');
    expect(() => jstMidnight('2027-1-1')).toThrow('expected a date YYYY-MM-DD, got "2027-1-1"');
  });

  it('assertCalendarDate accepts real dates only', () => {
    expect(() => assertCalendarDate('2028-02-29')).not.toThrow();
    expect(() => assertCalendarDate('2027-02-29')).toThrow(RangeError);
  });

  it('round-trips: jstDate(jstMidnight(d)) is d for every date from 1970 to 2199', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 83_000 }), (days) => {
        const date = new Date(days * MS_PER_DAY).toISOString().slice(0, 10);
        expect(jstDate(jstMidnight(date))).toBe(date);
      }),
    );
  });

  it('round-trips: jstMidnight(jstDate(t)) is the start of the JST day containing t', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 7_000_000_000_000 }), (ms) => {
        const instant = new Date(ms);
        const midnight = jstMidnight(jstDate(instant)).getTime();
        expect(midnight).toBeLessThanOrEqual(ms);
        expect(ms - midnight).toBeLessThan(MS_PER_DAY);
        expect((midnight + JST_OFFSET_MS) % MS_PER_DAY).toBe(0);
      }),
    );
  });
});

describe('v1 UNIX seconds and v2 ISO seconds', () => {
  it('toUnixSeconds drops milliseconds', () => {
    expect(toUnixSeconds(new Date('2027-01-01T00:00:00.000Z'))).toBe(1_798_761_600);
    expect(toUnixSeconds(new Date('2027-01-01T00:00:00.999Z'))).toBe(1_798_761_600);
    expect(toUnixSeconds(new Date(0))).toBe(0);
  });

  it('toUnixSeconds rounds down before 1970 too', () => {
    expect(toUnixSeconds(new Date(-1))).toBe(-1);
  });

  it('fromUnixSeconds is the inverse on whole seconds', () => {
    expect(fromUnixSeconds(1_798_761_600).toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });

  it('toIsoSeconds is UTC without milliseconds', () => {
    expect(toIsoSeconds(new Date('2027-01-01T09:08:07.654Z'))).toBe('2027-01-01T09:08:07Z');
    expect(toIsoSeconds(new Date('2027-01-01T00:00:00.000Z'))).toBe('2027-01-01T00:00:00Z');
    // Before 1970, and years printed with a sign (past 9999 and before year 0).
    expect(toIsoSeconds(new Date('1969-12-31T23:59:59.999Z'))).toBe('1969-12-31T23:59:59Z');
    expect(toIsoSeconds(new Date(Date.UTC(12027, 0, 1, 1, 2, 3, 4)))).toBe('+012027-01-01T01:02:03Z');
    expect(toIsoSeconds(new Date(Date.UTC(-1, 5, 1)))).toBe('-000001-06-01T00:00:00Z');
  });
});
