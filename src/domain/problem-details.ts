/**
 * v2 errors as RFC 9457 problem documents (service rules §3): `{ type, title, status, detail, code,
 * errors: [{ field, message }] }` with media type `application/problem+json`. The engine throws one
 * error class for both API versions (KessaiError, with its v1 catalogue code); this maps it to the
 * v2 shape once, at the boundary, so operations shared by v1 and v2 code need no second catalogue.
 *
 * Mapping (service rules §3): authentication 401, unknown resource 404, card failure 402, a wrong
 * state 400 `invalid_status`, every other caller mistake 422 `validation_error` with the parameter
 * named in `errors[].field`; server faults keep their 5xx.
 */
import type { KessaiError, ErrorCode } from './errors';

export const PROBLEM_MEDIA_TYPE = 'application/problem+json';

/** The v2 problem `type` URIs are relative to the API documentation; one per `code` below. */
const PROBLEM_TYPE_BASE = 'https://docs.kessai.dev/v2/errors#';

export type ProblemCode = 'validation_error' | 'invalid_status' | 'not_found' | 'unauthorized' | 'rate_limited' | 'server_error' | ErrorCode;

export interface ProblemDocument {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly code: ProblemCode;
  readonly errors: readonly { readonly field: string; readonly message: string }[];
}

/**
 * v1 codes that say "the object is in the wrong state for this", not "your input is malformed": v2
 * renders them as 400 `invalid_status` (service rules §3), keeping the v1 code in `detail`'s sense.
 */
const STATE_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'invalid_status',
  'already_captured',
  'already_refunded',
  'charge_expired',
  'cant_capture_refunded_charge',
  'cant_reauth_refunded_charge',
  'three_d_secure_incompleted',
  'not_in_three_d_secure_flow',
  'three_d_secure_expired',
  'invalid_three_d_secure_state',
  'token_already_used',
  'product_has_prices',
  'invalid_default_price',
  'payment_method_already_attached',
  'payment_method_customer_mismatch',
  'payment_method_unattached',
  'payment_method_already_detached',
]);

const TITLES: Readonly<Record<string, string>> = {
  validation_error: 'The request is not valid',
  invalid_status: 'The object is not in a status that allows this operation',
  not_found: 'No such object',
  unauthorized: 'Authentication failed',
  rate_limited: 'Too many requests',
  server_error: 'Internal error',
};

/** The v2 category of an error: which `code`/`status` pair service rules §3 gives it. */
export function problemCodeOf(error: Pick<KessaiError, 'code' | 'status' | 'type'>): { readonly code: ProblemCode; readonly status: number } {
  if (error.type === 'auth_error' || error.code === 'not_activated_account') return { code: 'unauthorized', status: 401 };
  if (error.status === 404) return { code: 'not_found', status: 404 };
  if (error.status === 429) return { code: 'rate_limited', status: 429 };
  if (error.status >= 500) return { code: 'server_error', status: error.status };
  // A card refusal keeps its own code (card_declined, expired_card, …): it is what the buyer is told.
  if (error.status === 402) return { code: error.code, status: 402 };
  if (STATE_CODES.has(error.code)) return { code: 'invalid_status', status: 400 };
  return { code: 'validation_error', status: 422 };
}

/**
 * The problem document of an error. The v1 parameter (form syntax, `metadata[k]`) is given as the
 * field in dotted v2 JSON syntax (`metadata.k`,
 * `payment_method_options.card.request_extended_authorization`).
 */
export function toProblemDocument(error: KessaiError): ProblemDocument {
  const { code, status } = problemCodeOf(error);
  const title = TITLES[code] ?? error.message;
  const errors = error.param === undefined ? [] : [{ field: v2Field(error.param), message: error.message }];
  return { type: PROBLEM_TYPE_BASE + code, title, status, detail: error.message, code, errors };
}

/** `a[b][c]` → `a.b.c`; dotted names pass unchanged. */
export function v2Field(param: string): string {
  return param.replace(/\[([^\]]*)\]/g, '.$1');
}
