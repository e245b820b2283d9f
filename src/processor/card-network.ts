/**
 * The card network port and its deterministic simulator. Every charge, hold, renewal and reauth of
 * the engine asks the network through this one port; the simulator answers from the test-card
 * table (test-cards.ts), so the worker, the simulation CLI and the tests see the same outcomes.
 *
 * The port is bulk — arrays in, arrays out, in the same order — because the renewal job authorizes
 * thousands of subscriptions per batch, and a round trip per card would dominate its run time.
 */
import { ERROR_CATALOGUE, type ErrorCode } from '../domain/errors';
import { JST_OFFSET_MS } from '../domain/time';
import { CUSTOMER_PRESENT_KINDS, TEST_CARD_LIST, findTestCardByFingerprint, threeDSecureOutcome, type AuthorizationKind, type ThreeDSecureResultStatus } from './test-cards';

export { AUTHORIZATION_KINDS, CUSTOMER_PRESENT_KINDS, type AuthorizationKind, type ThreeDSecureResultStatus } from './test-cards';

/**
 * One request for an authorization.
 *
 * The card is named by its `fingerprint` (plus the stored expiry), not its number: the engine stores
 * cards by id with the card object's fields (v1 §2.3), and the fingerprint is one of them, so the
 * engine never has to keep a card number to talk to the network. The simulator maps fingerprints of
 * the test-card table back to their entries; a real network adapter would send its own card token.
 */
export interface AuthorizationRequest {
  /** The engine's id for the attempt (the charge id, or the reauth id): echoed in the result. */
  readonly reference: string;
  readonly fingerprint: string;
  /** The stored expiry: a card past it is refused with `expired_card`. */
  readonly expMonth: number;
  readonly expYear: number;
  /** Integer yen. */
  readonly amount: number;
  readonly currency: 'jpy';
  readonly livemode: boolean;
  /** The logical instant of the authorization (charge creation, `tds_finish`, the job's slot). */
  readonly at: Date;
  readonly kind: AuthorizationKind;
  /**
   * The 3-D Secure status the buyer reached before this authorization, when the charge went through
   * 3-D Secure; absent otherwise. Cards that require 3-D Secure refuse customer-present
   * authorizations without it.
   */
  readonly threeDSecure?: Extract<ThreeDSecureResultStatus, 'verified' | 'attempted'>;
}

export interface AuthorizationApproval {
  readonly reference: string;
  readonly approved: true;
  /** The issuer's approval code: six digits, the same for the same request. */
  readonly authorizationCode: string;
}

export interface AuthorizationRefusal {
  readonly reference: string;
  readonly approved: false;
  /** Becomes the charge's `failure_code`. */
  readonly code: ErrorCode;
  /** Becomes the charge's `failure_message`. */
  readonly message: string;
  /** True when the same request may succeed later (a network fault, not the card's answer). */
  readonly retryable: boolean;
}

export type AuthorizationResult = AuthorizationApproval | AuthorizationRefusal;

/** One 3-D Secure authentication of a buyer with a card (v1 §4.3 step 2). */
export interface AuthenticationRequest {
  /** The charge (or payment flow) id: echoed in the result. */
  readonly reference: string;
  readonly fingerprint: string;
  readonly livemode: boolean;
  readonly at: Date;
}

export interface AuthenticationResult {
  readonly reference: string;
  /** The charge's `three_d_secure_status` after the buyer's authentication. */
  readonly status: ThreeDSecureResultStatus;
}

/** Capture or release of an approved authorization. */
export interface SettlementRequest {
  /** The reference the authorization was approved under. */
  readonly reference: string;
  readonly authorizationCode: string;
  /** Captured amount, or the amount released. */
  readonly amount: number;
  readonly at: Date;
}

/** A refund of captured money back to the card it was paid with. */
export interface RefundRequest {
  /** The refund's own id: the network's idempotency key, so a refund asked again is refunded once. */
  readonly reference: string;
  /** The authorization the refunded payment was approved under. */
  readonly authorizationCode: string;
  /** The card (as in AuthorizationRequest): the issuer decides whether it takes the money back. */
  readonly fingerprint: string;
  readonly amount: number;
  readonly at: Date;
}

export type SettlementResult =
  | { readonly reference: string; readonly ok: true }
  | { readonly reference: string; readonly ok: false; readonly code: ErrorCode; readonly message: string; readonly retryable: boolean };

/**
 * The card network. Every method takes a batch and answers one result per request, in request
 * order, without throwing for a refused card: a refusal is a result (a batch of renewals must not
 * stop at its first declined card). It throws only for requests no caller should build (an
 * invalid instant or kind), which are bugs in the engine.
 */
export interface CardNetwork {
  authorize(requests: readonly AuthorizationRequest[]): Promise<AuthorizationResult[]>;
  authenticate(requests: readonly AuthenticationRequest[]): Promise<AuthenticationResult[]>;
  /** Moves the money of a hold (or part of it); for debit cards it refunds the rest. */
  capture(requests: readonly SettlementRequest[]): Promise<SettlementResult[]>;
  /** Gives a hold back (refund of an uncaptured charge, lapse); for debit cards it refunds the debit. */
  release(requests: readonly SettlementRequest[]): Promise<SettlementResult[]>;
  /**
   * Sends captured money back to the card (a v2 refund). A refusal is a result: the issuer may
   * refuse to take money back to a card (the `refundFails` test card), and then nothing moved.
   */
  refund(requests: readonly RefundRequest[]): Promise<SettlementResult[]>;
}

export interface SimulatedCardNetworkOptions {
  /** Seeds the optional random network faults and the approval codes. Default 0. */
  readonly seed?: number;
  /**
   * Share (0..1) of otherwise approved authorizations that fail with `processing_error`, to
   * rehearse retries in a simulation. Default 0: outcomes then come from the table alone.
   */
  readonly processingErrorRate?: number;
  /**
   * Share (0..1) of otherwise approved authorizations the issuer declines with `card_declined`, for
   * a forecast's assumed decline rate. Drawn from the seed like the faults, independently
   * of them. Default 0.
   */
  readonly declineRate?: number;
}

/** Mixed into the hash so a renewal and a reauth under one reference draw independently. */
const KIND_INDEX: Readonly<Record<AuthorizationKind, number>> = { charge: 1, hold: 2, renewal: 3, reauth: 4 };

/**
 * A 32-bit hash of one request and the seed (FNV-1a over the reference, then the kind, instant and
 * seed, finished by MurmurHash3's fmix32). Randomness is a pure function of the request rather than a
 * draw from a seeded stream: a stream would make a request's outcome depend on which requests came
 * before it in which batch, so a job re-run with another batch size, or a slot repeated after a
 * crash, would see other outcomes. Hashing keeps "same request, same answer".
 */
function requestHash(reference: string, kind: number, atMs: number, seed: number): number {
  let h = 0x811c9dc5 ^ seed;
  for (let i = 0; i < reference.length; i += 1) {
    h = Math.imul(h ^ reference.charCodeAt(i), 0x01000193);
  }
  h = Math.imul(h ^ kind, 0x01000193);
  h = Math.imul(h ^ (atMs % 0x100000000), 0x01000193);
  h = Math.imul(h ^ Math.floor(atMs / 0x100000000), 0x01000193);
  return fmix32(h);
}

function fmix32(input: number): number {
  let h = input;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * `000`..`999`, so a six-digit code is one concatenation of two shared strings instead of a number
 * formatting and padding per approval: at a million approvals a batch, string garbage is most of the cost.
 */
const THREE_DIGITS: readonly string[] = Array.from({ length: 1000 }, (_, n) => String(n).padStart(3, '0'));

function refusal(reference: string, code: ErrorCode, message: string = ERROR_CATALOGUE[code].message): AuthorizationRefusal {
  // Only a fault of the network itself may go away on a retry; an issuer's answer stands.
  return { reference, approved: false, code, message, retryable: code === 'processing_error' };
}

function assertInstant(at: Date, reference: string): number {
  const ms = at instanceof Date ? at.getTime() : Number.NaN;
  if (Number.isNaN(ms)) throw new RangeError(`request ${reference}: at must be a valid Date`);
  return ms;
}

/**
 * A table entry flattened to one object shape for the hot loop: the entries themselves differ in
 * shape (a decline rule or `approve`, with or without an amount), which would make every property
 * read in `decide` polymorphic.
 */
interface CardProfile {
  readonly tokenRefusal: ErrorCode | null;
  readonly requiresThreeDSecure: boolean;
  /** Bit i set: kinds of KIND_INDEX i are refused with `declineCode`. */
  readonly declineMask: number;
  readonly declineCode: ErrorCode;
  /** Refused only above this amount; -1 when every amount is refused. */
  readonly declineAbove: number;
}

const PROFILES: ReadonlyMap<string, CardProfile> = new Map(
  TEST_CARD_LIST.map((card): [string, CardProfile] => {
    const rule = card.authorization;
    const declineMask = rule === 'approve' ? 0 : rule.kinds.reduce((mask, kind) => mask | (1 << KIND_INDEX[kind]), 0);
    return [
      card.fingerprint,
      {
        tokenRefusal: card.tokenization === 'ok' ? null : card.tokenization,
        requiresThreeDSecure: card.threeDSecure === 'required',
        declineMask,
        declineCode: rule === 'approve' ? 'card_declined' : rule.code,
        declineAbove: rule === 'approve' ? -1 : (rule.amountAbove ?? -1),
      },
    ];
  }),
);

const CUSTOMER_PRESENT_MASK = CUSTOMER_PRESENT_KINDS.reduce((mask, kind) => mask | (1 << KIND_INDEX[kind]), 0);

/** Months since year 0 of the JST calendar month an instant falls in. */
function jstMonthIndex(ms: number): number {
  const jst = new Date(ms + JST_OFFSET_MS);
  return jst.getUTCFullYear() * 12 + jst.getUTCMonth();
}

/**
 * Decides one batch. The outcome of each request, checked in this order (first match wins):
 * 1. currency other than `jpy` → `invalid_currency`; amount not a positive safe integer → `invalid_amount`
 *    (the engine validates first; these keep a bad row from being approved);
 * 2. fingerprint not of a test card → `invalid_card` (the simulator knows no other card);
 * 3. live mode → `test_card_on_livemode`;
 * 4. a card whose token creation fails → the same error (no other path should have produced it);
 * 5. stored expiry month over at `at` (JST) → `expired_card`;
 * 6. 3-D Secure required, customer-present kind, no 3-D Secure status → `card_declined`; renewals and
 *    reauths are started by the merchant without the buyer, which issuers exempt from 3-D Secure;
 * 7. the table's decline rule, when it covers the kind and the amount;
 * 8. the seeded network fault rate → `processing_error`;
 * 9. approved.
 */
function decideBatch(requests: readonly AuthorizationRequest[], seed: number, faultThreshold: number, declineThreshold: number): AuthorizationResult[] {
  const results = new Array<AuthorizationResult>(requests.length);
  // A batch usually shares one instant (the job's slot): convert it once, not per row.
  let lastAt: Date | undefined;
  let atMs = 0;
  let atMonth = 0;
  for (let i = 0; i < requests.length; i += 1) {
    const request = requests[i]!;
    const { reference } = request;
    if (request.at !== lastAt) {
      atMs = assertInstant(request.at, reference);
      atMonth = jstMonthIndex(atMs);
      lastAt = request.at;
    }
    const kind: unknown = KIND_INDEX[request.kind];
    // typeof, not `=== undefined`: a kind such as "toString" would find Object.prototype's method.
    if (typeof kind !== 'number') throw new RangeError(`request ${reference}: unknown kind ${String(request.kind)}`);
    results[i] = decide(request, kind, atMs, atMonth, seed, faultThreshold, declineThreshold);
  }
  return results;
}

function decide(request: AuthorizationRequest, kind: number, atMs: number, atMonth: number, seed: number, faultThreshold: number, declineThreshold: number): AuthorizationResult {
  const { reference, amount } = request;
  if (request.currency !== 'jpy') return refusal(reference, 'invalid_currency');
  if (!Number.isSafeInteger(amount) || amount <= 0) return refusal(reference, 'invalid_amount');

  const card = PROFILES.get(request.fingerprint);
  if (card === undefined) return refusal(reference, 'invalid_card');
  if (request.livemode) return refusal(reference, 'test_card_on_livemode');
  if (card.tokenRefusal !== null) return refusal(reference, card.tokenRefusal);
  // The card is good through its whole expiry month (cardExpiresAt); months compare without a Date.
  if (atMonth > request.expYear * 12 + (request.expMonth - 1)) return refusal(reference, 'expired_card');
  const bit = 1 << kind;
  if (card.requiresThreeDSecure && request.threeDSecure === undefined && (bit & CUSTOMER_PRESENT_MASK) !== 0) {
    return refusal(reference, 'card_declined', '3-D Secure authentication is required by the issuer');
  }
  if ((card.declineMask & bit) !== 0 && amount > card.declineAbove) return refusal(reference, card.declineCode);

  const hash = requestHash(reference, kind, atMs, seed);
  if (hash < faultThreshold) return refusal(reference, 'processing_error');
  // A second mix of the same hash: the assumed declines are independent of the faults.
  if (declineThreshold > 0 && fmix32(hash ^ 0x27d4eb2f) < declineThreshold) return refusal(reference, 'card_declined');
  // The approval code is a further mix of the hash, so codes stay uniform among approved requests.
  const code = fmix32(hash ^ 0x9e3779b9) % 1_000_000;
  return { reference, approved: true, authorizationCode: THREE_DIGITS[Math.floor(code / 1000)]! + THREE_DIGITS[code % 1000]! };
}

/**
 * The simulated card network. Outcomes depend only on the requests, the test-card table and the
 * seed: the same inputs give the same results whatever the batch sizes or the order of batches.
 * Each batch is decided synchronously inside one promise, with no per-request await, so a million
 * authorizations cost one pass over an array.
 */
export function simulatedCardNetwork(options: SimulatedCardNetworkOptions = {}): CardNetwork {
  const seed = options.seed ?? 0;
  const rate = options.processingErrorRate ?? 0;
  if (!Number.isSafeInteger(seed)) throw new RangeError(`seed must be an integer, got ${seed}`);
  if (!(rate >= 0 && rate <= 1)) throw new RangeError(`processingErrorRate must be from 0 to 1, got ${rate}`);
  // Fold a seed beyond 32 bits into the hash's 32-bit state rather than dropping its high half.
  const seed32 = (seed >>> 0) ^ Math.floor(seed / 0x100000000);
  // A hash below the threshold is a fault: with rate 1 every hash (< 2^32) qualifies, with 0 none.
  const faultThreshold = rate * 0x100000000;
  const declineRate = options.declineRate ?? 0;
  if (!(declineRate >= 0 && declineRate <= 1)) throw new RangeError(`declineRate must be from 0 to 1, got ${declineRate}`);
  const declineThreshold = declineRate * 0x100000000;

  return {
    async authorize(requests) {
      return decideBatch(requests, seed32, faultThreshold, declineThreshold);
    },

    async authenticate(requests) {
      return requests.map((request) => {
        assertInstant(request.at, request.reference);
        const card = findTestCardByFingerprint(request.fingerprint);
        // An unknown or live-mode card cannot be authenticated: the issuer's server answers `error`.
        if (card === undefined || request.livemode) return { reference: request.reference, status: 'error' };
        return { reference: request.reference, status: threeDSecureOutcome(card) };
      });
    },

    // The simulated network never refuses to settle an approved authorization: whether a hold has
    // lapsed or was already captured is for the engine to check (charge_expired, already_captured).
    async capture(requests) {
      return requests.map((request) => settle(request));
    },

    async release(requests) {
      return requests.map((request) => settle(request));
    },

    async refund(requests) {
      return requests.map((request) => {
        assertInstant(request.at, request.reference);
        if (findTestCardByFingerprint(request.fingerprint)?.refund === 'refused') {
          return { reference: request.reference, ok: false, code: 'card_declined', message: 'the issuer refused to take the refund back to this card', retryable: false };
        }
        return { reference: request.reference, ok: true };
      });
    },
  };
}

function settle(request: SettlementRequest): SettlementResult {
  assertInstant(request.at, request.reference);
  return { reference: request.reference, ok: true };
}
