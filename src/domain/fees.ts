/**
 * Fees at capture and their offsets at refund (service-rules §4 "Fees" and "Platform mode",
 * v1 §2.2 and §4.2). Everything is integer yen computed with the decimal clone of ./money; each
 * rounding is named at its call site.
 *
 * Three parties share a captured amount:
 * - the service keeps its fee, floor(amount × fee_rate / 100);
 * - the platform operator (platform mode only) receives its share of the platform fee;
 * - the owner of the sale (the merchant, or in platform mode the tenant) receives the rest.
 *
 * The split in platform mode, derived from the worked example of service-rules §4 (amount 10,000,
 * platform rate 10 %, fee 3 %):
 * - `payjp_fee_included` = false: the tenant pays both fees: tenant = amount − fee − platform_fee
 *   (8,700), the platform gets platform_fee (1,000);
 * - `payjp_fee_included` = true: the platform fee already contains the service fee, so the
 *   platform pays it out of its share: tenant = amount − platform_fee (9,000), the platform gets
 *   platform_fee − fee (700).
 * In both cases the service fee is charged on the full amount and `total_platform_fee` is the
 * platform fee the tenant pays (1,000) — a Decision of service-rules §4.
 *
 * Refunds mirror the capture: every part of a refund is borne by the party that received the
 * matching part of the sale, and the parts always add up to the refunded amount.
 */
import { Dec, formatRate, parseRate, percentOf, shareOf, assertYen } from './money';
import { reject } from './errors';

/** service-rules §4: a tenant's platform rate is at most 95 %. */
export const PLATFORM_FEE_RATE_MAX = 95;

/**
 * v1 §4.2, range of a given `platform_fee` as percentages of `amount`, both ends inclusive. When
 * the service fee is included the platform fee must be able to carry it, hence the 5 % floor.
 */
export const PLATFORM_FEE_RANGE = {
  payjpFeeIncluded: { minPercent: 5, maxPercent: 100 },
  payjpFeeExcluded: { minPercent: 0, maxPercent: 95 },
} as const;

/** The service fee of a captured amount: floor(amount × fee_rate / 100) (service-rules §4 Decision). */
export function serviceFee(amount: number, feeRate: string): number {
  return percentOf(assertYen(amount, 'amount'), parseRate(feeRate, 'fee_rate'), 'floor');
}

/**
 * The fee returned on a refund: floor(refunded × fee_rate / 100) (service-rules §4 Decision). It
 * is computed per refund, so several partial refunds may return a yen or so less than the fee in
 * total; the sum never exceeds the fee, because a sum of floors is at most the floor of the sum.
 */
export function refundFeeOffset(refunded: number, feeRate: string): number {
  return percentOf(assertYen(refunded, 'refunded amount'), parseRate(feeRate, 'fee_rate'), 'floor');
}

/** Parses a tenant's `platform_fee_rate`: a percentage with two decimals, at most 95. */
export function parsePlatformFeeRate(rate: string | number): Dec {
  const value = parseRate(rate, 'platform_fee_rate');
  if (value.gt(PLATFORM_FEE_RATE_MAX)) {
    throw new RangeError(`platform_fee_rate must be at most ${PLATFORM_FEE_RATE_MAX}, got ${formatRate(value)}`);
  }
  return value;
}

/**
 * Checks a `platform_fee` given on charge creation against v1 §4.2. The catalogue has no code of
 * its own for this, so it answers `invalid_amount` (an amount parameter out of range) with param
 * `platform_fee` and a message naming the allowed range. The bounds compare exact decimals
 * (platform_fee × 100 against amount × percent), so no rounding is involved.
 */
export function assertPlatformFeeInRange(platformFee: number, amount: number, payjpFeeIncluded: boolean): number {
  if (!Number.isSafeInteger(platformFee)) reject('invalid_amount', 'platform_fee', 'platform_fee must be an integer number of yen');
  const range = payjpFeeIncluded ? PLATFORM_FEE_RANGE.payjpFeeIncluded : PLATFORM_FEE_RANGE.payjpFeeExcluded;
  const scaled = new Dec(platformFee).times(100);
  const whole = new Dec(assertYen(amount, 'amount'));
  if (scaled.lt(whole.times(range.minPercent)) || scaled.gt(whole.times(range.maxPercent))) {
    reject(
      'invalid_amount',
      'platform_fee',
      `platform_fee must be between ${range.minPercent}% and ${range.maxPercent}% of amount (${amount}) when payjp_fee_included is ${payjpFeeIncluded}, got ${platformFee}`,
    );
  }
  return platformFee;
}

/** The fee terms of a tenant (service-rules §4 Platform mode). */
export interface TenantFeeTerms {
  /** Percent string with at most two decimals, at most 95. */
  readonly platformFeeRate: string;
  /** Fixed at tenant creation: whether the platform fee contains the service fee. */
  readonly payjpFeeIncluded: boolean;
}

/** The platform fields of a charge as v1 §2.2 shows them. */
export interface ChargePlatformFee {
  /** Yen routed to the platform operator; null outside platform mode. */
  readonly platformFee: number | null;
  /** The tenant's rate as "10.00"; null when `platform_fee` was given or outside platform mode. */
  readonly platformFeeRate: string | null;
  /** The platform fee the tenant pays (service-rules §4 Decision); 0 outside platform mode. */
  readonly totalPlatformFee: number;
}

/**
 * The platform fee of a new charge: the given `platform_fee` (validated, v1 §4.2) or else
 * floor(amount × platform_fee_rate / 100). A `platform_fee` without a tenant is rejected with
 * `invalid_param_key`, as v1 §4.2 allows it in platform mode only.
 */
export function chargePlatformFee(amount: number, tenant: TenantFeeTerms | null, givenPlatformFee?: number | null): ChargePlatformFee {
  const given = givenPlatformFee ?? null;
  if (tenant === null) {
    if (given !== null) reject('invalid_param_key', 'platform_fee', 'platform_fee is only allowed in platform mode (with tenant)');
    return { platformFee: null, platformFeeRate: null, totalPlatformFee: 0 };
  }
  if (given !== null) {
    const platformFee = assertPlatformFeeInRange(given, amount, tenant.payjpFeeIncluded);
    return { platformFee, platformFeeRate: null, totalPlatformFee: platformFee };
  }
  const rate = parsePlatformFeeRate(tenant.platformFeeRate);
  const platformFee = percentOf(assertYen(amount, 'amount'), rate, 'floor');
  return { platformFee, platformFeeRate: formatRate(rate), totalPlatformFee: platformFee };
}

/** How a platform-mode charge splits its platform fee; null on a charge without a tenant. */
export interface PlatformSplit {
  /** The charge's `platform_fee` in yen, whether given or derived from the tenant rate. */
  readonly platformFee: number;
  readonly payjpFeeIncluded: boolean;
}

export interface CaptureInput {
  /** The captured amount in yen. */
  readonly amount: number;
  /** The charge's `fee_rate`, e.g. "3.25". */
  readonly feeRate: string;
  readonly platform: PlatformSplit | null;
}

/**
 * Who receives what of a capture. Invariant: ownerShare + platformShare + fee === amount.
 * `fee` and `platformFee` are the statement subjects of the same names (v1 §2.6).
 */
export interface CaptureBreakdown {
  readonly amount: number;
  /** The service fee, floor(amount × fee_rate / 100). */
  readonly fee: number;
  /** The charge's platform fee (what the tenant pays the platform); 0 outside platform mode. */
  readonly platformFee: number;
  /** Paid to the merchant, or in platform mode to the tenant. */
  readonly ownerShare: number;
  /** Paid to the platform operator: platformFee, less the fee when payjp_fee_included. */
  readonly platformShare: number;
}

/**
 * Splits a capture. With `payjp_fee_included` and a platform fee below the service fee (possible
 * only through a tenant rate below the fee rate; a given platform_fee is at least 5 %) the
 * platform's share is negative — the platform is billed the difference — rather than clamped,
 * because clamping would break the invariant that the parts add up to the amount.
 */
export function captureBreakdown(input: CaptureInput): CaptureBreakdown {
  const amount = assertYen(input.amount, 'amount');
  if (amount < 0) throw new RangeError(`amount must not be negative, got ${amount}`);
  const fee = serviceFee(amount, input.feeRate);
  const platformFee = input.platform === null ? 0 : assertPlatformFeeWithin(input.platform.platformFee, amount);
  const included = input.platform?.payjpFeeIncluded ?? false;
  const ownerShare = included ? amount - platformFee : amount - fee - platformFee;
  const platformShare = included ? platformFee - fee : platformFee;
  return checkConservation({ amount, fee, platformFee, ownerShare, platformShare }, amount, fee);
}

export interface RefundInput {
  /** The charge's captured amount, on which its fee and platform fee were computed. */
  readonly amount: number;
  /** This refund's amount, 1 ≤ refunded ≤ amount. */
  readonly refunded: number;
  readonly feeRate: string;
  readonly platform: PlatformSplit | null;
}

/**
 * Who bears what of a refund. Invariant: ownerShare + platformShare + refundFeeOffset === refunded,
 * i.e. the customer gets back exactly what is refunded.
 */
export interface RefundBreakdown {
  readonly refunded: number;
  /** The fee the service returns, floor(refunded × fee_rate / 100). */
  readonly refundFeeOffset: number;
  /** The platform fee returned to the tenant, floor(platform_fee × refunded / amount). */
  readonly refundPlatformFeeOffset: number;
  /** Borne by the merchant or tenant: refunded less the fee offsets it gets back. */
  readonly ownerShare: number;
  /** Borne by the platform operator: the platform fee offset, less the fee offset when included. */
  readonly platformShare: number;
}

/**
 * Splits a refund, mirroring captureBreakdown.
 *
 * `refund_platform_fee_offset` (Decision): the charge's platform fee in proportion to the refunded
 * part of the amount, floor(platform_fee × refunded / amount). It is proportional to the platform
 * fee actually charged rather than recomputed from a rate, because a charge with a given
 * `platform_fee` has no rate; it rounds down like the service's refund_fee_offset, so a full refund
 * returns the platform fee exactly, and partial refunds never return more than was charged in total
 * (a sum of floors is at most the floor of the sum). Each refund is computed on its own, without
 * the charge's refund history, so it is replayable from the refund alone; any yen lost to rounding
 * stay with the owner's side of the refund, which is what keeps the parts summing to `refunded`.
 */
export function refundBreakdown(input: RefundInput): RefundBreakdown {
  const amount = assertYen(input.amount, 'amount');
  const refunded = assertYen(input.refunded, 'refunded amount');
  if (refunded < 1 || refunded > amount) throw new RangeError(`refunded amount must be between 1 and ${amount}, got ${refunded}`);
  const refundFee = refundFeeOffset(refunded, input.feeRate);
  const platformFee = input.platform === null ? 0 : assertPlatformFeeWithin(input.platform.platformFee, amount);
  const refundPlatformFee = platformFee === 0 ? 0 : shareOf(platformFee, refunded, amount, 'floor');
  const included = input.platform?.payjpFeeIncluded ?? false;
  const ownerShare = included ? refunded - refundPlatformFee : refunded - refundFee - refundPlatformFee;
  const platformShare = included ? refundPlatformFee - refundFee : refundPlatformFee;
  const breakdown = { refunded, refundFeeOffset: refundFee, refundPlatformFeeOffset: refundPlatformFee, ownerShare, platformShare };
  if (ownerShare + platformShare + refundFee !== refunded) throw new Error(`refund breakdown does not add up: ${JSON.stringify(breakdown)}`);
  return breakdown;
}

/** A platform fee already on a charge is trusted to be in range; only its shape is checked here. */
function assertPlatformFeeWithin(platformFee: number, amount: number): number {
  assertYen(platformFee, 'platform_fee');
  if (platformFee < 0 || platformFee > amount) throw new RangeError(`platform_fee must be between 0 and ${amount}, got ${platformFee}`);
  return platformFee;
}

/** The invariant is structural, but checked so a future edit of the formulas cannot lose a yen. */
function checkConservation(breakdown: CaptureBreakdown, amount: number, fee: number): CaptureBreakdown {
  if (breakdown.ownerShare + breakdown.platformShare + fee !== amount) {
    throw new Error(`capture breakdown does not add up: ${JSON.stringify(breakdown)}`);
  }
  return breakdown;
}
