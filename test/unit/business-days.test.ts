import { afterEach, describe, expect, it } from 'vitest';
import holidayJp from '@holiday-jp/holiday_jp';
import {
  balanceDueDate,
  isJapaneseBusinessDay,
  nominalPayoutDate,
  previousBusinessDayOnOrBefore,
} from '../../src/domain/business-days';
import { termContaining, type TermCycle } from '../../src/domain/terms';

const jst = (local: string): Date => new Date(`${local}+09:00`);

/** The due date of the term of `cycle` that contains the JST instant `inTerm`. */
const dueFor = (cycle: TermCycle, inTerm: string): string => balanceDueDate(termContaining(cycle, jst(inTerm)), cycle).date;

describe('Japanese business days', () => {
  it('a weekday that is no holiday is a business day', () => {
    expect(isJapaneseBusinessDay('2027-09-30')).toBe(true); // Thursday
  });

  it('weekends are not', () => {
    expect(isJapaneseBusinessDay('2027-06-05')).toBe(false); // Saturday
    expect(isJapaneseBusinessDay('2027-06-06')).toBe(false); // Sunday
  });

  it('national holidays are not: Golden Week 2027 (May 3–5, Monday to Wednesday)', () => {
    expect(['2027-05-03', '2027-05-04', '2027-05-05'].map(isJapaneseBusinessDay)).toEqual([false, false, false]);
    expect(isJapaneseBusinessDay('2027-05-06')).toBe(true);
  });

  it('substitute holidays are not: 2029-04-30 (Showa Day fell on a Sunday)', () => {
    expect(isJapaneseBusinessDay('2029-04-30')).toBe(false);
  });

  it('bank holidays Dec 31 and Jan 2–3 are not, though not national holidays', () => {
    expect(isJapaneseBusinessDay('2027-12-31')).toBe(false); // Friday
    expect(isJapaneseBusinessDay('2029-01-02')).toBe(false); // Tuesday
    expect(isJapaneseBusinessDay('2029-01-03')).toBe(false); // Wednesday
    expect(isJapaneseBusinessDay('2029-01-04')).toBe(true); // Thursday
    expect(isJapaneseBusinessDay('2027-12-30')).toBe(true); // Thursday
  });

  it('previousBusinessDayOnOrBefore keeps a business day and steps back over holidays and weekends', () => {
    expect(previousBusinessDayOnOrBefore('2027-09-30')).toBe('2027-09-30');
    expect(previousBusinessDayOnOrBefore('2027-05-05')).toBe('2027-04-30'); // over Golden Week and a weekend
    expect(previousBusinessDayOnOrBefore('2028-01-03')).toBe('2027-12-30'); // over the whole New Year closure
  });

  it('refuses malformed dates and years the holiday table does not cover', () => {
    expect(() => isJapaneseBusinessDay('2027-02-30')).toThrow(RangeError);
    expect(() => isJapaneseBusinessDay('2027/03/01')).toThrow(RangeError);
    expect(() => isJapaneseBusinessDay('2051-01-05')).toThrow(/holiday data/);
  });
});

describe('balance due date, monthly cycle', () => {
  it('"monthly cycle → the last day of the following month": March 2028 term → 2028-04-30 nominally', () => {
    expect(nominalPayoutDate(termContaining('monthly', jst('2028-03-15T00:00:00')), 'monthly')).toBe('2028-04-30');
  });

  it('a month end on a normal weekday is kept: August 2027 term → Thursday 2027-09-30, 00:00 JST', () => {
    const due = balanceDueDate(termContaining('monthly', jst('2027-08-10T00:00:00')), 'monthly');
    expect(due.date).toBe('2027-09-30');
    expect(due.at.toISOString()).toBe('2027-09-29T15:00:00.000Z');
  });

  it('"if that is not a Japanese business day (weekend …), the previous business day": Sunday 2027-01-31 → Friday 29th', () => {
    expect(dueFor('monthly', '2026-12-20T00:00:00')).toBe('2027-01-29');
  });

  it('February ends: Sunday 2027-02-28 → 26th; leap day 2028-02-29 (Tuesday) is kept', () => {
    expect(dueFor('monthly', '2027-01-05T00:00:00')).toBe('2027-02-26');
    expect(dueFor('monthly', '2028-01-05T00:00:00')).toBe('2028-02-29');
  });

  it('a national holiday: 2029-04-30 is a substitute holiday, the 29th a Sunday, the 28th a Saturday → 2029-04-27', () => {
    expect(dueFor('monthly', '2029-03-31T23:59:59')).toBe('2029-04-27');
  });

  it('Golden Week: 2028-04-30 is a Sunday and the 29th Showa Day on a Saturday → 2028-04-28', () => {
    expect(dueFor('monthly', '2028-03-01T00:00:00')).toBe('2028-04-28');
  });

  it('year end: the bank holiday Friday 2027-12-31 → Thursday 2027-12-30', () => {
    expect(dueFor('monthly', '2027-11-15T00:00:00')).toBe('2027-12-30');
  });

  it('year end: Sunday 2028-12-31, Saturday 30th → Friday 2028-12-29', () => {
    expect(dueFor('monthly', '2028-11-01T00:00:00')).toBe('2028-12-29');
  });
});

describe('balance due date, semi-monthly cycle (Decision: 1st–15th → month end, 16th–end → 15th of next month)', () => {
  it('the first half is paid at the end of the same month: June 2027 → Wednesday 2027-06-30', () => {
    expect(dueFor('semi_monthly', '2027-06-15T23:59:59')).toBe('2027-06-30');
  });

  it('the second half is paid on the 15th of the next month: January 2027 → Monday 2027-02-15', () => {
    expect(dueFor('semi_monthly', '2027-01-16T00:00:00')).toBe('2027-02-15');
  });

  it('a 15th on a Saturday moves to Friday: second half of April 2027 → 2027-05-14', () => {
    expect(dueFor('semi_monthly', '2027-04-20T00:00:00')).toBe('2027-05-14');
  });

  it('the second half of December 2027 → Saturday 2028-01-15 → Friday 2028-01-14', () => {
    expect(dueFor('semi_monthly', '2027-12-31T23:59:59')).toBe('2028-01-14');
  });

  it('the first half of December 2026 → bank holiday 2026-12-31 → Wednesday 2026-12-30', () => {
    expect(dueFor('semi_monthly', '2026-12-01T00:00:00')).toBe('2026-12-30');
  });

  it('refuses a term that is not of the cycle', () => {
    expect(() => balanceDueDate(termContaining('monthly', jst('2027-06-01T00:00:00')), 'semi_monthly')).toThrow(RangeError);
  });
});

describe('independence from the machine time zone', () => {
  const original = process.env.TZ;
  afterEach(() => {
    if (original === undefined) delete process.env.TZ;
    else process.env.TZ = original;
  });

  it('the hazard it avoids: the package reads a Date in local time, so the JST holiday 2027-05-03 is missed in Honolulu', () => {
    process.env.TZ = 'Pacific/Honolulu';
    expect(holidayJp.isHoliday(jst('2027-05-03T00:00:00'))).toBe(false); // formatted as 2027-05-02 locally
    expect(isJapaneseBusinessDay('2027-05-03')).toBe(false);
  });

  it.each(['UTC', 'Asia/Tokyo', 'Pacific/Honolulu', 'Pacific/Kiritimati'])('gives the same answers with TZ=%s', (zone) => {
    process.env.TZ = zone;
    expect(isJapaneseBusinessDay('2027-05-03')).toBe(false);
    expect(isJapaneseBusinessDay('2027-05-06')).toBe(true);
    expect(isJapaneseBusinessDay('2027-06-05')).toBe(false);
    expect(dueFor('monthly', '2029-03-31T23:59:59')).toBe('2029-04-27');
    expect(dueFor('semi_monthly', '2027-12-31T23:59:59')).toBe('2028-01-14');
  });
});
