/**
 * The spec's limits table in one place: v1 §8 ("Limits"), the windows of service rules §2 and the
 * v2 §8 rows, with the decisions that fill what the spec does not show. Every feature and both
 * codecs read their bounds from here; a limit that changes changes in this file only.
 *
 * v1 §8, as quoted beside each constant:
 * | Charge amount | 50 to 9,999,999 yen |
 * | Refund amount | 1 to 9,999,999 yen |
 * | Capture amount | 50 to 9,999,999 yen, at most the held amount |
 * | Plan amount | 50 to 9,999,999 yen |
 * | Refund window | 180 days from the sale |
 * | `refund_reason` | up to 255 characters |
 * | Plan `trial_days` | 0 to 365 |
 * | Card `name` | 2 to 45 characters |
 * | Metadata | 20 keys; key up to 40 characters; string value up to 500 characters |
 * | Statement download URL | valid 1 hour |
 *
 * The rows that are a rule's own subject stay with that rule, each in one place: `expiry_days` and
 * the v2 hold periods in hold-periods.ts, `billing_day` and `trial_end` in billing-calendar.ts, the
 * list `limit` and `offset` in src/operations/pagination.ts. A day in ms is MS_PER_DAY (time.ts).
 */
import { MS_PER_DAY } from './time';

// ---------------------------------------------------------------------------------------------
// Amounts (integer yen)

/** v1 §8: the top of every amount row ("… to 9,999,999 yen"): charges, captures, refunds, plans. */
export const MAX_AMOUNT = 9_999_999;

/** v1 §8: "Charge amount 50 to 9,999,999 yen" and "Capture amount 50 to 9,999,999 yen". */
export const MIN_CHARGE_AMOUNT = 50;

/** v1 §8: "Refund amount 1 to 9,999,999 yen". */
export const MIN_REFUND_AMOUNT = 1;

/** v1 §4.5 and §8: "Plan amount 50 to 9,999,999 yen". */
export const MIN_PLAN_AMOUNT = 50;

/**
 * **Decision:** v2 amount bounds are not shown (v2 §8); a payment flow takes what a v1 charge takes
 * (50 to 9,999,999 yen), since both end on the same card network and in the same settlement. Its
 * refunds and partial captures take 1 to 9,999,999, like a v1 refund.
 */
export const MIN_PAYMENT_FLOW_AMOUNT = MIN_CHARGE_AMOUNT;

/**
 * **Decision:** a v2 price's `unit_amount` is 1 to MAX_AMOUNT yen (a subscription item may be
 * cheaper than a charge: its invoice adds items up). A tenant's `minimum_transfer_amount` is at most
 * MAX_AMOUNT too, the largest charge.
 */
export const MIN_PRICE_UNIT_AMOUNT = 1;

// ---------------------------------------------------------------------------------------------
// Windows

/** v1 §8: "Refund window 180 days from the sale"; service rules §2: "up to 180 days after the charge was created". */
export const REFUND_WINDOW_DAYS = 180;
export const REFUND_WINDOW_MS = REFUND_WINDOW_DAYS * MS_PER_DAY;

/**
 * Service rules §2: "a pending charge can be finished for 30 minutes after creation" (v1 §8 does
 * not show the window). **Decision:** the same 30 minutes bound every 3-D Secure procedure: a v1
 * charge's, a token's and a `three_d_secure_request`'s.
 */
export const THREE_D_SECURE_WINDOW_MS = 30 * 60 * 1000;

/** Service rules §3: "a session expires 24 hours after creation" (a checkout session). */
export const CHECKOUT_SESSION_LIFETIME_MS = MS_PER_DAY;

/** How long a stored response answers retries of its Idempotency-Key: 24 hours, the real service's figure. */
export const IDEMPOTENCY_TTL_MS = MS_PER_DAY;

/** v1 §8: "Plan trial_days 0 to 365". */
export const MAX_TRIAL_DAYS = 365;

/** v1 §8: "Statement download URL valid 1 hour"; v1 §4.7: "A URL expires 1 hour after issue". */
export const STATEMENT_URL_TTL_MS = 60 * 60 * 1000;

// ---------------------------------------------------------------------------------------------
// Lengths (characters: Unicode code points)

/** v1 §8: "`refund_reason` up to 255 characters". */
export const MAX_REFUND_REASON_LENGTH = 255;

/**
 * **Decision:** every other free text a merchant sets (descriptions, names, nicknames, e-mail
 * addresses, billing details, display names, ids given by reference) is at most 255 characters,
 * like `refund_reason` and like the real service.
 */
export const MAX_TEXT_LENGTH = 255;

/**
 * An e-mail address as far as it can be checked without sending mail: at most MAX_TEXT_LENGTH
 * characters, one @, a dot in the domain, no spaces.
 */
export const EMAIL_PATTERN = new RegExp(`^(?=.{3,${MAX_TEXT_LENGTH}}$)[^\\s@]+@[^\\s@]+\\.[^\\s@]+$`);
export const EMAIL_RULE = `an e-mail address of at most ${MAX_TEXT_LENGTH} characters`;

/** **Decision:** a price's `lookup_key` is at most 200 characters, a product's `unit_label` 12, a URL 2,048. */
export const MAX_LOOKUP_KEY_LENGTH = 200;
export const MAX_UNIT_LABEL_LENGTH = 12;
export const MAX_URL_LENGTH = 2048;

/** The real service's Idempotency-Key rule: up to 255 of `A-Z a-z 0-9 - _`. */
export const IDEMPOTENCY_KEY_PATTERN = new RegExp(`^[A-Za-z0-9_-]{1,${MAX_TEXT_LENGTH}}$`);

/** v1 §8: "Card name 2 to 45 characters"; half-width letters, digits, space, period and hyphen. */
export const CARD_NAME_LENGTH = { min: 2, max: 45 } as const;
export const CARD_NAME_PATTERN = new RegExp(`^[A-Za-z0-9 .-]{${CARD_NAME_LENGTH.min},${CARD_NAME_LENGTH.max}}$`);
/** The card name rule in words, for the refusal that names it. */
export const CARD_NAME_RULE = `${CARD_NAME_LENGTH.min} to ${CARD_NAME_LENGTH.max} half-width letters, digits, spaces, periods or hyphens`;

/** v1 §8 and v2 §8: the same numbers in both versions. Lengths count Unicode code points. */
export const METADATA_LIMITS = { maxKeys: 20, maxKeyLength: 40, maxValueLength: 500 } as const;
