/**
 * The v2 payment flow object (v2 §2.2, service rules §3) from its row, and finding a flow of the
 * caller's account and mode, by the server (secret key) or by the browser (public key and the
 * flow's `client_secret`, v2 §4.8 and §5).
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database, PaymentFlowsTable } from '../db/schema';
import { reject } from '../domain/errors';
import type { IdGenerator } from '../domain/ids';
import { toIsoSeconds } from '../domain/time';

export type PaymentFlowRow = Selectable<PaymentFlowsTable>;

export const PAYMENT_FLOWS_URL = '/v2/payment_flows';

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type PaymentFlowObject = {
  readonly id: string;
  readonly object: 'payment_flow';
  readonly livemode: boolean;
  readonly status: PaymentFlowRow['status'];
  readonly amount: number;
  readonly currency: string;
  readonly capture_method: PaymentFlowRow['capture_method'];
  readonly payment_method_types: readonly string[];
  readonly payment_method_options: { readonly card: { readonly request_extended_authorization: string | null } };
  readonly client_secret: string;
  readonly amount_received: number;
  readonly amount_capturable: number;
  /** When the hold lapses (service rules §2.1); null while nothing is held. */
  readonly capture_before: string | null;
  readonly extended_authorization: boolean;
  readonly customer: string | null;
  readonly description: string | null;
  readonly payment_method: string | null;
  readonly payment_method_details: {
    readonly type: string;
    readonly card: { readonly brand: string | null; readonly last4: string | null; readonly exp_month: number | null; readonly exp_year: number | null; readonly funding: string | null } | null;
  } | null;
  readonly three_d_secure_status: string | null;
  readonly next_action: Readonly<Record<string, unknown>> | null;
  readonly last_payment_error: Readonly<Record<string, unknown>> | null;
  readonly cancellation_reason: string | null;
  readonly canceled_at: string | null;
  readonly checkout_session: string | null;
  readonly metadata: Readonly<Record<string, string | number | boolean>>;
  readonly created_at: string;
  readonly updated_at: string;
};

export function renderPaymentFlow(row: PaymentFlowRow): PaymentFlowObject {
  const isCard = row.payment_method_type === 'card' || row.payment_method_type === 'apple_pay';
  return {
    id: row.payment_flow_id,
    object: 'payment_flow',
    livemode: row.livemode,
    status: row.status,
    amount: row.amount,
    currency: row.currency,
    capture_method: row.capture_method,
    payment_method_types: row.payment_method_types,
    payment_method_options: { card: { request_extended_authorization: row.request_extended_authorization } },
    client_secret: row.client_secret,
    amount_received: row.amount_received,
    amount_capturable: row.amount_capturable,
    capture_before: row.capture_before === null ? null : toIsoSeconds(row.capture_before),
    extended_authorization: row.extended_authorization,
    customer: row.customer_id,
    description: row.description,
    payment_method: row.payment_method_id,
    payment_method_details:
      row.payment_method_type === null
        ? null
        : {
            type: row.payment_method_type,
            card: isCard ? { brand: row.card_brand, last4: row.card_last4, exp_month: row.card_exp_month, exp_year: row.card_exp_year, funding: row.card_funding } : null,
          },
    three_d_secure_status: row.three_d_secure_status,
    next_action: row.next_action,
    last_payment_error: row.last_payment_error,
    cancellation_reason: row.cancellation_reason,
    canceled_at: row.canceled_at === null ? null : toIsoSeconds(row.canceled_at),
    checkout_session: row.checkout_session_id,
    metadata: row.metadata,
    created_at: toIsoSeconds(row.created_at),
    updated_at: toIsoSeconds(row.updated_at),
  };
}

/**
 * A new client secret: the flow id, `_secret_`, and 24 random hex characters drawn from the id
 * generator (seeded in simulation and tests, the OS in production), so it cannot be guessed from
 * the flow id.
 */
export function newClientSecret(ids: IdGenerator, paymentFlowId: string): string {
  const random = ids.next('paymentFlow').slice('pfw_'.length, 'pfw_'.length + 24);
  return `${paymentFlowId}_secret_${random}`;
}

/**
 * The flow `id` of the caller's account and mode, locked FOR UPDATE when `lock` is set.
 * A public key (the browser, v2 §4.8) must also present the flow's `client_secret`; a wrong or
 * missing secret is answered exactly like an unknown id, so a public key cannot probe for flows.
 * Unknown: `invalid_id` on `param` (404).
 */
export async function findPaymentFlow(
  executor: Kysely<Database>,
  caller: Caller,
  paymentFlowId: string,
  options: { readonly param?: string; readonly lock?: boolean; readonly clientSecret?: string | undefined } = {},
): Promise<PaymentFlowRow> {
  const param = options.param ?? 'id';
  let query = executor
    .selectFrom('payment_flows')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('payment_flow_id', '=', paymentFlowId);
  if (options.lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  const secretOk = options.clientSecret === undefined ? caller.kind === 'secret' : options.clientSecret === row?.client_secret;
  if (!row || !secretOk) return reject('invalid_id', param, `No such payment flow: ${paymentFlowId}`);
  return row;
}
