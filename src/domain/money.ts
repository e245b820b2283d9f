/**
 * Money is integer yen; rates are percentages with two decimals, carried as strings at the edges
 * and as values of kessai's own decimal.js clone inside. Every division names its rounding: no
 * function here rounds implicitly.
 */
import Decimal from 'decimal.js';

/**
 * An independent clone, so no other library's global Decimal settings can change our arithmetic.
 * 40 significant digits hold any yen amount times any rate exactly.
 */
export const Dec = Decimal.clone({ precision: 40, rounding: Decimal.ROUND_HALF_EVEN, toExpNeg: -40, toExpPos: 40 });
export type Dec = InstanceType<typeof Dec>;

/** The roundings the engine uses, by name. */
export const Rounding = {
  floor: Dec.ROUND_FLOOR,
  ceil: Dec.ROUND_CEIL,
  halfUp: Dec.ROUND_HALF_UP,
  halfEven: Dec.ROUND_HALF_EVEN,
} as const;
export type RoundingName = keyof typeof Rounding;

/** Yen amounts stay below 2^53 so that they are exact as JavaScript numbers. */
export function assertYen(value: number, what = 'amount'): number {
  if (!Number.isSafeInteger(value)) throw new RangeError(`${what} must be an integer number of yen, got ${value}`);
  return value;
}

/** Rounds a decimal to whole yen with the named rounding. */
export function toYen(value: Dec, rounding: RoundingName): number {
  return assertYen(value.toDecimalPlaces(0, Rounding[rounding]).toNumber());
}

const RATE_PATTERN = /^\d{1,3}(\.\d{1,2})?$/;

/** Parses a percentage rate such as "3.00" or "10" (0 ≤ rate ≤ 100, at most two decimals). */
export function parseRate(rate: string | number, what = 'rate'): Dec {
  const text = typeof rate === 'number' ? String(rate) : rate;
  if (!RATE_PATTERN.test(text)) throw new RangeError(`${what} must be a percentage with at most two decimals, got ${JSON.stringify(rate)}`);
  const value = new Dec(text);
  if (value.gt(100)) throw new RangeError(`${what} must be at most 100, got ${text}`);
  return value;
}

/** A rate as the API shows it: two decimals, as a string ("3.00"). */
export function formatRate(rate: Dec): string {
  return rate.toFixed(2);
}

/** amount × rate / 100, rounded to yen with the named rounding. */
export function percentOf(amount: number, rate: Dec, rounding: RoundingName): number {
  return toYen(new Dec(assertYen(amount)).times(rate).dividedBy(100), rounding);
}

/** amount × numerator / denominator, rounded to yen with the named rounding (pro-rata shares). */
export function shareOf(amount: number, numerator: number, denominator: number, rounding: RoundingName): number {
  if (!Number.isInteger(numerator) || !Number.isInteger(denominator) || denominator <= 0) {
    throw new RangeError(`share ${numerator}/${denominator} must be of integers with a positive denominator`);
  }
  return toYen(new Dec(assertYen(amount)).times(numerator).dividedBy(denominator), rounding);
}
