/**
 * v2 payment transactions (official-sdks.md §2 "Others (read)": getPaymentTransaction,
 * getAllPaymentTransactions): a read-only view of the money the settlement already books, one
 * transaction per settled row. A capture (v1 charge or v2 flow capture, a row of `charges` with its
 * `term_id`) is a `payment`; a refund row (v1 or v2, a row of `refunds`) is a `refund`. Nothing is
 * stored for them: the rows settlement wrote are the record, so the view can never disagree with
 * the statements (docs/decisions.md "Issue 16 payment transactions (h6)").
 *
 * Signs follow the money from the merchant's side: a payment's `amount` and `fee` are positive, a
 * refund's are negative (the refunded amount, and the fee given back, `refund_fee_offset`); so a
 * term's transactions sum to its statement's gross sales plus gross refund, and its fees to the fee
 * minus the refund fee offset.
 *
 * Ids are the settled row's id behind `ptxn_` (`ptxn_ch_…`, `ptxn_re_…`): stable, unique across both
 * kinds, and found again without a table of their own. `chargeback` / `chargeback_cancel` are the
 * SDK's other types; disputes book them (a branch of this view once they exist), so the filter
 * accepts them today and they list nothing.
 */
import { sql, type Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database } from '../db/schema';
import { reject } from '../domain/errors';
import { toIsoSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { defineOperation } from '../operations/define';
import { optionalString, readParams, requireString } from '../operations/params';
import { inV2Page, readV2Page, V2_PAGINATION_PARAMS, v2ListObject, type V2List } from '../operations/v2-pagination';

export const PAYMENT_TRANSACTIONS_URL = '/v2/payment_transactions';
export const PAYMENT_TRANSACTION_ID_PREFIX = 'ptxn_';
export const PAYMENT_TRANSACTION_TYPES = ['payment', 'refund', 'chargeback', 'chargeback_cancel'] as const;
export type PaymentTransactionType = (typeof PAYMENT_TRANSACTION_TYPES)[number];
const PAYMENT_METHOD_TYPES = ['card', 'paypay', 'apple_pay'] as const;

// A type alias, not an interface: like the other v2 objects.
export type PaymentTransactionObject = {
  readonly id: string;
  readonly object: 'payment_transaction';
  readonly livemode: boolean;
  readonly resource_id: string;
  readonly amount: number;
  readonly currency: 'jpy';
  readonly fee_rate: string;
  readonly fee: number;
  readonly type: PaymentTransactionType;
  readonly payment_method_type: string;
  readonly term_id: string;
  readonly created_at: string;
  readonly updated_at: string;
};

interface TransactionRow {
  readonly id: string;
  readonly livemode: boolean;
  readonly resource_id: string;
  readonly amount: number | string;
  readonly fee: number | string;
  readonly fee_rate: string;
  readonly type: PaymentTransactionType;
  readonly payment_method_type: string;
  readonly term_id: string;
  readonly created_at: Date;
}

function renderPaymentTransaction(row: TransactionRow): PaymentTransactionObject {
  const at = toIsoSeconds(row.created_at);
  return {
    id: row.id,
    object: 'payment_transaction',
    livemode: row.livemode,
    resource_id: row.resource_id,
    amount: Number(row.amount),
    currency: 'jpy',
    fee_rate: row.fee_rate,
    fee: Number(row.fee),
    type: row.type,
    payment_method_type: row.payment_method_type,
    term_id: row.term_id,
    // A settled row never changes: the transaction is as it was made.
    created_at: at,
    updated_at: at,
  };
}

interface TransactionFilter {
  readonly termId?: string | undefined;
  readonly type?: PaymentTransactionType | undefined;
  readonly paymentMethodType?: string | undefined;
  /** One transaction by its id (a `ptxn_` id already split into its kind and row id). */
  readonly rowId?: { readonly kind: 'payment' | 'refund'; readonly id: string } | undefined;
}

/**
 * The caller's transactions as one derived table (`t`): captured charges and refund rows that
 * settlement has booked into a term, each branch filtered on its own columns so the term and id
 * filters reach `charges_by_term` / `refunds_by_term` and the primary keys.
 */
function transactions(db: Kysely<Database>, caller: Caller, filter: TransactionFilter) {
  const wants = (kind: 'payment' | 'refund') => (filter.type === undefined || filter.type === kind) && (filter.rowId === undefined || filter.rowId.kind === kind);
  const methodType = sql<string>`coalesce(f.payment_method_type, 'card')`;
  const payments = db
    .selectFrom('charges as c')
    .leftJoin('payment_flows as f', (join) => join.onRef('f.account_id', '=', 'c.account_id').onRef('f.livemode', '=', 'c.livemode').onRef('f.payment_flow_id', '=', 'c.payment_flow_id'))
    .select([
      sql<string>`${PAYMENT_TRANSACTION_ID_PREFIX} || c.charge_id`.as('id'),
      'c.livemode',
      sql<string>`coalesce(c.payment_flow_id, c.charge_id)`.as('resource_id'),
      sql<number>`c.amount_captured`.as('amount'),
      sql<number>`c.fee`.as('fee'),
      sql<string>`c.fee_rate::text`.as('fee_rate'),
      sql<PaymentTransactionType>`'payment'`.as('type'),
      methodType.as('payment_method_type'),
      sql<string>`c.term_id`.as('term_id'),
      sql<Date>`c.captured_at`.as('created_at'),
    ])
    .where('c.account_id', '=', caller.accountId)
    .where('c.livemode', '=', caller.livemode)
    .where('c.captured', '=', true)
    .where('c.term_id', 'is not', null)
    .$if(!wants('payment'), (q) => q.where(sql<boolean>`false`))
    .$if(filter.rowId !== undefined, (q) => q.where('c.charge_id', '=', filter.rowId!.id))
    .$if(filter.termId !== undefined, (q) => q.where('c.term_id', '=', filter.termId!))
    .$if(filter.paymentMethodType !== undefined, (q) => q.where(methodType, '=', filter.paymentMethodType!));
  const refunds = db
    .selectFrom('refunds as r')
    .innerJoin('charges as c', (join) => join.onRef('c.account_id', '=', 'r.account_id').onRef('c.livemode', '=', 'r.livemode').onRef('c.charge_id', '=', 'r.charge_id'))
    .leftJoin('payment_flows as f', (join) => join.onRef('f.account_id', '=', 'c.account_id').onRef('f.livemode', '=', 'c.livemode').onRef('f.payment_flow_id', '=', 'c.payment_flow_id'))
    .select([
      sql<string>`${PAYMENT_TRANSACTION_ID_PREFIX} || r.refund_id`.as('id'),
      'r.livemode',
      // A v1 refund has no id of its own in the API: its resource is the charge.
      sql<string>`coalesce(r.payment_refund_id, r.charge_id)`.as('resource_id'),
      sql<number>`-r.amount`.as('amount'),
      sql<number>`-r.refund_fee_offset`.as('fee'),
      sql<string>`c.fee_rate::text`.as('fee_rate'),
      sql<PaymentTransactionType>`'refund'`.as('type'),
      methodType.as('payment_method_type'),
      sql<string>`r.term_id`.as('term_id'),
      sql<Date>`r.created_at`.as('created_at'),
    ])
    .where('r.account_id', '=', caller.accountId)
    .where('r.livemode', '=', caller.livemode)
    .where('r.term_id', 'is not', null)
    .$if(!wants('refund'), (q) => q.where(sql<boolean>`false`))
    .$if(filter.rowId !== undefined, (q) => q.where('r.refund_id', '=', filter.rowId!.id))
    .$if(filter.termId !== undefined, (q) => q.where('r.term_id', '=', filter.termId!))
    .$if(filter.paymentMethodType !== undefined, (q) => q.where(methodType, '=', filter.paymentMethodType!));
  return db.selectFrom(payments.unionAll(refunds).as('t')).selectAll();
}

/** The row id behind a transaction id, or undefined when it cannot be one of ours. */
function rowIdOf(id: string): TransactionFilter['rowId'] {
  if (!id.startsWith(PAYMENT_TRANSACTION_ID_PREFIX)) return undefined;
  const rowId = id.slice(PAYMENT_TRANSACTION_ID_PREFIX.length);
  if (rowId.startsWith('ch_')) return { kind: 'payment', id: rowId };
  if (rowId.startsWith('re_')) return { kind: 'refund', id: rowId };
  return undefined;
}

async function findPaymentTransaction(db: Kysely<Database>, caller: Caller, id: string, param: string): Promise<TransactionRow> {
  const rowId = rowIdOf(id);
  const row = rowId === undefined ? undefined : ((await transactions(db, caller, { rowId }).executeTakeFirst()) as TransactionRow | undefined);
  if (!row) return reject('invalid_id', param, `No such payment transaction: ${id}`);
  return row;
}

/** `payment_transactions.retrieve`: one transaction of the caller's account and mode; unknown → 404. */
export async function retrievePaymentTransaction(ctx: Context, caller: Caller, input: unknown): Promise<PaymentTransactionObject> {
  const params = readParams(input, ['id']);
  return renderPaymentTransaction(await findPaymentTransaction(ctx.db, caller, requireString(params, 'id'), 'id'));
}

function oneOf<T extends string>(value: string | undefined, allowed: readonly T[], param: string): T | undefined {
  if (value === undefined || (allowed as readonly string[]).includes(value)) return value as T | undefined;
  return reject('invalid_querystring', param, `${param} must be one of ${allowed.join(', ')}, got ${JSON.stringify(value)}`);
}

/**
 * `payment_transactions.list`: newest first (the instant the money moved, then the id), v2 cursors,
 * and the SDK's filters `term_id`, `type` and `payment_method_type`.
 */
export async function listPaymentTransactions(ctx: Context, caller: Caller, input: unknown): Promise<V2List<PaymentTransactionObject>> {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'term_id', 'type', 'payment_method_type']);
  const page = readV2Page(params);
  const filter: TransactionFilter = {
    termId: optionalString(params, 'term_id', { code: 'invalid_querystring' }),
    type: oneOf(optionalString(params, 'type', { code: 'invalid_querystring' }), PAYMENT_TRANSACTION_TYPES, 'type'),
    paymentMethodType: oneOf(optionalString(params, 'payment_method_type', { code: 'invalid_querystring' }), PAYMENT_METHOD_TYPES, 'payment_method_type'),
  };
  const cursor = page.cursor === undefined ? undefined : await findPaymentTransaction(ctx.db, caller, page.cursor.id, page.cursor.param);
  const rows = (await transactions(ctx.db, caller, filter)
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.id }, 'id'))
    .execute()) as TransactionRow[];
  return v2ListObject(rows, page, PAYMENT_TRANSACTIONS_URL, renderPaymentTransaction);
}

export const PAYMENT_TRANSACTION_OPERATIONS = [
  defineOperation('payment_transactions.retrieve', retrievePaymentTransaction),
  defineOperation('payment_transactions.list', listPaymentTransactions),
] as const;
