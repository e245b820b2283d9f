import { afterEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import Decimal from 'decimal.js';
import { Dec, Rounding, assertYen, formatRate, parseRate, percentOf, shareOf, toYen } from '../../src/domain/money';

/** A rate string from hundredths of a percent, built without floating point. */
function rateFromHundredths(hundredths: number): string {
  return `${Math.floor(hundredths / 100)}.${String(hundredths % 100).padStart(2, '0')}`;
}

describe('percentOf: amount × rate / 100 with the named rounding', () => {
  it('floors an amount that does not divide evenly: 999 yen at 3.25 % is 32 (32.4675)', () => {
    expect(percentOf(999, parseRate('3.25'), 'floor')).toBe(32);
  });

  it('names the rounding: 999 yen at 3.25 % is 33 with ceil, 32 with halfUp and halfEven', () => {
    expect(percentOf(999, parseRate('3.25'), 'ceil')).toBe(33);
    expect(percentOf(999, parseRate('3.25'), 'halfUp')).toBe(32);
    expect(percentOf(999, parseRate('3.25'), 'halfEven')).toBe(32);
  });

  it('halfUp and halfEven differ on an exact half: 50 yen at 1 % is 0.5', () => {
    expect(percentOf(50, parseRate('1'), 'halfUp')).toBe(1);
    expect(percentOf(50, parseRate('1'), 'halfEven')).toBe(0);
    expect(percentOf(150, parseRate('1'), 'halfEven')).toBe(2);
  });

  it('is exact when the amount divides evenly: 10,000 yen at 3.00 % is 300', () => {
    expect(percentOf(10_000, parseRate('3.00'), 'floor')).toBe(300);
  });

  it('stays exact near the top of the safe integer range', () => {
    // (2^53 − 1) × 99.99 / 100 = 9006298534815516.9009; floating point would lose the last digits.
    expect(9_007_199_254_740_991n * 9_999n / 10_000n).toBe(9_006_298_534_815_516n);
    expect(percentOf(Number.MAX_SAFE_INTEGER, parseRate('99.99'), 'floor')).toBe(9_006_298_534_815_516);
    expect(percentOf(Number.MAX_SAFE_INTEGER, parseRate('99.99'), 'ceil')).toBe(9_006_298_534_815_517);
  });

  it('refuses an amount that is not integer yen', () => {
    expect(() => percentOf(10.5, parseRate('3'), 'floor')).toThrow(RangeError);
  });

  it('property: percentOf(a, r, floor) ≤ a·r/100 < percentOf(a, r, floor) + 1, in exact integer arithmetic', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1_000_000_000_000 }), fc.integer({ min: 0, max: 10_000 }), (amount, hundredths) => {
        const fee = BigInt(percentOf(amount, parseRate(rateFromHundredths(hundredths)), 'floor'));
        // a·r/100 with r = hundredths/100 is a·hundredths/10,000.
        const numerator = BigInt(amount) * BigInt(hundredths);
        expect(fee * 10_000n <= numerator).toBe(true);
        expect(numerator < (fee + 1n) * 10_000n).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('shareOf: amount × numerator / denominator (pro-rata shares)', () => {
  it('floors 1000 × 5/31 to 161 (161.29…)', () => {
    expect(shareOf(1000, 5, 31, 'floor')).toBe(161);
  });

  it('ceil rounds 1000 × 5/31 up to 162', () => {
    expect(shareOf(1000, 5, 31, 'ceil')).toBe(162);
  });

  it('the whole is the whole: 1000 × 31/31 is 1000', () => {
    expect(shareOf(1000, 31, 31, 'floor')).toBe(1000);
  });

  it('refuses a zero, negative or fractional denominator and a fractional numerator', () => {
    expect(() => shareOf(1000, 5, 0, 'floor')).toThrow(RangeError);
    expect(() => shareOf(1000, 5, -31, 'floor')).toThrow(RangeError);
    expect(() => shareOf(1000, 5, 30.5, 'floor')).toThrow(RangeError);
    expect(() => shareOf(1000, 0.5, 31, 'floor')).toThrow('share 0.5/31 must be of integers with a positive denominator');
  });

  it('property: floor share is within one yen below the exact share', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000_000 }), fc.integer({ min: 1, max: 366 }), fc.integer({ min: 0, max: 366 }), (amount, denominator, numerator) => {
        const share = BigInt(shareOf(amount, numerator, denominator, 'floor'));
        const exact = BigInt(amount) * BigInt(numerator);
        expect(share * BigInt(denominator) <= exact).toBe(true);
        expect(exact < (share + 1n) * BigInt(denominator)).toBe(true);
      }),
    );
  });
});

describe('parseRate: a percentage with at most two decimals, 0 to 100', () => {
  it.each([
    ['3', '3'],
    ['3.3', '3.3'],
    ['3.00', '3'],
    ['0', '0'],
    ['100', '100'],
    ['100.00', '100'],
    ['99.99', '99.99'],
  ])('accepts %j', (text, value) => {
    expect(parseRate(text).toString()).toBe(value);
  });

  it('accepts a number and reads it as its decimal text', () => {
    expect(parseRate(3.25).toString()).toBe('3.25');
  });

  it.each(['3.001', '-1', '101', '100.01', 'abc', '', '3.', '.5', '1e2', ' 3', '1000'])('rejects %j', (text) => {
    expect(() => parseRate(text)).toThrow(RangeError);
  });

  it('names what it was reading and the input in the message', () => {
    expect(() => parseRate('3.001', 'fee_rate')).toThrow('fee_rate must be a percentage with at most two decimals, got "3.001"');
    expect(() => parseRate('101', 'fee_rate')).toThrow('fee_rate must be at most 100, got 101');
  });
});

describe('formatRate: two decimals, as the API shows rates', () => {
  it.each([
    ['3', '3.00'],
    ['3.3', '3.30'],
    ['3.25', '3.25'],
    ['0', '0.00'],
    ['100', '100.00'],
  ])('%s → %s', (text, shown) => {
    expect(formatRate(parseRate(text))).toBe(shown);
  });
});

describe('assertYen: yen amounts are safe integers', () => {
  it('returns a safe integer unchanged', () => {
    expect(assertYen(0)).toBe(0);
    expect(assertYen(-500)).toBe(-500);
    expect(assertYen(Number.MAX_SAFE_INTEGER)).toBe(Number.MAX_SAFE_INTEGER);
  });

  it.each([0.5, 1.000001, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, -(2 ** 53)])('rejects %s', (value) => {
    expect(() => assertYen(value)).toThrow(RangeError);
  });

  it('names the amount in the message', () => {
    expect(() => assertYen(1.5, 'refund amount')).toThrow('refund amount must be an integer number of yen, got 1.5');
  });

  it('toYen refuses a result past 2^53', () => {
    expect(() => toYen(new Dec(2).pow(60), 'floor')).toThrow(RangeError);
  });
});

describe('Dec is an independent clone of decimal.js', () => {
  const original = { precision: Decimal.precision, rounding: Decimal.rounding };
  afterEach(() => {
    Decimal.set(original);
  });

  it('changing the global Decimal precision and rounding does not change Dec results', () => {
    const before = {
      fee: percentOf(999, parseRate('3.25'), 'floor'),
      third: new Dec(1).dividedBy(3).toString(),
      half: new Dec(2.5).toDecimalPlaces(0).toString(),
    };
    Decimal.set({ precision: 2, rounding: Decimal.ROUND_UP });
    // The global setting did take effect, so the comparison below means something.
    expect(new Decimal(1).dividedBy(3).toString()).toBe('0.34');
    expect(Dec.precision).toBe(40);
    expect(Dec.rounding).toBe(Decimal.ROUND_HALF_EVEN);
    expect(percentOf(999, parseRate('3.25'), 'floor')).toBe(before.fee);
    expect(new Dec(1).dividedBy(3).toString()).toBe(before.third);
    expect(new Dec(2.5).toDecimalPlaces(0).toString()).toBe(before.half);
    expect(before.third).toBe('0.' + '3'.repeat(40));
    expect(before.half).toBe('2');
  });

  it('the named roundings map to decimal.js rounding modes', () => {
    expect(Rounding).toEqual({ floor: Decimal.ROUND_FLOOR, ceil: Decimal.ROUND_CEIL, halfUp: Decimal.ROUND_HALF_UP, halfEven: Decimal.ROUND_HALF_EVEN });
  });
});
