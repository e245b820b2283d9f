/**
 * How long an authorization (a hold) lasts: the effective-dated rule table of service rules §2.1,
 * the v2 extended-authorization request (`payment_method_options[card][request_extended_authorization]`),
 * the v1 `expiry_days` parameter (v1 §4.2, §8), and the selection rule of scheduled reauthorization
 * (service rules §2). Pure: every instant is an argument.
 */
import { reject } from './errors';
import { MS_PER_DAY, jstDate, jstMidnight } from './time';

export const HOLD_METHODS = ['card', 'apple_pay', 'paypay'] as const;
/** The payment method that was authorized. */
export type HoldMethod = (typeof HOLD_METHODS)[number];

export const CARD_ISSUERS = ['domestic', 'overseas'] as const;
/** Where the card was issued. PayPay has no issuer; callers pass `domestic` and the table ignores it. */
export type CardIssuer = (typeof CARD_ISSUERS)[number];

/** One cell of the table: the hold period of one method × issuer in one era. */
export interface HoldPeriodCell {
  /** Days the hold lasts when no extension is asked for. */
  readonly defaultDays: number;
  /** Days the hold lasts when extended; null when this combination cannot be extended. */
  readonly extendedDays: number | null;
  /**
   * The largest v1 `expiry_days` the combination accepts; larger values are capped to it.
   * null for methods v1 cannot charge (PayPay is v2-only).
   */
  readonly v1MaxExpiryDays: number | null;
}

/** The v1 range of `expiry_days` (v1 §8). */
export const V1_EXPIRY_DAYS = { min: 1, max: 60, default: 7 } as const;

type EraCells = { readonly [M in HoldMethod]: { readonly [I in CardIssuer]: HoldPeriodCell } };

interface HoldRuleEra {
  /**
   * First JST calendar day the era applies to, or null for the rule that has always applied. The
   * era starts at 00:00 JST of that day because the business calendar is Japan time (service rules
   * preamble): a hold authorized at 2026-09-14 08:59 JST (still 2026-09-13 in UTC) is under the new rule.
   */
  readonly effectiveFrom: string | null;
  readonly cells: EraCells;
}

const domesticV1 = V1_EXPIRY_DAYS.max;

/**
 * Service rules §2.1, one era per column, in ascending order of `effectiveFrom`. The `EraCells`
 * type makes every era cover every method × issuer, so a missing cell is a compile error rather
 * than a silent fall-through. Adding a future rule change means appending an era here.
 */
export const HOLD_RULE_ERAS = [
  {
    effectiveFrom: null,
    cells: {
      // v1 accepted 1..60 for every card before the change, overseas included: the §2.1 cap is dated
      // "from 2026-09-14", so the old 30-day extension limit is not back-applied to v1.
      card: {
        domestic: { defaultDays: 7, extendedDays: 30, v1MaxExpiryDays: domesticV1 },
        overseas: { defaultDays: 7, extendedDays: 30, v1MaxExpiryDays: domesticV1 },
      },
      apple_pay: {
        domestic: { defaultDays: 7, extendedDays: 30, v1MaxExpiryDays: domesticV1 },
        overseas: { defaultDays: 7, extendedDays: 30, v1MaxExpiryDays: domesticV1 },
      },
      paypay: {
        domestic: { defaultDays: 30, extendedDays: null, v1MaxExpiryDays: null },
        overseas: { defaultDays: 30, extendedDays: null, v1MaxExpiryDays: null },
      },
    },
  },
  {
    effectiveFrom: '2026-09-14',
    cells: {
      // Service rules §2.1 Decision: overseas cards are capped at 5 days in v1 too; domestic keeps 1..60.
      card: {
        domestic: { defaultDays: 7, extendedDays: 25, v1MaxExpiryDays: domesticV1 },
        overseas: { defaultDays: 5, extendedDays: null, v1MaxExpiryDays: 5 },
      },
      apple_pay: {
        domestic: { defaultDays: 7, extendedDays: 25, v1MaxExpiryDays: domesticV1 },
        overseas: { defaultDays: 5, extendedDays: null, v1MaxExpiryDays: 5 },
      },
      paypay: {
        domestic: { defaultDays: 30, extendedDays: null, v1MaxExpiryDays: null },
        overseas: { defaultDays: 30, extendedDays: null, v1MaxExpiryDays: null },
      },
    },
  },
] as const satisfies readonly HoldRuleEra[];

/** The eras with their start instants, newest first, so lookup takes the first that has begun. */
const ERAS_NEWEST_FIRST: readonly { readonly startsAt: number; readonly era: HoldRuleEra }[] = [...HOLD_RULE_ERAS]
  .map((era: HoldRuleEra) => ({ startsAt: era.effectiveFrom === null ? -Infinity : jstMidnight(era.effectiveFrom).getTime(), era }))
  .sort((a, b) => b.startsAt - a.startsAt);

/** The rule that governs one hold, with the era it came from so it can be recorded on the hold. */
export interface HoldRule extends HoldPeriodCell {
  readonly method: HoldMethod;
  readonly issuer: CardIssuer;
  /** JST date the rule took effect (`YYYY-MM-DD`), or null for the original rule. */
  readonly effectiveFrom: string | null;
}

function assertInstant(instant: Date, what: string): number {
  const ms = instant instanceof Date ? instant.getTime() : Number.NaN;
  if (Number.isNaN(ms)) throw new RangeError(`${what} must be a valid Date`);
  return ms;
}

/**
 * The hold rule for a method and issuer at the instant of authorization. A hold keeps the rule of
 * the instant it was authorized, however long it lives (§2.1: "a hold authorized before a rule's
 * start date keeps the old rule"). For a 3-D Secure charge pass the `tds_finish` instant, since
 * that is when the hold is taken (service rules §2).
 */
export function holdRule(method: HoldMethod, issuer: CardIssuer, authorizedAt: Date): HoldRule {
  const at = assertInstant(authorizedAt, 'authorizedAt');
  const found = ERAS_NEWEST_FIRST.find((candidate) => candidate.startsAt <= at);
  // The oldest era starts at -Infinity, so there is always one; this guards edits of the table.
  if (found === undefined) throw new RangeError(`no hold rule covers ${authorizedAt.toISOString()}`);
  const cell = found.era.cells[method][issuer];
  return { method, issuer, effectiveFrom: found.era.effectiveFrom, ...cell };
}

export const EXTENDED_AUTHORIZATION_REQUESTS = ['must_extend', 'if_available'] as const;
/** v2 `payment_method_options[card][request_extended_authorization]`. */
export type ExtendedAuthorizationRequest = (typeof EXTENDED_AUTHORIZATION_REQUESTS)[number];

/** The parameter named by errors about the extension request. */
export const EXTENDED_AUTHORIZATION_PARAM = 'payment_method_options[card][request_extended_authorization]';

/**
 * Reads the request field from a parsed body: absent stays undefined, any other value than the two
 * known ones is refused rather than ignored, so a typo cannot silently cost the merchant an extension.
 */
export function parseExtendedAuthorizationRequest(value: unknown): ExtendedAuthorizationRequest | undefined {
  // `never` (the SDK's third value, official-sdks.md §2) asks for no extension: the default period.
  if (value === undefined || value === 'never') return undefined;
  if (typeof value === 'string' && (EXTENDED_AUTHORIZATION_REQUESTS as readonly string[]).includes(value)) {
    return value as ExtendedAuthorizationRequest;
  }
  return reject('no_allowed_param', EXTENDED_AUTHORIZATION_PARAM, `request_extended_authorization must be one of ${EXTENDED_AUTHORIZATION_REQUESTS.join(', ')}`);
}

export interface HoldExpiry {
  readonly expiresAt: Date;
  /** Whether the extended period was granted. */
  readonly extended: boolean;
  /** The length of the hold in days. */
  readonly days: number;
}

/**
 * When a v2 hold lapses. `must_extend` on a combination that cannot be extended fails
 * (service rules §2.1, v2 §4.2 and §7); `if_available` extends where the rule allows and otherwise
 * falls back to the default period; no request means the default period.
 *
 * The refusal is `extended_authorization_not_available` (400; the SDK's title "Extended
 * Authorization Not Available", official-sdks.md §3), naming the request parameter. The caller decides whether the card
 * options apply at all (e.g. when the customer picked PayPay); if it passes them, PayPay is treated
 * like any other non-extendable combination.
 */
export function v2HoldExpiresAt(
  method: HoldMethod,
  issuer: CardIssuer,
  authorizedAt: Date,
  request: ExtendedAuthorizationRequest | undefined,
): HoldExpiry {
  const rule = holdRule(method, issuer, authorizedAt);
  if (request === 'must_extend' && rule.extendedDays === null) {
    const subject = method === 'paypay' ? 'paypay' : `${method} with an ${issuer} issuer`;
    const era = rule.effectiveFrom === null ? '' : ` authorized from ${rule.effectiveFrom}`;
    return reject('extended_authorization_not_available', EXTENDED_AUTHORIZATION_PARAM, `must_extend is not available: the hold period of ${subject}${era} (${rule.defaultDays} days) cannot be extended`);
  }
  const extended = request !== undefined && rule.extendedDays !== null;
  const days = extended && rule.extendedDays !== null ? rule.extendedDays : rule.defaultDays;
  return { expiresAt: new Date(authorizedAt.getTime() + days * MS_PER_DAY), extended, days };
}

export interface V1HoldInput {
  /** Charge creation, the reauth request, or `tds_finish` for a 3-D Secure charge. */
  readonly authorizedAt: Date;
  /** The `expiry_days` parameter as parsed from the request; undefined means the default 7. */
  readonly expiryDays: number | undefined;
  readonly issuer: CardIssuer;
  /** v1 charges cards only; an Apple Pay token is a card too. Defaults to `card`. */
  readonly method?: Extract<HoldMethod, 'card' | 'apple_pay'>;
}

export interface V1HoldExpiry {
  readonly expiresAt: Date;
  /** The `expiry_days` the caller asked for (or the default). */
  readonly requestedDays: number;
  /** The days actually applied after the issuer cap. */
  readonly days: number;
  /** True when the issuer rule shortened the requested period. */
  readonly capped: boolean;
}

/**
 * `expired_at` of a v1 hold (v1 §4.2, service rules §2): N × 24 h after authorization, except that
 * N = 60 ends at 23:59:59 JST of the 59th JST calendar day after the authorization's JST date (the
 * last second of that day, not 60 × 24 h).
 *
 * An `expiry_days` above the issuer rule's limit (overseas cards from 2026-09-14: 5 days) is capped,
 * not refused: the spec says "capped", and merchants that always send the maximum keep working; the
 * shortened `expired_at` is visible in the response and `capped` lets the caller record it. Values
 * outside 1..60 or not integers are refused with `invalid_expiry_days` before any cap applies.
 */
export function v1HoldExpiresAt(input: V1HoldInput): V1HoldExpiry {
  const { authorizedAt, expiryDays, issuer, method = 'card' } = input;
  const requestedDays = expiryDays ?? V1_EXPIRY_DAYS.default;
  if (typeof requestedDays !== 'number' || !Number.isInteger(requestedDays) || requestedDays < V1_EXPIRY_DAYS.min || requestedDays > V1_EXPIRY_DAYS.max) {
    return reject('invalid_expiry_days', 'expiry_days', `expiry_days must be an integer from ${V1_EXPIRY_DAYS.min} to ${V1_EXPIRY_DAYS.max}, got ${String(expiryDays)}`);
  }
  const rule = holdRule(method, issuer, authorizedAt);
  // v1MaxExpiryDays is null only for PayPay, which the method type already excludes.
  const max = rule.v1MaxExpiryDays ?? V1_EXPIRY_DAYS.max;
  const days = Math.min(requestedDays, max);
  const expiresAt = days === V1_EXPIRY_DAYS.max ? endOfJstDayAfter(authorizedAt, days - 1) : new Date(authorizedAt.getTime() + days * MS_PER_DAY);
  return { expiresAt, requestedDays, days, capped: days < requestedDays };
}

/** 23:59:59 JST of the JST calendar day `days` after the JST date of `instant`. */
function endOfJstDayAfter(instant: Date, days: number): Date {
  // JST has no daylight saving, so whole days are exactly MS_PER_DAY apart.
  return new Date(jstMidnight(jstDate(instant)).getTime() + (days + 1) * MS_PER_DAY - 1000);
}

/**
 * Whether a hold has lapsed at `at`. Service rules §2: "after `expired_at` the hold is released",
 * so the hold is still good at the `expired_at` instant itself.
 */
export function holdLapsed(expiresAt: Date, at: Date): boolean {
  return assertInstant(at, 'at') > assertInstant(expiresAt, 'expiresAt');
}

/** How the card pays: debit and prepaid cards move money at authorization. */
export type CardFunding = 'credit' | 'debit' | 'prepaid' | 'unknown';

/**
 * Service rules §2.1: a debit or prepaid card moves the money at authorization, so giving back a
 * hold, or the rest of one after a partial capture, refunds the buyer.
 */
export function debitedAtAuthorization(funding: string | null): boolean {
  return funding === 'debit' || funding === 'prepaid';
}

export interface ReauthCandidate {
  /** `expired_at` of the current hold. */
  readonly expiresAt: Date;
  /** The logical instant of the job slot doing the selection (never the wall clock). */
  readonly at: Date;
  /** Holds lapsing within this many milliseconds of `at` are due. */
  readonly leadTimeMs: number;
  /** Scheduled reauthorizations already attempted for this charge, successful or not. */
  readonly attempts: number;
  /** The account's configured maximum number of attempts. */
  readonly maxAttempts: number;
  readonly funding: CardFunding;
}

/**
 * Service rules §2 Decision (scheduled reauth): a hold is due when it is still live and lapses
 * within the lead time, fewer than the allowed attempts were made, and the card is a credit card.
 * Debit cards never qualify (a second hold is a second debit); prepaid cards are debited at
 * authorization too, and a card of unknown funding might be either, so both are left alone as well.
 * Whether the account opted in and whether the charge is still uncaptured and unrefunded is for
 * the caller's query; this predicate only holds the timing and card rules.
 */
export function reauthDue(candidate: ReauthCandidate): boolean {
  const { expiresAt, at, leadTimeMs, attempts, maxAttempts, funding } = candidate;
  if (!Number.isFinite(leadTimeMs) || leadTimeMs < 0) throw new RangeError(`leadTimeMs must be a non-negative number, got ${leadTimeMs}`);
  if (!Number.isInteger(attempts) || attempts < 0) throw new RangeError(`attempts must be a non-negative integer, got ${attempts}`);
  if (!Number.isInteger(maxAttempts) || maxAttempts < 0) throw new RangeError(`maxAttempts must be a non-negative integer, got ${maxAttempts}`);
  if (funding !== 'credit') return false;
  if (attempts >= maxAttempts) return false;
  if (holdLapsed(expiresAt, at)) return false;
  return expiresAt.getTime() - at.getTime() <= leadTimeMs;
}
