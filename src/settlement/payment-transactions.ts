/**
 * v2 payment transactions (official-sdks.md §2 "Others (read)": getPaymentTransaction,
 * getAllPaymentTransactions): a read-only view of the money the settlement already books, one
 * transaction per settled row. A capture (v1 charge or v2 flow capture, a row of `charges` with its
 * `term_id`) is a `payment`; a refund row (v1 or v2, a row of `refunds`) is a `refund`; an opened
 * dispute (a row of `disputes`, src/disputes) is a `chargeback`. Nothing is stored for them: the
 * rows settlement wrote are the record, so the view can never disagree with the statements
 * (docs/decisions/payment-flows-and-checkout.md "Payment transactions, …";
 * docs/decisions/disputes.md "Chargebacks in the payment transactions view").
 *
 * Signs follow the money from the merchant's side: a payment's `amount` and `fee` are positive, a
 * refund's and a chargeback's are negative (the refunded or disputed amount, and the fee given
 * back, `refund_fee_offset` / `chargeback_fee_offset`); so a term's transactions sum to its
 * statement's gross sales plus gross refund plus chargeback, and its fees to the fee minus both
 * fee offsets.
 *
 * Ids are the settled row's id behind `ptxn_` (`ptxn_ch_…`, `ptxn_re_…`, `ptxn_pydp_…`): stable,
 * unique across the kinds, and found again without a table of their own. `chargeback_cancel` is
 * the SDK's other type: kessai never cancels a dispute (it stays `needs_response`), so the filter
 * accepts it and it lists nothing.
 */
import { sql, type Kysely, type RawBuilder, type SelectQueryBuilder } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database } from '../db/schema';
import { reject } from '../domain/errors';
import { ID_PREFIX } from '../domain/ids';
import type { Context } from '../engine/context';
import { inV2Page, type V2Page } from '../operations/v2-pagination';

export const PAYMENT_TRANSACTION_ID_PREFIX = 'ptxn_';
export const PAYMENT_TRANSACTION_TYPES = ['payment', 'refund', 'chargeback', 'chargeback_cancel'] as const;
export type PaymentTransactionType = (typeof PAYMENT_TRANSACTION_TYPES)[number];

/** One transaction as the view reads it: a settled row, signed from the merchant's side. */
export interface PaymentTransactionRow {
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

type TransactionKind = 'payment' | 'refund' | 'chargeback';

export interface PaymentTransactionFilter {
  readonly termId?: string | undefined;
  readonly type?: PaymentTransactionType | undefined;
  readonly paymentMethodType?: string | undefined;
  /** One transaction by its id (a `ptxn_` id already split into its kind and row id). */
  readonly rowId?: { readonly kind: TransactionKind; readonly id: string } | undefined;
}

/** The settled row id prefixes behind `ptxn_`, by the kind of transaction the row is. */
const ROW_ID_PREFIX: readonly (readonly [string, TransactionKind])[] = [
  [ID_PREFIX.charge, 'payment'],
  [ID_PREFIX.refund, 'refund'],
  [ID_PREFIX.paymentDispute, 'chargeback'],
];

/** The v2 flow of the charge `c` (none for a v1 charge): the payment method type is the flow's. */
const FLOW_OF_CHARGE = sql<boolean>`f.account_id = c.account_id AND f.livemode = c.livemode AND f.payment_flow_id = c.payment_flow_id`;
const METHOD_TYPE = sql<string>`coalesce(f.payment_method_type, 'card')`;

/** How one kind of settled row (table alias `alias`, the charge as `c`) reads as a transaction. */
interface Branch {
  readonly kind: TransactionKind;
  readonly alias: string;
  readonly idColumn: string;
  readonly resourceId: RawBuilder<string>;
  /** The money columns of the row and their sign from the merchant's side. */
  readonly amount: string;
  readonly fee: string;
  readonly sign: 1 | -1;
  /** When the money moved. */
  readonly at: string;
}

/**
 * One branch of the view: the row's columns as a transaction, narrowed to the caller and the filter
 * on the columns of the row itself so the term and id filters reach its `…_by_term` index and
 * primary key. A branch the type or id filter rules out selects nothing.
 */
function branch<DB, TB extends keyof DB>(q: SelectQueryBuilder<DB, TB, object>, caller: Caller, filter: PaymentTransactionFilter, b: Branch) {
  const col = (name: string) => sql.ref(`${b.alias}.${name}`);
  const signed = (name: string) => (b.sign === 1 ? sql<number>`${col(name)}` : sql<number>`-${col(name)}`);
  const wanted = (filter.type === undefined || filter.type === b.kind) && (filter.rowId === undefined || filter.rowId.kind === b.kind);
  return q
    .select([
      sql<string>`${PAYMENT_TRANSACTION_ID_PREFIX} || ${col(b.idColumn)}`.as('id'),
      sql<boolean>`${col('livemode')}`.as('livemode'),
      b.resourceId.as('resource_id'),
      signed(b.amount).as('amount'),
      signed(b.fee).as('fee'),
      sql<string>`c.fee_rate::text`.as('fee_rate'),
      sql<PaymentTransactionType>`${b.kind}::text`.as('type'),
      METHOD_TYPE.as('payment_method_type'),
      sql<string>`${col('term_id')}`.as('term_id'),
      sql<Date>`${col(b.at)}`.as('created_at'),
    ])
    .where(sql<boolean>`${col('account_id')} = ${caller.accountId} AND ${col('livemode')} = ${caller.livemode} AND ${col('term_id')} IS NOT NULL`)
    .$if(!wanted, (w) => w.where(sql<boolean>`false`))
    .$if(filter.rowId !== undefined, (w) => w.where(sql<boolean>`${col(b.idColumn)} = ${filter.rowId!.id}`))
    .$if(filter.termId !== undefined, (w) => w.where(sql<boolean>`${col('term_id')} = ${filter.termId!}`))
    .$if(filter.paymentMethodType !== undefined, (w) => w.where(sql<boolean>`${METHOD_TYPE} = ${filter.paymentMethodType!}`));
}

/**
 * The caller's transactions as one derived table (`t`): captured charges, refund rows and disputes
 * that settlement has booked into a term.
 */
function transactions(db: Kysely<Database>, caller: Caller, filter: PaymentTransactionFilter) {
  const payments = db
    .selectFrom('charges as c')
    .leftJoin('payment_flows as f', (join) => join.on(FLOW_OF_CHARGE))
    .where('c.captured', '=', true)
    .$call((q) =>
      branch(q, caller, filter, { kind: 'payment', alias: 'c', idColumn: 'charge_id', resourceId: sql`coalesce(c.payment_flow_id, c.charge_id)`, amount: 'amount_captured', fee: 'fee', sign: 1, at: 'captured_at' }),
    );
  const refunds = db
    .selectFrom('refunds as r')
    .innerJoin('charges as c', (join) => join.onRef('c.account_id', '=', 'r.account_id').onRef('c.livemode', '=', 'r.livemode').onRef('c.charge_id', '=', 'r.charge_id'))
    .leftJoin('payment_flows as f', (join) => join.on(FLOW_OF_CHARGE))
    .$call((q) =>
      // A v1 refund has no id of its own in the API: its resource is the charge.
      branch(q, caller, filter, { kind: 'refund', alias: 'r', idColumn: 'refund_id', resourceId: sql`coalesce(r.payment_refund_id, r.charge_id)`, amount: 'amount', fee: 'refund_fee_offset', sign: -1, at: 'created_at' }),
    );
  // A dispute is booked like a refund of its amount (sales-statements.ts DisputeAggregate): the
  // amount taken back and the fee given back (`chargeback_fee_offset`). Its resource is the payment
  // dispute, a v2 resource for a v1 charge's dispute too.
  const chargebacks = db
    .selectFrom('disputes as d')
    .innerJoin('charges as c', (join) => join.onRef('c.account_id', '=', 'd.account_id').onRef('c.livemode', '=', 'd.livemode').onRef('c.charge_id', '=', 'd.charge_id'))
    .leftJoin('payment_flows as f', (join) => join.on(FLOW_OF_CHARGE))
    .$call((q) =>
      branch(q, caller, filter, { kind: 'chargeback', alias: 'd', idColumn: 'dispute_id', resourceId: sql`d.dispute_id`, amount: 'amount', fee: 'chargeback_fee_offset', sign: -1, at: 'created_at' }),
    );
  return db.selectFrom(payments.unionAll(refunds).unionAll(chargebacks).as('t')).selectAll();
}

/** The row id behind a transaction id, or undefined when it cannot be one of ours. */
function rowIdOf(id: string): PaymentTransactionFilter['rowId'] {
  if (!id.startsWith(PAYMENT_TRANSACTION_ID_PREFIX)) return undefined;
  const rowId = id.slice(PAYMENT_TRANSACTION_ID_PREFIX.length);
  const kind = ROW_ID_PREFIX.find(([prefix]) => rowId.startsWith(prefix))?.[1];
  return kind === undefined ? undefined : { kind, id: rowId };
}

async function findPaymentTransaction(db: Kysely<Database>, caller: Caller, id: string, param: string): Promise<PaymentTransactionRow> {
  const rowId = rowIdOf(id);
  const row = rowId === undefined ? undefined : ((await transactions(db, caller, { rowId }).executeTakeFirst()) as PaymentTransactionRow | undefined);
  if (!row) return reject('invalid_id', param, `No such payment transaction: ${id}`);
  return row;
}

/** `payment_transactions.retrieve`: one transaction of the caller's account and mode; unknown → 404. */
export function retrievePaymentTransaction(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<PaymentTransactionRow> {
  return findPaymentTransaction(ctx.db, caller, command.id, 'id');
}

export interface ListPaymentTransactionsCommand {
  readonly page: V2Page;
  /** By term, type and payment method type (no row id: that is retrieve's). */
  readonly filter: Omit<PaymentTransactionFilter, 'rowId'>;
}

/**
 * `payment_transactions.list`: newest first (the instant the money moved, then the id), v2 cursors,
 * and the SDK's filters `term_id`, `type` and `payment_method_type`.
 */
export async function listPaymentTransactions(ctx: Context, caller: Caller, command: ListPaymentTransactionsCommand): Promise<PaymentTransactionRow[]> {
  const { page, filter } = command;
  const cursor = page.cursor === undefined ? undefined : await findPaymentTransaction(ctx.db, caller, page.cursor.id, page.cursor.param);
  return (await transactions(ctx.db, caller, filter)
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.id }, 'id'))
    .execute()) as PaymentTransactionRow[];
}
