/**
 * Disputes (chargebacks), read-only as the v2 SDK has them (`getPaymentDispute`,
 * `getAllPaymentDisputes`; v2 §6.1 `dispute.created`).
 *
 * Where they come from: the simulated card network's dispute cards (src/processor/test-cards.ts)
 * have every captured charge disputed a set number of days after its capture. Settlement writes
 * that instant on the charge as it settles the capture (`charges.dispute_due_at`, capture.ts), and
 * the `disputes.open` job opens the dispute at it:
 *
 *   1. lock the due charges (ORDER BY dispute_due_at …, FOR UPDATE SKIP LOCKED, LIMIT batch size);
 *   2. the disputed amount: what the charge captured minus what was refunded of it by then (a
 *      charge refunded in full has nothing left to dispute and gets no dispute);
 *   3. open the term containing the dispute instant (or the next open one) and compute the offsets
 *      as for a refund of the disputed amount (fees.ts refundBreakdown);
 *   4. insert the disputes (one per charge: the unique key is the last line of defence), clear the
 *      charges' `dispute_due_at`, and write `dispute.created`, all in the batch's transaction.
 *
 * Every instant written is the charge's own dispute instant, never the slot: a late slot opens the
 * same disputes, dated the same, as a punctual one. A replayed slot or a second worker finds
 * nothing left (the due instant is cleared in the same transaction).
 *
 * The money: the term close books each dispute's `chargeback`, `chargeback_fee_offset` and
 * `chargeback_platform_fee_offset` (sales-statements.ts), so statements stay conserved.
 */
import { sql, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { inAccounts } from '../db/account-scope';
import { bulkColumns, compositeKey, ROW_KEYS } from '../db/bulk-rows';
import type { PaymentDisputeStatus } from '../db/column-types';
import type { Database, DisputesTable } from '../db/schema';
import { reject } from '../domain/errors';
import { refundBreakdown, type PlatformSplit } from '../domain/fees';
import type { Metadata } from '../domain/metadata';
import type { TermCycle } from '../domain/terms';
import { MS_PER_DAY, toIsoSeconds } from '../domain/time';
import { dueAccounts, earliestDueAt } from '../engine/account-batches';
import { bookOf, customerInScope, LIVE_BOOK, type JobScope } from '../test-clocks/clock-scope';
import type { Context } from '../engine/context';
import { runBatches, type JobCounts, type SlotRun } from '../engine/job';
import { recordEvents, type EventInput } from '../events/outbox';
import { inV2Page, type V2Page } from '../operations/v2-pagination';
import { disputeOfCapture } from '../processor/test-cards';
import { openTermIdsOpening } from '../settlement/terms';

export type DisputeRow = Selectable<DisputesTable>;

/**
 * **Decision:** a dispute opens as `needs_response` (the SDK's チャージバック: the card network has
 * taken the money back) with `due_by` this many days later, the merchant's deadline to answer.
 * kessai models no answer, so the status stays; the money is booked at the term close.
 */
export const DISPUTE_STATUS_AT_OPENING: PaymentDisputeStatus = 'needs_response';
export const DISPUTE_RESPONSE_DAYS = 14;

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type PaymentDisputeObject = {
  readonly id: string;
  readonly object: 'payment_dispute';
  readonly livemode: boolean;
  /** The v2 flow of the disputed capture; null for a v1 charge (named by `charge_id`). */
  readonly payment_flow_id: string | null;
  readonly charge_id: string;
  readonly amount: number;
  readonly currency: 'jpy';
  readonly status: PaymentDisputeStatus;
  readonly reason: string | null;
  readonly due_by: string | null;
  readonly payment_method_type: 'card';
  readonly metadata: Metadata;
  readonly created_at: string;
  readonly updated_at: string;
};

export function renderPaymentDispute(row: DisputeRow): PaymentDisputeObject {
  return {
    id: row.dispute_id,
    object: 'payment_dispute',
    livemode: row.livemode,
    payment_flow_id: row.payment_flow_id,
    charge_id: row.charge_id,
    amount: row.amount,
    currency: 'jpy',
    status: row.status,
    reason: row.reason,
    due_by: row.due_by === null ? null : toIsoSeconds(row.due_by),
    // Only cards are disputed: PayPay and Apple Pay payments have no test card that disputes.
    payment_method_type: 'card',
    metadata: row.metadata,
    created_at: toIsoSeconds(row.created_at),
    updated_at: toIsoSeconds(row.updated_at),
  };
}

function disputeEvent(row: DisputeRow): EventInput {
  return { accountId: row.account_id, livemode: row.livemode, type: 'dispute.created', data: renderPaymentDispute(row), at: row.created_at, apiVersion: 'v2' };
}

/**
 * The fingerprint of the card a charge (row alias `c`) was made with: the v2 flow's card for a
 * flow's capture, else the stored card or the token's card (v1). Null for PayPay.
 */
export function chargeCardFingerprint(c: string, accountIds: readonly string[]): RawBuilder<string | null> {
  const col = (name: string) => sql.ref(`${c}.${name}`);
  const same = (alias: string) => sql`${inAccounts(`${alias}.account_id`, accountIds)} AND ${sql.ref(`${alias}.account_id`)} = ${col('account_id')} AND ${sql.ref(`${alias}.livemode`)} = ${col('livemode')}`;
  return sql<string | null>`coalesce(
    (SELECT f.card_fingerprint FROM payment_flows f WHERE ${same('f')} AND f.payment_flow_id = ${col('payment_flow_id')}),
    (SELECT cd.fingerprint FROM cards cd WHERE ${same('cd')} AND cd.card_id = ${col('card_id')}),
    (SELECT tk.fingerprint FROM tokens tk WHERE ${same('tk')} AND tk.card_id = ${col('card_id')}))`;
}

/** When the charge's card has it disputed: the capture's dispute instant, or null (capture.ts). */
export function disputeDueAt(fingerprint: string | null, capturedAt: Date): Date | null {
  return disputeOfCapture(fingerprint, capturedAt)?.at ?? null;
}

// ---------------------------------------------------------------------------------------------
// The job
// ---------------------------------------------------------------------------------------------

export type DisputeOpeningCounts = {
  /** Disputes opened. */
  readonly opened: number;
  /** Due charges with nothing left to dispute (refunded in full by then): no dispute. */
  readonly skipped: number;
  readonly batches: number;
};

export async function openDueDisputes(ctx: Context, run: SlotRun): Promise<DisputeOpeningCounts & JobCounts> {
  return runBatches(
    ctx,
    run,
    ['opened', 'skipped'],
    (db, cap, among) => dueAccounts(db, 'charges', sql`d.dispute_due_at <= ${run.slot} AND ${customerInScope(ctx, 'd', among)}`, cap, among),
    (trx, accountIds, limit) => openDisputeBatch(trx, ctx, accountIds, run.slot, limit),
  );
}

/** The earliest dispute instant of a charge strictly after `after`, or null (none pending: the job idles). */
export async function nextDisputeDueAt(db: Kysely<Database>, after: Date, scope: JobScope = LIVE_BOOK): Promise<Date | null> {
  return earliestDueAt(db, 'charges', 'dispute_due_at', sql`d.dispute_due_at IS NOT NULL AND ${customerInScope(scope, 'd')}`, after);
}

interface DueCharge {
  readonly account_id: string;
  readonly livemode: boolean;
  readonly charge_id: string;
  readonly payment_flow_id: string | null;
  readonly amount_captured: number;
  readonly refunded: number;
  readonly fee_rate: string;
  readonly tenant_id: string | null;
  readonly platform_fee: number | null;
  readonly payjp_fee_included: boolean | null;
  readonly dispute_due_at: Date;
  readonly fingerprint: string | null;
  readonly term_cycle: TermCycle;
}

interface NewDispute {
  readonly charge: DueCharge;
  readonly disputeId: string;
  readonly amount: number;
  readonly reason: string | null;
  readonly chargebackFeeOffset: number;
  readonly chargebackPlatformFeeOffset: number;
  readonly termId: string;
}

const NEW_DISPUTE_COLUMNS = bulkColumns<NewDispute>()({
  a: ['text', (d) => d.charge.account_id],
  l: ['boolean', (d) => d.charge.livemode],
  id: ['text', 'disputeId'],
  c: ['text', (d) => d.charge.charge_id],
  f: ['text', (d) => d.charge.payment_flow_id],
  amt: ['bigint', 'amount'],
  r: ['text', 'reason'],
  due: ['instant', (d) => new Date(d.charge.dispute_due_at.getTime() + DISPUTE_RESPONSE_DAYS * MS_PER_DAY)],
  ten: ['text', (d) => d.charge.tenant_id],
  inc: ['boolean', (d) => d.charge.payjp_fee_included ?? false],
  cfo: ['bigint', 'chargebackFeeOffset'],
  cpfo: ['bigint', 'chargebackPlatformFeeOffset'],
  t: ['text', 'termId'],
  at: ['instant', (d) => d.charge.dispute_due_at],
});

/** One batch of the accounts' due charges inside the caller's transaction; `selected` 0 means nothing due is left. */
export async function openDisputeBatch(
  trx: Kysely<Database>,
  ctx: Pick<Context, 'ids' | 'testClock'>,
  accountIds: readonly string[],
  asOf: Date,
  limit: number,
): Promise<{ selected: number; opened: number; skipped: number }> {
  // The due charges are locked alone, with nothing joined: Citus runs no FOR UPDATE across a join
  // and correlated subqueries. Refunds, the card fingerprint and the account's term cycle
  // are read for the locked keys afterwards, so the refunded amount is read under the charge's lock
  // (a refund locks the charge it draws on).
  const locked = await sql<{ a: string; l: boolean; id: string }>`
    SELECT account_id AS a, livemode AS l, charge_id AS id FROM charges
    WHERE ${inAccounts('account_id', accountIds)} AND dispute_due_at <= ${asOf} AND ${customerInScope(ctx, 'charges', accountIds)}
    ORDER BY dispute_due_at, account_id, livemode, charge_id
    LIMIT ${limit}
    FOR UPDATE SKIP LOCKED`.execute(trx);
  if (locked.rows.length === 0) return { selected: 0, opened: 0, skipped: 0 };
  const keys = ROW_KEYS.table('k', locked.rows.map((row) => ({ accountId: row.a, livemode: row.l, id: row.id })));
  const due = await sql<DueCharge>`
    SELECT c.account_id, c.livemode, c.charge_id, c.payment_flow_id, c.amount_captured, c.fee_rate, c.tenant_id, c.platform_fee,
           c.payjp_fee_included, c.dispute_due_at, ${chargeCardFingerprint('c', accountIds)} AS fingerprint, a.term_cycle,
           coalesce((SELECT sum(r.amount) FROM refunds r WHERE ${inAccounts('r.account_id', accountIds)} AND r.account_id = c.account_id AND r.livemode = c.livemode AND r.charge_id = c.charge_id), 0)::bigint AS refunded
    FROM ${keys.from}
    JOIN charges c ON ${inAccounts('c.account_id', accountIds)} AND c.account_id = ${keys.col('a')} AND c.livemode = ${keys.col('l')} AND c.charge_id = ${keys.col('id')}
    JOIN accounts a ON ${inAccounts('a.account_id', accountIds)} AND a.account_id = c.account_id
    ORDER BY c.dispute_due_at, c.account_id, c.livemode, c.charge_id`.execute(trx);
  if (due.rows.length === 0) return { selected: 0, opened: 0, skipped: 0 };

  const disputed = due.rows.filter((charge) => charge.amount_captured - charge.refunded > 0);
  const wants = disputed.map((charge) => ({ accountId: charge.account_id, livemode: charge.livemode, cycle: charge.term_cycle, at: charge.dispute_due_at, testClockId: bookOf(ctx) }));
  const termIds = await openTermIdsOpening(trx, ctx.ids, wants);
  const disputes = disputed.map((charge, i): NewDispute => {
    const amount = charge.amount_captured - charge.refunded;
    const platform: PlatformSplit | null = charge.tenant_id === null ? null : { platformFee: charge.platform_fee ?? 0, payjpFeeIncluded: charge.payjp_fee_included ?? false };
    // A chargeback gives back what a refund of the same amount would (service rules §4 items).
    const split = refundBreakdown({ amount: charge.amount_captured, refunded: amount, feeRate: charge.fee_rate, platform });
    return {
      charge,
      disputeId: ctx.ids.next('paymentDispute'),
      amount,
      reason: disputeOfCapture(charge.fingerprint, charge.dispute_due_at)?.reason ?? null,
      chargebackFeeOffset: split.refundFeeOffset,
      chargebackPlatformFeeOffset: split.refundPlatformFeeOffset,
      termId: termIds[i]!,
    };
  });

  let inserted: DisputeRow[] = [];
  if (disputes.length > 0) {
    const x = NEW_DISPUTE_COLUMNS.table('x', disputes);
    const status = DISPUTE_STATUS_AT_OPENING;
    inserted = (
      await sql<DisputeRow>`
      INSERT INTO disputes (account_id, livemode, dispute_id, charge_id, payment_flow_id, amount, status, reason, due_by, tenant_id, payjp_fee_included,
                            chargeback_fee_offset, chargeback_platform_fee_offset, term_id, created_at, updated_at)
      SELECT ${x.cols('a', 'l', 'id', 'c', 'f', 'amt')}, ${status}, ${x.cols('r', 'due', 'ten', 'inc', 'cfo', 'cpfo', 't', 'at', 'at')}
      FROM ${x.from}
      ON CONFLICT ON CONSTRAINT disputes_one_per_charge DO NOTHING
      RETURNING *`.execute(trx)
    ).rows;
  }
  await sql`
    UPDATE charges c SET dispute_due_at = NULL
    FROM ${keys.from}
    WHERE ${inAccounts('c.account_id', accountIds)} AND c.account_id = ${keys.col('a')} AND c.livemode = ${keys.col('l')} AND c.charge_id = ${keys.col('id')}`.execute(trx);
  // Events in due order, as the charges were selected.
  const byCharge = new Map(inserted.map((row) => [compositeKey(row.account_id, row.livemode, row.charge_id), row]));
  const events = disputes.flatMap((d) => {
    const row = byCharge.get(compositeKey(d.charge.account_id, d.charge.livemode, d.charge.charge_id));
    return row === undefined ? [] : [disputeEvent(row)];
  });
  await recordEvents(trx, ctx.ids, events);
  return { selected: due.rows.length, opened: inserted.length, skipped: due.rows.length - inserted.length };
}

/**
 * What disputes took back of each of the charges, by charge id (absent: not disputed). Refunds read
 * it after locking the charges: a disputed amount went back to the buyer through the card network
 * and cannot be refunded again (the dispute job locks the charge too, so the two never overlap).
 */
export async function disputedAmounts(executor: Kysely<Database>, accountId: string, livemode: boolean, chargeIds: readonly string[]): Promise<Map<string, number>> {
  if (chargeIds.length === 0) return new Map();
  const rows = await executor
    .selectFrom('disputes')
    .select(['charge_id', 'amount'])
    .where('account_id', '=', accountId)
    .where('livemode', '=', livemode)
    .where('charge_id', 'in', chargeIds)
    .execute();
  return new Map(rows.map((row) => [row.charge_id, row.amount]));
}

// ---------------------------------------------------------------------------------------------
// The v2 read operations
// ---------------------------------------------------------------------------------------------

/** The dispute `id` of the caller's account and mode; unknown: `invalid_id` on `param`. */
async function findDispute(executor: Kysely<Database>, caller: Caller, id: string, param = 'id'): Promise<DisputeRow> {
  const row = await executor
    .selectFrom('disputes')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('dispute_id', '=', id)
    .executeTakeFirst();
  if (!row) return reject('invalid_id', param, `No such payment dispute: ${id}`);
  return row;
}

/** `payment_disputes.retrieve` (`GET /v2/payment_disputes/{id}`). */
export function retrievePaymentDispute(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<DisputeRow> {
  return findDispute(ctx.db, caller, command.id);
}

export interface ListPaymentDisputesCommand {
  readonly page: V2Page;
  readonly flowId?: string;
  readonly statuses?: readonly PaymentDisputeStatus[];
}

/**
 * `payment_disputes.list` (`GET /v2/payment_disputes`): the account's disputes, newest first, with
 * cursors; filters by flow and statuses (official-sdks.md, `getAllPaymentDisputes`).
 */
export async function listPaymentDisputes(ctx: Context, caller: Caller, command: ListPaymentDisputesCommand): Promise<DisputeRow[]> {
  const { page, flowId, statuses } = command;
  const cursor = page.cursor === undefined ? undefined : await findDispute(ctx.db, caller, page.cursor.id, page.cursor.param);
  return ctx.db
    .selectFrom('disputes')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(flowId !== undefined, (q) => q.where('payment_flow_id', '=', flowId!))
    .$if(statuses !== undefined, (q) => q.where('status', 'in', statuses!))
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.dispute_id }, 'dispute_id'))
    .execute();
}
