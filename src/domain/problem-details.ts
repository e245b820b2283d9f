/**
 * v2 errors as RFC 9457 problem documents (service rules §3; official-sdks.md §1 "Error body",
 * §3 "v2 named 400 errors"): `{ type, title, status, detail, code, errors: [{ field, message }] }`
 * with media type `application/problem+json`. The engine throws one error class for both API
 * versions (KessaiError, with its v1 catalogue code); this maps it to the v2 shape once, at the
 * boundary, so operations shared by v1 and v2 need no second catalogue. It is the one error policy
 * of the v2 API: the v2 codec (src/api/v2/codec.ts) renders every refusal through it.
 *
 * Mapping: authentication 401 `Unauthorized`; unknown resource 404 `Not Found`, except an unknown
 * list cursor, which the SDK documents as 400 `Resource Missing`; a card failure 402 `Payment
 * Failed` (the card's own code kept in `code`); the SDK's named 400 errors with their titles
 * (`Invalid Status` for every wrong state, `Metadata Limit Exceeded`, `Extended Authorization Not
 * Available`, …); every other caller mistake 422 `Validation Error` (`validation_error`) with the
 * parameter named in `errors[].field`; server faults keep their 5xx.
 */
import type { KessaiError, ErrorCode } from './errors';

export const PROBLEM_MEDIA_TYPE = 'application/problem+json';

/**
 * The v2 problem `type`: a URN per `code` below (RFC 9457 §3.1.1 allows a URI that is not a
 * locator), so no link points at a site that does not exist.
 */
const PROBLEM_TYPE_BASE = 'urn:kessai:problem:';

export type ProblemCode = string;

export interface ProblemDocument {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly code: ProblemCode;
  readonly errors: readonly { readonly field: string; readonly message: string }[];
  /** A card refusal of a payment flow names the flow (created or confirmed): an extension member (RFC 9457 §3.2). */
  readonly payment_flow_id?: string;
}

interface Category {
  readonly code: ProblemCode;
  readonly status: number;
  readonly title: string;
}

const INVALID_STATUS: Category = { code: 'invalid_status', status: 400, title: 'Invalid Status' };
const named = (title: string): Category => ({ code: title.toLowerCase().replace(/ /g, '_'), status: 400, title });

/**
 * The SDK's named 400 errors by catalogue code (official-sdks.md §3). The v1 codes that say "the
 * object is in the wrong state for this", not "your input is malformed", are `Invalid Status`.
 */
const NAMED_400: Readonly<Partial<Record<ErrorCode, Category>>> = {
  invalid_status: INVALID_STATUS,
  already_captured: INVALID_STATUS,
  cant_capture_refunded_charge: INVALID_STATUS,
  cant_reauth_refunded_charge: INVALID_STATUS,
  three_d_secure_incompleted: INVALID_STATUS,
  not_in_three_d_secure_flow: INVALID_STATUS,
  three_d_secure_expired: INVALID_STATUS,
  invalid_three_d_secure_state: INVALID_STATUS,
  token_already_used: INVALID_STATUS,
  // capturePaymentFlow: "Payment Flow Expired" — the hold lapsed; a wrong state all the same.
  charge_expired: { ...INVALID_STATUS, title: 'Payment Flow Expired' },
  too_many_metadata_keys: named('Metadata Limit Exceeded'),
  extended_authorization_not_available: named('Extended Authorization Not Available'),
  already_refunded: named('Already Refunded'),
  refund_amount_gt_net: named('Refund Exceeds Payment'),
  already_exist_id: named('Already Exists ID'),
  product_has_prices: named('Product Has Prices'),
  invalid_default_price: named('Invalid Default Price'),
  payment_method_already_attached: named('Payment Method Already Attached'),
  payment_method_customer_mismatch: named('Payment Method Customer Mismatch'),
  payment_method_unattached: named('Payment Method Unattached'),
  payment_method_already_detached: named('Payment Method Already Detached'),
  detached_payment_method_not_usable: named('Detached Payment Method Not Usable'),
  payment_method_not_owned_by_customer: named('Payment Method Not Owned By Customer'),
  apple_pay_disabled_in_livemode: named('Apple Pay Disabled In Livemode'),
  invalid_apple_pay_token: named('Invalid Apple Pay Token'),
};

/**
 * Named 400 errors the engine raises with a general code on a particular parameter: the parameter
 * tells which SDK title applies (createPaymentFlow / confirmPaymentFlow).
 */
const NAMED_BY_PARAM: readonly { readonly code: ErrorCode; readonly param: RegExp; readonly category: Category }[] = [
  { code: 'no_allowed_param', param: /^payment_method_types?(\[|$)/, category: named('Payment Method Type Not Allowed') },
  { code: 'missing_param', param: /^payment_method$/, category: named('Missing Payment Method') },
  { code: 'missing_param', param: /^customer$/, category: named('Customer Required For Payment Method') },
];

/** The list parameters naming a cursor: an unknown one is 400 `Resource Missing` on every list. */
const CURSOR_PARAMS: ReadonlySet<string> = new Set(['starting_after', 'ending_before']);

/** The v2 category of an error: its `code`, `status` and `title`. */
export function problemCodeOf(error: Pick<KessaiError, 'code' | 'status' | 'type' | 'param'>): Category {
  if (error.type === 'auth_error' || error.code === 'not_activated_account') return { code: 'unauthorized', status: 401, title: 'Unauthorized' };
  if (error.status === 404) {
    if (error.param !== undefined && CURSOR_PARAMS.has(error.param)) return named('Resource Missing');
    return { code: 'not_found', status: 404, title: 'Not Found' };
  }
  if (error.status === 405) return { code: 'method_not_allowed', status: 405, title: 'Method Not Allowed' };
  if (error.status === 413) return { code: 'payload_too_large', status: 413, title: 'Payload Too Large' };
  if (error.status === 429) return { code: 'rate_limited', status: 429, title: 'Too Many Requests' };
  if (error.status === 503) return { code: 'service_unavailable', status: 503, title: 'Service Unavailable' };
  if (error.status >= 500) return { code: 'server_error', status: error.status, title: 'Internal Server Error' };
  // A card refusal keeps its own code (card_declined, expired_card, …): it is what the buyer is told.
  if (error.status === 402) return { code: error.code, status: 402, title: 'Payment Failed' };
  const named400 = NAMED_400[error.code];
  if (named400 !== undefined) return named400;
  const byParam = NAMED_BY_PARAM.find((rule) => rule.code === error.code && error.param !== undefined && rule.param.test(error.param));
  if (byParam !== undefined) return byParam.category;
  return { code: 'validation_error', status: 422, title: 'Validation Error' };
}

/**
 * The problem document of an error. The v1 parameter (form syntax, `metadata[k]`) is given as the
 * field in dotted v2 JSON syntax (`metadata.k`,
 * `payment_method_options.card.request_extended_authorization`).
 */
export function toProblemDocument(error: KessaiError, renameField: (field: string) => string = (field) => field): ProblemDocument {
  const { code, status, title } = problemCodeOf(error);
  const errors = error.param === undefined ? [] : [{ field: renameField(v2Field(error.param)), message: error.message }];
  return { type: PROBLEM_TYPE_BASE + code, title, status, detail: error.message, code, errors, ...(error.paymentFlow === undefined ? {} : { payment_flow_id: error.paymentFlow }) };
}

/** `a[b][c]` → `a.b.c`; dotted names pass unchanged. */
export function v2Field(param: string): string {
  return param.replace(/\[([^\]]*)\]/g, '.$1');
}
