import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  assertPlatformFeeInRange,
  captureBreakdown,
  chargePlatformFee,
  parsePlatformFeeRate,
  refundBreakdown,
  refundFeeOffset,
  serviceFee,
  type PlatformSplit,
} from '../../src/domain/fees';
import { KessaiError } from '../../src/domain/errors';

/** A rate string from hundredths of a percent, built without floating point. */
function rateFromHundredths(hundredths: number): string {
  return `${Math.floor(hundredths / 100)}.${String(hundredths % 100).padStart(2, '0')}`;
}

function rejection(run: () => unknown): KessaiError {
  try {
    run();
  } catch (error) {
    if (error instanceof KessaiError) return error;
    throw error;
  }
  throw new Error('expected a KessaiError');
}

describe('service fee', () => {
  it('is floor(amount × fee_rate / 100): 999 yen at 3.25 % is 32 (32.4675 rounded down)', () => {
    expect(serviceFee(999, '3.25')).toBe(32);
  });

  it('is exact when the amount divides evenly: 10,000 at 3.00 % is 300', () => {
    expect(serviceFee(10_000, '3.00')).toBe(300);
  });

  it('"a refund returns floor(refunded amount × fee_rate / 100) as refund_fee_offset"', () => {
    expect(refundFeeOffset(500, '3.25')).toBe(16); // 16.25
    expect(refundFeeOffset(499, '3.25')).toBe(16); // 16.2175
    expect(refundFeeOffset(30, '3.25')).toBe(0); // 0.975
  });

  it('refuses a rate with more than two decimals', () => {
    expect(() => serviceFee(1000, '3.255')).toThrow(RangeError);
  });
});

describe('platform fee of a charge', () => {
  const tenant = { platformFeeRate: '10', payjpFeeIncluded: false } as const;

  it('is floor(amount × platform_fee_rate / 100) and shows the rate with two decimals', () => {
    expect(chargePlatformFee(999, tenant)).toEqual({ platformFee: 99, platformFeeRate: '10.00', totalPlatformFee: 99 });
  });

  it('"platform_fee_rate on the charge is null when platform_fee was given"', () => {
    expect(chargePlatformFee(10_000, tenant, 1234)).toEqual({ platformFee: 1234, platformFeeRate: null, totalPlatformFee: 1234 });
  });

  it('is absent outside platform mode, and a platform_fee there is rejected', () => {
    expect(chargePlatformFee(1000, null)).toEqual({ platformFee: null, platformFeeRate: null, totalPlatformFee: 0 });
    const error = rejection(() => chargePlatformFee(1000, null, 100));
    expect(error.code).toBe('invalid_param_key');
    expect(error.param).toBe('platform_fee');
  });

  it('tenant platform_fee_rate is at most 95 with two decimals', () => {
    expect(parsePlatformFeeRate('95.00').toFixed(2)).toBe('95.00');
    expect(() => parsePlatformFeeRate('95.01')).toThrow(RangeError);
    expect(() => parsePlatformFeeRate('10.123')).toThrow(RangeError);
  });
});

describe('range of a given platform_fee (v1 §4.2)', () => {
  it('"if payjp_fee_included is true, 5% to 100% of amount"', () => {
    expect(assertPlatformFeeInRange(50, 1000, true)).toBe(50);
    expect(assertPlatformFeeInRange(1000, 1000, true)).toBe(1000);
    for (const outside of [49, 1001, 0]) {
      const error = rejection(() => assertPlatformFeeInRange(outside, 1000, true));
      expect(error.code).toBe('invalid_amount');
      expect(error.param).toBe('platform_fee');
      expect(error.status).toBe(400);
    }
  });

  it('"if false, 0% to 95%"', () => {
    expect(assertPlatformFeeInRange(0, 1000, false)).toBe(0);
    expect(assertPlatformFeeInRange(950, 1000, false)).toBe(950);
    expect(rejection(() => assertPlatformFeeInRange(951, 1000, false)).code).toBe('invalid_amount');
    expect(rejection(() => assertPlatformFeeInRange(-1, 1000, false)).code).toBe('invalid_amount');
  });

  it('compares exactly, without rounding the bound: 5 % of 999 is 49.95, so 49 is out and 50 in', () => {
    expect(rejection(() => assertPlatformFeeInRange(49, 999, true)).code).toBe('invalid_amount');
    expect(assertPlatformFeeInRange(50, 999, true)).toBe(50);
  });

  it('rejects a fractional platform_fee', () => {
    expect(rejection(() => assertPlatformFeeInRange(100.5, 1000, false)).code).toBe('invalid_amount');
  });
});

describe('capture breakdown', () => {
  it('worked example, payjp_fee_included = false → tenant 8,700, platform 1,000', () => {
    const { platformFee, totalPlatformFee } = chargePlatformFee(10_000, { platformFeeRate: '10.00', payjpFeeIncluded: false });
    expect(totalPlatformFee).toBe(1000);
    const split = captureBreakdown({ amount: 10_000, feeRate: '3.00', platform: { platformFee: platformFee ?? 0, payjpFeeIncluded: false } });
    expect(split).toEqual({ amount: 10_000, fee: 300, platformFee: 1000, ownerShare: 8700, platformShare: 1000 });
  });

  it('worked example, payjp_fee_included = true → tenant 9,000, platform 700; total_platform_fee still 1,000', () => {
    const { platformFee, totalPlatformFee } = chargePlatformFee(10_000, { platformFeeRate: '10.00', payjpFeeIncluded: true });
    expect(totalPlatformFee).toBe(1000);
    const split = captureBreakdown({ amount: 10_000, feeRate: '3.00', platform: { platformFee: platformFee ?? 0, payjpFeeIncluded: true } });
    expect(split).toEqual({ amount: 10_000, fee: 300, platformFee: 1000, ownerShare: 9000, platformShare: 700 });
  });

  it('splits an amount that does not divide evenly: 999 yen at 3.25 %, platform 10 %', () => {
    // fee floor(32.4675) = 32, platform fee floor(99.9) = 99
    expect(captureBreakdown({ amount: 999, feeRate: '3.25', platform: { platformFee: 99, payjpFeeIncluded: false } })).toEqual({
      amount: 999,
      fee: 32,
      platformFee: 99,
      ownerShare: 868,
      platformShare: 99,
    });
    expect(captureBreakdown({ amount: 999, feeRate: '3.25', platform: { platformFee: 99, payjpFeeIncluded: true } })).toEqual({
      amount: 999,
      fee: 32,
      platformFee: 99,
      ownerShare: 900,
      platformShare: 67,
    });
  });

  it('gives the merchant amount − fee outside platform mode', () => {
    expect(captureBreakdown({ amount: 999, feeRate: '3.25', platform: null })).toEqual({
      amount: 999,
      fee: 32,
      platformFee: 0,
      ownerShare: 967,
      platformShare: 0,
    });
  });

  it('bills the platform when an included platform fee is below the service fee, rather than losing a yen', () => {
    const split = captureBreakdown({ amount: 10_000, feeRate: '3.00', platform: { platformFee: 100, payjpFeeIncluded: true } });
    expect(split.platformShare).toBe(-200);
    expect(split.ownerShare + split.platformShare + split.fee).toBe(10_000);
  });
});

describe('refund breakdown', () => {
  const excluded: PlatformSplit = { platformFee: 99, payjpFeeIncluded: false };
  const included: PlatformSplit = { platformFee: 99, payjpFeeIncluded: true };

  it('a full refund of the worked example returns every fee exactly', () => {
    expect(refundBreakdown({ amount: 10_000, refunded: 10_000, feeRate: '3.00', platform: { platformFee: 1000, payjpFeeIncluded: false } })).toEqual({
      refunded: 10_000,
      refundFeeOffset: 300,
      refundPlatformFeeOffset: 1000,
      ownerShare: 8700,
      platformShare: 1000,
    });
    expect(refundBreakdown({ amount: 10_000, refunded: 10_000, feeRate: '3.00', platform: { platformFee: 1000, payjpFeeIncluded: true } })).toEqual({
      refunded: 10_000,
      refundFeeOffset: 300,
      refundPlatformFeeOffset: 1000,
      ownerShare: 9000,
      platformShare: 700,
    });
  });

  it('refund_platform_fee_offset is floor(platform_fee × refunded / amount): 500 of 999 with platform fee 99 → 49', () => {
    // 99 × 500 / 999 = 49.549…; fee offset floor(500 × 3.25 %) = floor(16.25) = 16
    expect(refundBreakdown({ amount: 999, refunded: 500, feeRate: '3.25', platform: excluded })).toEqual({
      refunded: 500,
      refundFeeOffset: 16,
      refundPlatformFeeOffset: 49,
      ownerShare: 435,
      platformShare: 49,
    });
    expect(refundBreakdown({ amount: 999, refunded: 500, feeRate: '3.25', platform: included })).toEqual({
      refunded: 500,
      refundFeeOffset: 16,
      refundPlatformFeeOffset: 49,
      ownerShare: 451,
      platformShare: 33,
    });
  });

  it('two partial refunds never return more fee or platform fee than the capture charged', () => {
    const first = refundBreakdown({ amount: 999, refunded: 500, feeRate: '3.25', platform: excluded });
    const second = refundBreakdown({ amount: 999, refunded: 499, feeRate: '3.25', platform: excluded });
    expect(first.refundFeeOffset + second.refundFeeOffset).toBe(32);
    expect(first.refundPlatformFeeOffset + second.refundPlatformFeeOffset).toBe(98); // ≤ 99: one yen stays with the platform
    expect(first.ownerShare + second.ownerShare + first.platformShare + second.platformShare + 32).toBe(999);
  });

  it('outside platform mode the merchant bears the refund less the fee offset', () => {
    expect(refundBreakdown({ amount: 999, refunded: 100, feeRate: '3.25', platform: null })).toEqual({
      refunded: 100,
      refundFeeOffset: 3,
      refundPlatformFeeOffset: 0,
      ownerShare: 97,
      platformShare: 0,
    });
  });

  it('refuses a refund of nothing or of more than the amount', () => {
    expect(() => refundBreakdown({ amount: 999, refunded: 0, feeRate: '3.25', platform: null })).toThrow(RangeError);
    expect(() => refundBreakdown({ amount: 999, refunded: 1000, feeRate: '3.25', platform: null })).toThrow(RangeError);
  });
});

describe('conservation (property)', () => {
  const feeRate = fc.integer({ min: 0, max: 500 }).map(rateFromHundredths); // 0.00 %–5.00 %
  const amount = fc.integer({ min: 50, max: 9_999_999 });
  // A platform fee either from a tenant rate (0–95 %) or given within the v1 §4.2 range.
  const platform = (charged: number): fc.Arbitrary<PlatformSplit | null> =>
    fc.oneof(
      fc.constant(null),
      fc.record({ rate: fc.integer({ min: 0, max: 9500 }), payjpFeeIncluded: fc.boolean() }).map(({ rate, payjpFeeIncluded }) => ({
        platformFee: chargePlatformFee(charged, { platformFeeRate: rateFromHundredths(rate), payjpFeeIncluded }).platformFee ?? 0,
        payjpFeeIncluded,
      })),
      fc.integer({ min: Math.ceil((charged * 5) / 100), max: charged }).map((platformFee) => ({ platformFee, payjpFeeIncluded: true })),
      fc.integer({ min: 0, max: Math.floor((charged * 95) / 100) }).map((platformFee) => ({ platformFee, payjpFeeIncluded: false })),
    );
  const charge = amount.chain((charged) => fc.record({ amount: fc.constant(charged), feeRate, platform: platform(charged) }));

  it('capture: ownerShare + platformShare + fee === amount, and the parts are non-negative where they must be', () => {
    fc.assert(
      fc.property(charge, (input) => {
        const split = captureBreakdown(input);
        expect(split.ownerShare + split.platformShare + split.fee).toBe(input.amount);
        expect(Number.isInteger(split.ownerShare) && Number.isInteger(split.platformShare)).toBe(true);
        expect(split.fee).toBeGreaterThanOrEqual(0);
        expect(split.ownerShare).toBeGreaterThanOrEqual(0);
        // The platform's share can only go negative when an included platform fee is below the fee.
        if (split.platformFee >= split.fee || !input.platform?.payjpFeeIncluded) expect(split.platformShare).toBeGreaterThanOrEqual(0);
      }),
      { numRuns: 500 },
    );
  });

  it('refund: ownerShare + platformShare + refundFeeOffset === refunded, offsets bounded by the capture', () => {
    fc.assert(
      fc.property(
        charge.chain((input) => fc.record({ input: fc.constant(input), refunded: fc.integer({ min: 1, max: input.amount }) })),
        ({ input, refunded }) => {
          const capture = captureBreakdown(input);
          const split = refundBreakdown({ ...input, refunded });
          expect(split.ownerShare + split.platformShare + split.refundFeeOffset).toBe(refunded);
          expect(split.refundFeeOffset).toBeGreaterThanOrEqual(0);
          expect(split.refundFeeOffset).toBeLessThanOrEqual(capture.fee);
          expect(split.refundPlatformFeeOffset).toBeGreaterThanOrEqual(0);
          expect(split.refundPlatformFeeOffset).toBeLessThanOrEqual(capture.platformFee);
          expect(split.ownerShare).toBeGreaterThanOrEqual(0);
          if (refunded === input.amount) {
            expect(split).toMatchObject({ refundFeeOffset: capture.fee, refundPlatformFeeOffset: capture.platformFee });
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('refunding a charge in parts never returns more fee or platform fee than the capture charged', () => {
    fc.assert(
      fc.property(
        charge.chain((input) =>
          fc.record({ input: fc.constant(input), cuts: fc.uniqueArray(fc.integer({ min: 1, max: input.amount - 1 }), { maxLength: 5 }) }),
        ),
        ({ input, cuts }) => {
          const points = [0, ...[...cuts].sort((a, b) => a - b), input.amount];
          const parts = points.slice(1).map((point, index) => refundBreakdown({ ...input, refunded: point - (points[index] ?? 0) }));
          const capture = captureBreakdown(input);
          const sum = (pick: (part: (typeof parts)[number]) => number): number => parts.reduce((total, part) => total + pick(part), 0);
          expect(sum((part) => part.refunded)).toBe(input.amount);
          expect(sum((part) => part.refundFeeOffset)).toBeLessThanOrEqual(capture.fee);
          expect(sum((part) => part.refundPlatformFeeOffset)).toBeLessThanOrEqual(capture.platformFee);
          expect(sum((part) => part.ownerShare + part.platformShare + part.refundFeeOffset)).toBe(input.amount);
        },
      ),
      { numRuns: 300 },
    );
  });
});
