/**
 * The error catalogue of the service (v1 API §7) and the one error class the engine throws for
 * anything a caller did wrong or a card refused. Every rejection carries the catalogue's code, the
 * HTTP status and type the v1 API would answer with, and the parameter it is about.
 */

/** v1 `error.type` values. */
export type ErrorType =
  | 'client_error'
  | 'card_error'
  | 'server_error'
  | 'not_allowed_method_error'
  | 'auth_error'
  | 'invalid_request_error';

interface CatalogueEntry {
  readonly status: number;
  readonly type: ErrorType;
  readonly message: string;
}

const card = (message: string): CatalogueEntry => ({ status: 402, type: 'card_error', message });
const cardInput = (message: string): CatalogueEntry => ({ status: 400, type: 'card_error', message });
const client = (message: string, status = 400): CatalogueEntry => ({ status, type: 'client_error', message });

/**
 * Every code of v1 §7 with its status and type. Card refusals are 402 `card_error`; malformed card
 * data is 400 `card_error` (the document's example: a bad card number gives 400 `card_error`).
 */
export const ERROR_CATALOGUE = {
  invalid_number: cardInput('invalid card number'),
  invalid_cvc: cardInput('invalid CVC'),
  invalid_expiration_date: cardInput('invalid expiry year or month'),
  incorrect_card_data: card('some card data is wrong'),
  invalid_expiry_month: cardInput('invalid expiry month'),
  invalid_expiry_year: cardInput('invalid expiry year'),
  expired_card: card('the card is expired'),
  card_declined: card('declined by the card company'),
  card_flagged: card('temporary lockout after repeated card-caused errors'),
  processing_error: card('error in the payment network'),
  missing_card: client('the customer has no default card'),
  unacceptable_brand: card('card brand not allowed'),
  invalid_id: client('invalid id', 404),
  no_api_key: { status: 401, type: 'auth_error', message: 'no API key set' },
  invalid_api_key: { status: 401, type: 'auth_error', message: 'invalid API key' },
  invalid_plan: client('invalid plan'),
  invalid_expiry_days: client('invalid expiry days'),
  unnecessary_expiry_days: client('expiry days not needed'),
  invalid_flexible_id: client('custom id violates naming rules'),
  invalid_timestamp: client('invalid UNIX timestamp'),
  invalid_trial_end: client('invalid trial end'),
  invalid_string_length: client('invalid string length'),
  invalid_country: client('invalid country code'),
  invalid_currency: client('invalid currency code'),
  invalid_address_zip: client('invalid postal code'),
  invalid_amount: client('invalid payment amount'),
  invalid_plan_amount: client('invalid plan amount'),
  invalid_card: card('invalid card'),
  invalid_card_name: client('invalid card holder name'),
  invalid_card_country: client('invalid billing country code'),
  invalid_card_address_zip: client('invalid billing postal code'),
  invalid_card_address_state: client('invalid billing state'),
  invalid_card_address_city: client('invalid billing city'),
  invalid_card_address_line: client('invalid billing street line'),
  invalid_customer: client('invalid customer'),
  invalid_boolean: client('invalid boolean'),
  invalid_email: client('invalid e-mail address'),
  no_allowed_param: client('parameter not allowed'),
  no_param: client('no parameter set'),
  invalid_querystring: client('invalid query string'),
  missing_param: client('a required parameter is missing'),
  invalid_param_key: client('a parameter that cannot be specified was given'),
  no_payment_method: client('no payment means set'),
  payment_method_duplicate: client('payment means set twice'),
  payment_method_duplicate_including_customer: client('payment means set twice (customer id included)'),
  failed_payment: card('the given payment has failed'),
  invalid_refund_amount: client('invalid refund amount'),
  already_refunded: client('already refunded'),
  invalid_amount_to_not_captured: client('partial refund of an uncaptured payment'),
  refund_amount_gt_net: client('refund above the original amount'),
  capture_amount_gt_net: client('capture above the original amount'),
  invalid_refund_reason: client('invalid refund_reason'),
  already_captured: client('already captured'),
  cant_capture_refunded_charge: client('cannot capture a refunded charge'),
  cant_reauth_refunded_charge: client('cannot reauthorize a refunded charge'),
  charge_expired: client('authorization has lapsed'),
  already_exist_id: client('id already exists'),
  token_already_used: client('token already used'),
  already_have_card: client('customer already holds the card'),
  dont_has_this_card: client('customer does not hold the given card'),
  doesnt_have_card: client('the customer has no default card'),
  already_have_the_same_card: client('same card number and expiry already held'),
  invalid_interval: client('invalid billing interval'),
  invalid_trial_days: client('invalid trial days'),
  invalid_billing_day: client('invalid billing day'),
  billing_day_for_non_monthly_plan: client('billing day only for monthly plans'),
  exist_subscribers: client('plan with subscribers cannot be deleted'),
  already_subscribed: client('customer already subscribed'),
  already_canceled: client('subscription already canceled'),
  already_paused: client('subscription already paused'),
  subscription_worked: client('subscription already running'),
  cannot_change_prorate_status: client('pro-rata setting only changeable at plan change'),
  too_many_metadata_keys: client('more than 20 metadata keys'),
  invalid_metadata_key: client('invalid metadata key'),
  invalid_metadata_value: client('invalid metadata value'),
  apple_pay_disabled_in_livemode: client('wallet payment not permitted in live mode'),
  invalid_apple_pay_token: client('invalid wallet token'),
  test_card_on_livemode: card('test card used in live mode'),
  not_activated_account: client('account not permitted live mode'),
  payjp_wrong: { status: 500, type: 'server_error', message: 'fault on the service side' },
  pg_wrong: { status: 500, type: 'server_error', message: 'fault on the payment processor side' },
  // Not in the spec's catalogue: a server that is stopping refuses new requests, and a request whose
  // database (on Citus, its account's worker node) cannot be reached is refused; both with Retry-After.
  service_unavailable: { status: 503, type: 'server_error', message: 'the server is stopping; retry shortly' },
  not_found: client('target does not exist', 404),
  not_allowed_method: { status: 405, type: 'not_allowed_method_error', message: 'HTTP method not allowed' },
  over_capacity: client('rate limit reached', 429),
  // Not in v1 §7, which names no refusal of a body's size: HTTP's own status and name.
  payload_too_large: client('the request body is too large', 413),
  refund_limit_exceeded: client('refund after the allowed period'),
  cannot_prorated_refund_of_subscription: client('pro-rata refund period passed'),
  three_d_secure_incompleted: client('another operation before 3-D Secure was completed'),
  three_d_secure_failed: card('3-D Secure authentication failed'),
  not_in_three_d_secure_flow: client('payment not subject to 3-D Secure, or its flow timed out'),
  unverified_token: client('payment with a token whose 3-D Secure is incomplete'),
  invalid_owner_type: client('value not allowed for owner'),
  invalid_three_d_secure_state: client('invalid transition during 3-D Secure'),
  not_customer_card: client('not registered as a customer card, or deleted'),
  three_d_secure_expired: client('3-D Secure completion period expired'),
  // v2 only (service rules §3): "a wrong state 400 (`invalid_status`)"; see problem-details.ts.
  invalid_status: client('the object is not in a status that allows this operation'),
  // v2 only (official-sdks.md §3, deleteProduct / updateProduct): no v1 code says either.
  product_has_prices: client('a product with prices cannot be deleted'),
  invalid_default_price: client('the default price must be an active price of the product'),
  // v2 only (official-sdks.md §3, attach / detach PaymentMethod).
  payment_method_already_attached: client('the payment method is already attached to the customer'),
  payment_method_customer_mismatch: client('the payment method is attached to another customer'),
  payment_method_unattached: client('the payment method is not attached to a customer'),
  payment_method_already_detached: client('the payment method was detached and cannot be used again'),
  // v2 only (official-sdks.md §3, createPaymentFlow / confirmPaymentFlow).
  extended_authorization_not_available: client('the authorization period of this payment method cannot be extended'),
  detached_payment_method_not_usable: client('a detached payment method cannot pay'),
  payment_method_not_owned_by_customer: client('the payment method is not attached to the customer of the payment flow'),
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

export function isErrorCode(value: string): value is ErrorCode {
  return Object.prototype.hasOwnProperty.call(ERROR_CATALOGUE, value);
}

export interface KessaiErrorOptions {
  /** The request parameter the error is about, in form syntax (`card[number]`, `metadata[k]`). */
  readonly param?: string;
  /** The id of the charge a card error happened on (v1 `error.charge`). */
  readonly charge?: string;
  /** The id of the payment flow a card error happened on (v2 problem `payment_flow_id`). */
  readonly paymentFlow?: string;
  /** Overrides the catalogue's message with one that names the offending value. */
  readonly message?: string;
  readonly cause?: unknown;
}

/**
 * A rejection the caller can act on: it names the catalogue code, the parameter, and whether
 * trying the same thing again may succeed (only server-side faults are retryable).
 */
export class KessaiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly type: ErrorType;
  readonly param: string | undefined;
  readonly charge: string | undefined;
  readonly paymentFlow: string | undefined;

  constructor(code: ErrorCode, options: KessaiErrorOptions = {}) {
    const entry = ERROR_CATALOGUE[code];
    super(options.message ?? entry.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'KessaiError';
    this.code = code;
    this.status = entry.status;
    this.type = entry.type;
    this.param = options.param;
    this.charge = options.charge;
    this.paymentFlow = options.paymentFlow;
  }

  get retryable(): boolean {
    return this.status >= 500 || this.code === 'over_capacity';
  }

  /** The v1 error body (v1 §7). */
  toV1(): { error: { status: number; type: ErrorType; message: string; code: ErrorCode; param?: string; charge?: string } } {
    return {
      error: {
        status: this.status,
        type: this.type,
        message: this.message,
        code: this.code,
        ...(this.param === undefined ? {} : { param: this.param }),
        ...(this.charge === undefined ? {} : { charge: this.charge }),
      },
    };
  }
}

/** Shorthand for `throw new KessaiError(...)` at validation sites. */
export function reject(code: ErrorCode, param?: string, message?: string): never {
  throw new KessaiError(code, { ...(param === undefined ? {} : { param }), ...(message === undefined ? {} : { message }) });
}

/** Unknown thrown values are normalised once, here, so callers can rely on `.message`. */
export function toError(value: unknown): Error {
  if (value instanceof Error) return value;
  return new Error(typeof value === 'string' ? value : JSON.stringify(value));
}
