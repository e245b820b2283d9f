/** Each expired flow's end: succeeded when something was captured, else canceled, at its capture deadline. */
const EXPIRED_FLOW_COLUMNS = bulkColumns<PaymentFlowRow>()({
  a: ['text', 'account_id'],
  l: ['boolean', 'livemode'],
  id: ['text', 'payment_flow_id'],
  s: ['text', (flow) => (flow.amount_received > 0 ? 'succeeded' : 'canceled')],
  t: ['instant', 'capture_before'],
});

/**
 * The v2 hold-expiry job's feature code (service rules §3: "A hold that lapses cancels the flow
 * with reason `expired` (event `payment_flow.canceled`)"): every flow in requires_capture whose
 * `capture_before` has come by the slot gives its hold back, in batches, each one transaction:
 *
 *   1. lock the due flows (ORDER BY capture_before …, FOR UPDATE SKIP LOCKED, LIMIT batch size);
 *   2. release their holds through the card network in one bulk call (PayPay holds have no card);
 *   3. write every flow with one `UPDATE … FROM json_to_recordset(…)`;
 *   4. write the events with one `recordEvents`.
 *
 * A flow that was never captured is `canceled` with `cancellation_reason` `expired`. **Decision:**
 * a flow with one partial capture keeps the money it received: the remainder is released
 * ("unconfirmed amount remaining after capture is cancelled automatically", v2 §3) and the flow is
 * `succeeded` with `payment_flow.succeeded`, since a flow that took money was not canceled.
 *
 * Every instant written is the flow's own `capture_before`, never the slot or the wall clock. The
 * same transaction moves the flow out of requires_capture, so a replayed slot or a second worker
 * finds nothing left; the status condition of the UPDATE is the last line of defence.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema';
import type { Context } from '../engine/context';
import { inAccounts } from '../db/account-scope';
import { dueAccounts, earliestDueAt } from '../engine/account-batches';
import { customerInScope, LIVE_BOOK, type JobScope } from '../test-clocks/clock-scope';
import { runBatches, type JobCounts, type SlotRun } from '../engine/job';
import { recordEvents } from '../events/outbox';
import { flowEvent } from './payment-flows';
import { recordDebitReturns } from './debit-returns';
import type { PaymentFlowRow } from './payment-flow-object';
import { bulkColumns, compositeKey } from '../db/bulk-rows';

export type FlowExpiryCounts = {
  /** Flows canceled with reason `expired`. */
  readonly canceled: number;
  /** Partially captured flows whose remainder was released (now succeeded). */
  readonly remainder_released: number;
  /** Holds given back through the card network. */
  readonly released: number;
  readonly batches: number;
};

export async function expireDuePaymentFlows(ctx: Context, run: SlotRun): Promise<FlowExpiryCounts & JobCounts> {
  return runBatches(
    ctx,
    run,
    ['canceled', 'remainder_released', 'released'],
    (db, cap, among) => dueAccounts(db, 'payment_flows', sql`d.status = 'requires_capture' AND d.capture_before <= ${run.slot} AND ${customerInScope(ctx, 'd', among)}`, cap, among),
    (trx, accountIds, limit) => expireFlowBatch(trx, ctx, accountIds, run.slot, limit),
  );
}

/** The earliest `capture_before` of a held flow strictly after `after`, or null. */
export async function nextFlowExpiryDueAt(db: Kysely<Database>, after: Date, scope: JobScope = LIVE_BOOK): Promise<Date | null> {
  return earliestDueAt(db, 'payment_flows', 'capture_before', sql`d.status = 'requires_capture' AND ${customerInScope(scope, 'd')}`, after);
}

/** One batch of the accounts' due flows inside the caller's transaction; `selected` 0 means nothing due is left. */
export async function expireFlowBatch(
  trx: Kysely<Database>,
  ctx: Pick<Context, 'ids' | 'processor' | 'log' | 'testClock'>,
  accountIds: readonly string[],
  asOf: Date,
  limit: number,
): Promise<{ selected: number; canceled: number; remainder_released: number; released: number }> {
  const due = await trx
    .selectFrom('payment_flows')
    .selectAll()
    .where(inAccounts('account_id', accountIds))
    .where('status', '=', 'requires_capture')
    .where('capture_before', '<=', asOf)
    .where(customerInScope(ctx, 'payment_flows', accountIds))
    .orderBy('capture_before')
    .orderBy('account_id')
    .orderBy('livemode')
    .orderBy('payment_flow_id')
    .limit(limit)
    .forUpdate()
    .skipLocked()
    .execute();
  if (due.length === 0) return { selected: 0, canceled: 0, remainder_released: 0, released: 0 };

  const withCard = due.filter((flow) => flow.card_fingerprint !== null && flow.amount_capturable > 0);
  const results = await ctx.processor.release(
    withCard.map((flow) => ({ reference: flow.payment_flow_id, authorizationCode: flow.authorization_code ?? '', amount: flow.amount_capturable, at: flow.capture_before! })),
  );
  // The simulated network never refuses a release; a real one that did would leave the hold to lapse
  // at the issuer anyway, so the flow still ends here (logged, never stalling the batch).
  for (const result of results) {
    if (!result.ok) ctx.log.warn({ payment_flow: result.reference, code: result.code }, 'hold release refused by the network; the flow ends anyway');
  }

  const u = EXPIRED_FLOW_COLUMNS.table('u', due);
  const instant = u.col('t');
  const updated = await sql<PaymentFlowRow>`
    UPDATE payment_flows f SET
      status = ${u.col('s')},
      cancellation_reason = CASE WHEN ${u.col('s')} = 'canceled' THEN 'expired' ELSE f.cancellation_reason END,
      canceled_at = CASE WHEN ${u.col('s')} = 'canceled' THEN ${instant} ELSE f.canceled_at END,
      amount_capturable = 0,
      updated_at = ${instant}
    FROM ${u.from}
    WHERE ${inAccounts('f.account_id', accountIds)} AND f.account_id = ${u.col('a')} AND f.livemode = ${u.col('l')} AND f.payment_flow_id = ${u.col('id')} AND f.status = 'requires_capture'
    RETURNING f.*`.execute(trx);
  // Events in due order, as the flows were selected.
  const byKey = new Map(updated.rows.map((row) => [compositeKey(row.account_id, row.livemode, row.payment_flow_id), row]));
  const events = due.flatMap((flow) => {
    const row = byKey.get(compositeKey(flow.account_id, flow.livemode, flow.payment_flow_id));
    return row === undefined ? [] : [flowEvent(row, row.status === 'canceled' ? 'payment_flow.canceled' : 'payment_flow.succeeded', flow.capture_before!)];
  });
  // A debit or prepaid card was debited at authorization: the lapse sends the debit back (service
  // rules §2.1: "an expiry … refunds all"), as a refund of the flow.
  const returns = updated.rows
    .filter((row) => row.status === 'canceled')
    .map((row) => {
      const debited = due.find((flow) => flow.account_id === row.account_id && flow.livemode === row.livemode && flow.payment_flow_id === row.payment_flow_id)!;
      return { flow: row, amount: debited.amount_capturable, at: debited.capture_before! };
    });
  events.push(...(await recordDebitReturns(trx, ctx.ids, returns)));
  await recordEvents(trx, ctx.ids, events);
  const canceled = updated.rows.filter((row) => row.status === 'canceled').length;
  return { selected: due.length, canceled, remainder_released: updated.rows.length - canceled, released: results.filter((r) => r.ok).length };
}
