/**
 * The simulated card network's test cards (service rules §2.2) and the checks of card data at token
 * creation (service rules §2, v1 §7, §8). The engine has no real card network: every outcome a card
 * can have — at token creation, at authorization, at 3-D Secure authentication — is written down
 * here as data, so a scenario that names a card number always plays out the same way.
 *
 * Pure apart from hashing: every instant is an argument, nothing reads the clock.
 */
import { createHash } from 'node:crypto';
import { reject, type ErrorCode } from '../domain/errors';
import type { CardFunding, CardIssuer } from '../domain/hold-periods';
import { CARD_NAME_PATTERN, CARD_NAME_RULE } from '../domain/limits';
import { JST_OFFSET_MS, MS_PER_DAY } from '../domain/time';

/** v1 card `brand` values, spelled as the service renders them. */
export const CARD_BRANDS = ['Visa', 'MasterCard', 'JCB', 'American Express', 'Diners Club', 'Discover'] as const;
export type CardBrand = (typeof CARD_BRANDS)[number];

/** Every test card has a known funding; `unknown` exists only for cards of a real network. */
export type TestCardFunding = Exclude<CardFunding, 'unknown'>;

/**
 * Why the engine asks for an authorization. The simulator needs to know because issuers treat a
 * payment the buyer is present for (`charge`, `hold`) differently from one the merchant starts on
 * its own schedule (`renewal` of a subscription, `reauth` of a hold): 3-D Secure is never asked
 * for the latter, and some test cards fail only one kind (renewal failures, failed reauths).
 */
export const AUTHORIZATION_KINDS = ['charge', 'hold', 'renewal', 'reauth'] as const;
export type AuthorizationKind = (typeof AUTHORIZATION_KINDS)[number];

/** Kinds the buyer is present for; only these can be asked to authenticate with 3-D Secure. */
export const CUSTOMER_PRESENT_KINDS = ['charge', 'hold'] as const satisfies readonly AuthorizationKind[];

/** Codes a test card can answer token creation with. */
export type TokenDeclineCode = Extract<ErrorCode, 'card_declined' | 'expired_card' | 'incorrect_card_data' | 'processing_error' | 'unacceptable_brand'>;

/** Codes a test card can answer an authorization with. */
export type AuthorizationDeclineCode = Extract<ErrorCode, 'card_declined' | 'expired_card' | 'incorrect_card_data' | 'processing_error'>;

/**
 * How the card behaves when it goes through 3-D Secure:
 * - `not_required`: the issuer authenticates without a challenge (`verified`) and never insists on it;
 * - `required`: customer-present authorizations without 3-D Secure are declined; authentication
 *   succeeds (`verified`);
 * - `attempted` / `failed` / `error`: authentication ends with that `three_d_secure_status` (v1 §3.1).
 * There is no separate `verified` behaviour: it would be indistinguishable from `not_required`.
 */
export const THREE_D_SECURE_BEHAVIOURS = ['not_required', 'required', 'attempted', 'failed', 'error'] as const;
export type ThreeDSecureBehaviour = (typeof THREE_D_SECURE_BEHAVIOURS)[number];

/** The `three_d_secure_status` an authentication ends with (v1 §3.1, less `unverified`, the pending state). */
export type ThreeDSecureResultStatus = 'verified' | 'attempted' | 'failed' | 'error';

/**
 * The v2 dispute reasons a simulated issuer gives (a subset of the SDK's `PaymentDisputeReason`:
 * the ones a buyer's chargeback carries).
 */
export const DISPUTE_REASONS = ['fraudulent', 'product_not_received', 'unrecognized', 'duplicate'] as const;
export type DisputeReason = (typeof DISPUTE_REASONS)[number];

/**
 * A card whose every captured charge is disputed: the issuer raises a chargeback `afterDays` whole
 * days (of 24 hours) after the capture, with `reason`. Each capture is its own card transaction,
 * so a flow captured in two parts is disputed twice, each part at its own instant.
 */
export interface DisputeBehaviour {
  readonly afterDays: number;
  readonly reason: DisputeReason;
}

/** An authorization refusal: which kinds of authorization it applies to and, optionally, from which amount. */
export interface DeclineRule {
  readonly code: AuthorizationDeclineCode;
  /** The kinds that are refused; every other kind is approved. */
  readonly kinds: readonly AuthorizationKind[];
  /** Refused only when the amount is strictly above this many yen. */
  readonly amountAbove?: number;
}

export interface TestCardSpec {
  readonly number: string;
  readonly brand: CardBrand;
  readonly last4: string;
  readonly funding: TestCardFunding;
  /** ISO 3166-1 alpha-2 country of the issuer (the card object's `country`). */
  readonly country: string;
  /** Drives the hold period (service rules §2.1). */
  readonly issuer: CardIssuer;
  /** What token creation answers: `ok`, or the error it fails with. */
  readonly tokenization: 'ok' | TokenDeclineCode;
  /** What authorization answers once a token exists. */
  readonly authorization: 'approve' | DeclineRule;
  readonly threeDSecure: ThreeDSecureBehaviour;
  /** `refused`: the issuer refuses every refund to the card (a refund ends `failed`, nothing moves). */
  readonly refund?: 'refused';
  /** Set on cards whose captured charges the issuer disputes (chargebacks); see DisputeBehaviour. */
  readonly dispute?: DisputeBehaviour;
  /** What the card is for, for people reading a scenario. */
  readonly purpose: string;
}

const EVERY_KIND = AUTHORIZATION_KINDS;

/** The shared fields of a card issued in Japan that works; entries override what makes them special. */
const domesticCredit = { funding: 'credit', country: 'JP', issuer: 'domestic', tokenization: 'ok', authorization: 'approve', threeDSecure: 'not_required' } as const;

/**
 * The table. Brand cards and the error cards use the numbers payment providers publish for testing
 * (they pass the Luhn check and are known to integrators); the cards for behaviours no public table
 * has (renewal-only and reauth-only failures, 3-D Secure outcomes) use numbers of the
 * `40000000000010x`/`40000000000030x` families with their Luhn check digit. A unit test checks
 * Luhn validity, `last4` and the uniqueness of every number.
 */
export const TEST_CARDS = {
  // A successful card of each brand (service rules §2.2).
  visa: { ...domesticCredit, number: '4242424242424242', brand: 'Visa', last4: '4242', purpose: 'succeeds everywhere' },
  mastercard: { ...domesticCredit, number: '5555555555554444', brand: 'MasterCard', last4: '4444', purpose: 'succeeds everywhere' },
  jcb: { ...domesticCredit, number: '3530111333300000', brand: 'JCB', last4: '0000', purpose: 'succeeds everywhere' },
  americanExpress: { ...domesticCredit, number: '378282246310005', brand: 'American Express', last4: '0005', purpose: 'succeeds everywhere (15 digits)' },
  dinersClub: { ...domesticCredit, number: '30569309025904', brand: 'Diners Club', last4: '5904', purpose: 'succeeds everywhere (14 digits)' },
  discover: { ...domesticCredit, number: '6011111111111117', brand: 'Discover', last4: '1117', purpose: 'succeeds everywhere' },

  // Issuer and funding variants: they succeed, but change hold periods and reauth eligibility.
  overseas: { ...domesticCredit, number: '4000000900000003', brand: 'Visa', last4: '0003', country: 'US', issuer: 'overseas', purpose: 'issued abroad: shorter holds from 2026-09-14 (service rules §2.1)' },
  debit: { ...domesticCredit, number: '4000056655665556', brand: 'Visa', last4: '5556', funding: 'debit', purpose: 'debited at authorization; never reauthorized by the job' },
  prepaid: { ...domesticCredit, number: '5105105105105100', brand: 'MasterCard', last4: '5100', funding: 'prepaid', purpose: 'debited at authorization like a debit card' },

  // Refused at token creation: no token, so no card, charge or subscription can be made from them.
  declined: { ...domesticCredit, number: '4000000000000002', brand: 'Visa', last4: '0002', tokenization: 'card_declined', purpose: 'declined by the issuer' },
  expired: { ...domesticCredit, number: '4000000000000069', brand: 'Visa', last4: '0069', tokenization: 'expired_card', purpose: 'the issuer says the card has expired' },
  incorrectData: { ...domesticCredit, number: '4000000000000127', brand: 'Visa', last4: '0127', tokenization: 'incorrect_card_data', purpose: 'the issuer rejects the entered card data' },
  processingError: { ...domesticCredit, number: '4000000000000119', brand: 'Visa', last4: '0119', tokenization: 'processing_error', purpose: 'the network fails at token creation' },
  unacceptableBrand: { ...domesticCredit, number: '36227206271667', brand: 'Diners Club', last4: '1667', tokenization: 'unacceptable_brand', purpose: 'a brand the account does not accept' },

  // Tokenized and stored without complaint, refused when money is asked for.
  declinesOnCharge: {
    ...domesticCredit,
    number: '4000000000080319',
    brand: 'Visa',
    last4: '0319',
    authorization: { code: 'card_declined', kinds: EVERY_KIND },
    purpose: 'attaches to a customer, then every authorization is declined',
  },
  expiresOnCharge: {
    ...domesticCredit,
    number: '4000000000004012',
    brand: 'Visa',
    last4: '4012',
    authorization: { code: 'expired_card', kinds: EVERY_KIND },
    purpose: 'attaches to a customer, then the issuer reports it expired at every authorization',
  },
  declinesAbove10000: {
    ...domesticCredit,
    number: '4000000000080202',
    brand: 'Visa',
    last4: '0202',
    authorization: { code: 'card_declined', kinds: EVERY_KIND, amountAbove: 10_000 },
    purpose: 'declined for amounts above 10,000 yen (a credit limit)',
  },
  incorrectDataOnCharge: {
    ...domesticCredit,
    number: '4000000000000077',
    brand: 'Visa',
    last4: '0077',
    authorization: { code: 'incorrect_card_data', kinds: EVERY_KIND },
    purpose: 'attaches to a customer, then every authorization reports wrong card data',
  },
  processingErrorOnCharge: {
    ...domesticCredit,
    number: '4000000000001018',
    brand: 'Visa',
    last4: '1018',
    authorization: { code: 'processing_error', kinds: EVERY_KIND },
    purpose: 'the network fails at every authorization (retry paths)',
  },
  declinesRenewals: {
    ...domesticCredit,
    number: '4000000000001026',
    brand: 'Visa',
    last4: '1026',
    authorization: { code: 'card_declined', kinds: ['renewal'] },
    purpose: 'the first payment of a subscription succeeds, every renewal is declined',
  },
  reauthFails: {
    ...domesticCredit,
    number: '4000000000001034',
    brand: 'Visa',
    last4: '1034',
    authorization: { code: 'card_declined', kinds: ['reauth'] },
    purpose: 'holds succeed, every reauthorization is declined (the original hold lapses)',
  },

  // Refunds refused by the issuer (v2 §6.1 `refund.failed`); the number payment providers publish
  // for a refund that fails.
  refundFails: {
    ...domesticCredit,
    number: '4000000000005126',
    brand: 'Visa',
    last4: '5126',
    refund: 'refused',
    purpose: 'payments succeed; every refund of a v2 payment flow is refused by the issuer and ends failed (refund.failed)',
  },

  // 3-D Secure outcomes (v1 §3.1, §4.3).
  threeDSecureRequired: { ...domesticCredit, number: '4000000000003014', brand: 'Visa', last4: '3014', threeDSecure: 'required', purpose: 'declined unless the buyer authenticates; authentication succeeds' },
  threeDSecureAttempted: { ...domesticCredit, number: '4000000000003022', brand: 'Visa', last4: '3022', threeDSecure: 'attempted', purpose: 'authentication ends `attempted`' },
  threeDSecureFailed: { ...domesticCredit, number: '4000000000003030', brand: 'Visa', last4: '3030', threeDSecure: 'failed', purpose: 'authentication ends `failed`' },
  threeDSecureError: { ...domesticCredit, number: '4000000000003048', brand: 'Visa', last4: '3048', threeDSecure: 'error', purpose: 'authentication ends `error`' },

  // Chargebacks: authorization and capture succeed, then the issuer disputes every captured charge
  // a set number of days later (the `disputes.open` job opens the dispute; the term close books it).
  // The numbers are the ones payment providers publish for their dispute test cards.
  disputedFraudulent: {
    ...domesticCredit,
    number: '4000000000000259',
    brand: 'Visa',
    last4: '0259',
    dispute: { afterDays: 3, reason: 'fraudulent' },
    purpose: 'every captured charge is disputed as fraudulent 3 days after its capture',
  },
  disputedNotReceived: {
    ...domesticCredit,
    number: '4000000000002685',
    brand: 'Visa',
    last4: '2685',
    dispute: { afterDays: 30, reason: 'product_not_received' },
    purpose: 'every captured charge is disputed (product not received) 30 days after its capture',
  },
} as const satisfies Record<string, TestCardSpec>;

export type TestCardName = keyof typeof TEST_CARDS;

/** A table entry with its name and fingerprint. */
export interface TestCard extends TestCardSpec {
  readonly name: TestCardName;
  /** The card object's `fingerprint`: the same for every token of the same number. */
  readonly fingerprint: string;
}

/** Luhn (mod 10) check of a string of digits. */
export function luhnValid(number: string): boolean {
  if (!/^\d+$/.test(number)) return false;
  let sum = 0;
  let double = false;
  for (let i = number.length - 1; i >= 0; i -= 1) {
    let digit = number.charCodeAt(i) - 48;
    if (double) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
    double = !double;
  }
  return sum % 10 === 0;
}

/**
 * The card `fingerprint`: the first 32 hex characters of SHA-256 of the number. It depends on the
 * number only (not the expiry or the account), so the same card registered twice is recognisable,
 * and it is what authorization requests carry instead of the number (see card-network.ts). It is
 * not a secret-keeping hash — fine for test cards, whose numbers are public; a real network adapter
 * would take the fingerprint its network issues.
 */
export function cardFingerprint(number: string): string {
  return createHash('sha256').update(number, 'utf8').digest('hex').slice(0, 32);
}

/** Every test card, in table order, with its fingerprint computed once at load. */
export const TEST_CARD_LIST: readonly TestCard[] = (Object.keys(TEST_CARDS) as TestCardName[]).map((name) => {
  const spec: TestCardSpec = TEST_CARDS[name];
  return { ...spec, name, fingerprint: cardFingerprint(spec.number) };
});

const BY_NUMBER: ReadonlyMap<string, TestCard> = new Map(TEST_CARD_LIST.map((card) => [card.number, card]));
const BY_FINGERPRINT: ReadonlyMap<string, TestCard> = new Map(TEST_CARD_LIST.map((card) => [card.fingerprint, card]));

export function findTestCard(number: string): TestCard | undefined {
  return BY_NUMBER.get(number);
}

export function findTestCardByFingerprint(fingerprint: string): TestCard | undefined {
  return BY_FINGERPRINT.get(fingerprint);
}

/** The test cards whose captures are disputed, with their fingerprints. */
export const DISPUTED_TEST_CARDS: readonly TestCard[] = TEST_CARD_LIST.filter((card) => card.dispute !== undefined);

/**
 * When and why the issuer disputes a charge captured at `capturedAt` with the card of this
 * fingerprint; undefined for a card whose charges are never disputed (every other card).
 */
export function disputeOfCapture(fingerprint: string | null, capturedAt: Date): { readonly at: Date; readonly reason: DisputeReason } | undefined {
  if (fingerprint === null) return undefined;
  const dispute = BY_FINGERPRINT.get(fingerprint)?.dispute;
  if (dispute === undefined) return undefined;
  return { at: new Date(capturedAt.getTime() + dispute.afterDays * MS_PER_DAY), reason: dispute.reason };
}

/** The status 3-D Secure authentication of this card ends with. */
export function threeDSecureOutcome(card: Pick<TestCardSpec, 'threeDSecure'>): ThreeDSecureResultStatus {
  switch (card.threeDSecure) {
    case 'not_required':
    case 'required':
      return 'verified';
    default:
      return card.threeDSecure;
  }
}

/**
 * The first instant the card is no longer valid: 00:00 JST on the first day of the month after its
 * expiry month. A card is good through the whole of its expiry month, and the month is read on the
 * business calendar (Japan time) like every other date of the service.
 */
export function cardExpiresAt(expMonth: number, expYear: number): Date {
  return new Date(cardExpiresAtMs(expMonth, expYear));
}

/** `cardExpiresAt` in epoch milliseconds, without a Date allocation (bulk authorization calls it per row). */
export function cardExpiresAtMs(expMonth: number, expYear: number): number {
  // Date.UTC rolls month 12 (zero-based 13th month) over into January of the next year.
  return Date.UTC(expYear, expMonth, 1) - JST_OFFSET_MS;
}

export function cardExpired(expMonth: number, expYear: number, at: Date): boolean {
  return at.getTime() >= cardExpiresAtMs(expMonth, expYear);
}

// ---------------------------------------------------------------------------------------------
// Card data at token creation
// ---------------------------------------------------------------------------------------------

/** The form parameters of token creation (service rules §2). */
export const CARD_PARAMS = {
  number: 'card[number]',
  expMonth: 'card[exp_month]',
  expYear: 'card[exp_year]',
  cvc: 'card[cvc]',
  name: 'card[name]',
} as const;

/** Card numbers are 12 to 19 digits (ISO/IEC 7812 primary account numbers). */
export const CARD_NUMBER_PATTERN = /^\d{12,19}$/;
export const CVC_PATTERN = /^\d{3,4}$/;
/**
 * How far ahead an expiry year may lie. Not in the spec: cards are issued for at most about ten
 * years, so anything beyond twenty is a typo rather than a card.
 */
export const MAX_EXPIRY_YEARS_AHEAD = 20;

/** The raw parameters as they come from a request body (strings) or a scenario (numbers). */
export interface CardDataInput {
  readonly number?: unknown;
  readonly exp_month?: unknown;
  readonly exp_year?: unknown;
  readonly cvc?: unknown;
  readonly name?: unknown;
}

/** Card data that passed the format checks, normalised. */
export interface CardData {
  readonly number: string;
  readonly expMonth: number;
  /** Always four digits (`27` is read as 2027). */
  readonly expYear: number;
  readonly cvc: string | null;
  readonly name: string | null;
}

/** An integer from a number or a string of 1..maxDigits digits; undefined if neither. */
function integerOf(value: unknown, maxDigits: number): { value: number; digits: number | null } | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? { value, digits: null } : undefined;
  if (typeof value === 'string' && value.length >= 1 && value.length <= maxDigits && /^\d+$/.test(value)) {
    return { value: Number(value), digits: value.length };
  }
  return undefined;
}

function readExpiryYear(value: unknown): number | undefined {
  const parsed = integerOf(value, 4);
  if (parsed === undefined) return undefined;
  // Two-digit years are read in this century; three-digit and 1..999 years are nobody's expiry.
  if (parsed.digits === 2 || (parsed.digits === null && parsed.value >= 0 && parsed.value <= 99)) return 2000 + parsed.value;
  if ((parsed.digits === 4 || parsed.digits === null) && parsed.value >= 1000 && parsed.value <= 9999) return parsed.value;
  return undefined;
}

/**
 * Checks the format of card data at token creation, before the number is looked up, so the caller
 * hears about every typo of its own before any card refusal. Errors, in the order checked:
 * - no number, month or year: `missing_param`;
 * - number not 12..19 digits or failing the Luhn check: `invalid_number` (400 `card_error`,
 *   `card[number]`). v1 §7 marks the code deprecated, but its one shown example of a bad number is
 *   "400 `card_error` with `param` like `card[number]`", and `invalid_number` is the only catalogue
 *   code with that status and type for a number; the API documents win over the service rules.
 * - month not 1..12: `invalid_expiry_month`; year not 2 or 4 digits, in the past or more than
 *   MAX_EXPIRY_YEARS_AHEAD ahead: `invalid_expiry_year`; a month already over in the current year:
 *   `invalid_expiry_month`. A past expiry here is a typo in a form, so it is a 400 on the field;
 *   `expired_card` is what the catalogue names for a stored card found expired at charge time.
 * - cvc given but not 3 or 4 digits: `invalid_cvc`;
 * - name given but not 2..45 half-width letters, digits, spaces, periods or hyphens:
 *   `invalid_card_name`. null or absent means no name; an empty string is a name that is too short.
 */
export function validateCardData(input: CardDataInput, now: Date): CardData {
  const { number, exp_month: expMonthRaw, exp_year: expYearRaw, cvc: cvcRaw, name: nameRaw } = input;
  if (number === undefined || number === null) return reject('missing_param', CARD_PARAMS.number);
  if (expMonthRaw === undefined || expMonthRaw === null) return reject('missing_param', CARD_PARAMS.expMonth);
  if (expYearRaw === undefined || expYearRaw === null) return reject('missing_param', CARD_PARAMS.expYear);

  // Only strings: a JavaScript number cannot hold a 16-digit number exactly.
  if (typeof number !== 'string' || !CARD_NUMBER_PATTERN.test(number) || !luhnValid(number)) {
    return reject('invalid_number', CARD_PARAMS.number, 'card number must be 12 to 19 digits and pass the Luhn check');
  }

  const month = integerOf(expMonthRaw, 2);
  if (month === undefined || month.value < 1 || month.value > 12) {
    return reject('invalid_expiry_month', CARD_PARAMS.expMonth, `exp_month must be an integer from 1 to 12, got ${String(expMonthRaw)}`);
  }
  const expYear = readExpiryYear(expYearRaw);
  if (expYear === undefined) {
    return reject('invalid_expiry_year', CARD_PARAMS.expYear, `exp_year must be a 2- or 4-digit year, got ${String(expYearRaw)}`);
  }
  // The current month on the business calendar (Japan time).
  const today = new Date(now.getTime() + JST_OFFSET_MS);
  const currentYear = today.getUTCFullYear();
  const currentMonth = today.getUTCMonth() + 1;
  if (expYear < currentYear || expYear > currentYear + MAX_EXPIRY_YEARS_AHEAD) {
    return reject('invalid_expiry_year', CARD_PARAMS.expYear, `exp_year must be from ${currentYear} to ${currentYear + MAX_EXPIRY_YEARS_AHEAD}, got ${expYear}`);
  }
  if (expYear === currentYear && month.value < currentMonth) {
    return reject('invalid_expiry_month', CARD_PARAMS.expMonth, `the card expired at the end of ${expYear}-${String(month.value).padStart(2, '0')}`);
  }

  let cvc: string | null = null;
  if (cvcRaw !== undefined && cvcRaw !== null) {
    const text = typeof cvcRaw === 'number' && Number.isSafeInteger(cvcRaw) ? String(cvcRaw) : cvcRaw;
    if (typeof text !== 'string' || !CVC_PATTERN.test(text)) return reject('invalid_cvc', CARD_PARAMS.cvc, 'cvc must be 3 or 4 digits');
    cvc = text;
  }

  let name: string | null = null;
  if (nameRaw !== undefined && nameRaw !== null) {
    if (typeof nameRaw !== 'string' || !CARD_NAME_PATTERN.test(nameRaw)) {
      return reject('invalid_card_name', CARD_PARAMS.name, `name must be ${CARD_NAME_RULE}`);
    }
    name = nameRaw;
  }

  return { number, expMonth: month.value, expYear, cvc, name };
}

/** What token creation learns about a card: the fields of the card object (v1 §2.3) it fills. */
export interface TokenizedCard {
  readonly testCard: TestCardName;
  readonly brand: CardBrand;
  readonly last4: string;
  readonly expMonth: number;
  readonly expYear: number;
  readonly fingerprint: string;
  readonly name: string | null;
  readonly country: string;
  readonly funding: TestCardFunding;
  readonly issuer: CardIssuer;
  /** `passed` when a CVC was given (the simulator accepts any well-formed one), else `unchecked`. */
  readonly cvcCheck: 'passed' | 'unchecked';
}

export interface TokenizeOptions {
  readonly livemode: boolean;
  /** The instant of the request, for the expiry checks. */
  readonly now: Date;
}

/**
 * Token creation against the simulated network: the format checks of `validateCardData`, then the
 * table. Outcomes after the format checks:
 * - a well-formed number not in the table: `invalid_card` (402, `card[number]`). Service rules
 *   §2.2 offers `invalid_card` or `incorrect_card_data`; the number is well-formed and passes Luhn,
 *   so nothing the buyer typed is shown to be wrong — the network simply does not know the card.
 *   `incorrect_card_data` stays the issuer's answer for data it finds wrong (the `incorrectData`
 *   cards), so a scenario can tell the two apart. Malformed numbers never get here (`invalid_number`).
 * - a table number in live mode: `test_card_on_livemode` (`card[number]`). An unknown number in live
 *   mode is `invalid_card` too: the simulator has no live network to ask.
 * - a table card whose `tokenization` is an error: that error, without a param (an issuer's
 *   refusal is about the card, not one field).
 */
export function tokenizeTestCard(input: CardDataInput, options: TokenizeOptions): TokenizedCard {
  const data = validateCardData(input, options.now);
  const card = findTestCard(data.number);
  if (card === undefined) return reject('invalid_card', CARD_PARAMS.number, 'the card number is not a test card of the simulated network');
  if (options.livemode) return reject('test_card_on_livemode', CARD_PARAMS.number);
  if (card.tokenization !== 'ok') return reject(card.tokenization);
  return {
    testCard: card.name,
    brand: card.brand,
    last4: card.last4,
    expMonth: data.expMonth,
    expYear: data.expYear,
    fingerprint: card.fingerprint,
    name: data.name,
    country: card.country,
    funding: card.funding,
    issuer: card.issuer,
    cvcCheck: data.cvc === null ? 'unchecked' : 'passed',
  };
}
