/**
 * The rate-limit tables (v1 §8) as plain data, without the limiter: `kessai serve`'s options name
 * the profiles before the HTTP stack is loaded. The limiter is ./rate-limits.ts.
 */
export const RATE_LIMIT_ZONES = ['pk', 'payment', 'sk'] as const;
export type RateLimitZone = (typeof RATE_LIMIT_ZONES)[number];

/** Requests per window of each zone. */
export type ZoneLimits = Readonly<Record<RateLimitZone, number>>;
export interface RateLimitTable {
  readonly live: ZoneLimits;
  readonly test: ZoneLimits;
}
/** Some zones of some modes, laid over the defaults (or over the server's table, for an account). */
export type RateLimitOverrides = { readonly live?: Partial<ZoneLimits>; readonly test?: Partial<ZoneLimits> };

/** v1 §8's table. "Limit values may change without notice": every value can be configured. */
export const DEFAULT_RATE_LIMITS: RateLimitTable = {
  live: { pk: 10, payment: 14, sk: 30 },
  test: { pk: 2, payment: 2, sk: 2 },
};

/**
 * Named tables the server starts from (`kessai serve --rate-limits`, KESSAI_RATE_LIMIT_PROFILE), then
 * refined by KESSAI_RATE_LIMITS: `spec`, v1 §8's values (the default on PostgreSQL); `development`,
 * for a development server on the embedded database (its default), where a test suite runs the SDKs
 * as fast as they go and the `payjp` SDK's retries or `@payjp/payjpv2`'s missing ones would
 * otherwise turn the spec's 2 requests a second in test mode into failures. Still a limit: a
 * runaway loop is refused.
 */
export const RATE_LIMIT_PROFILES = {
  spec: DEFAULT_RATE_LIMITS,
  development: {
    live: { pk: 1_000, payment: 1_000, sk: 1_000 },
    test: { pk: 1_000, payment: 1_000, sk: 1_000 },
  },
} as const satisfies Record<string, RateLimitTable>;
export type RateLimitProfile = keyof typeof RATE_LIMIT_PROFILES;
export const RATE_LIMIT_PROFILE_NAMES = Object.keys(RATE_LIMIT_PROFILES) as RateLimitProfile[];
