/**
 * Captured money given back on charges, the one way every refund that moves no money through the
 * network here records it: a `refunds` row per part, the charge's `amount_refunded` and `refunded`
 * (refunded in full once it reaches what was captured), and the refunds settled into the open
 * term (settleRefunds), all in the caller's transaction.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema';
import type { Context } from '../engine/context';
import { settleRefunds } from '../settlement/capture';

/** One charge's part of a refund. */
export interface ChargeRefundPart {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly chargeId: string;
  /** Yen, at least 1 and at most what is left to refund on the charge (the caller checked). */
  readonly amount: number;
  /** The `refunds` row's reason. */
  readonly reason: string | null;
  /** The v2 payment refund the part belongs to, if any. */
  readonly paymentRefundId?: string;
  /** Written on the charge's `refund_reason` when given; left alone when undefined. */
  readonly chargeRefundReason?: string | null;
}

/** Records the parts (see the module); returns their refund ids, drawn in order. */
export async function refundCharges(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'clock' | 'testClock'>, parts: readonly ChargeRefundPart[], at: Date): Promise<string[]> {
  if (parts.length === 0) return [];
  const refundIds = parts.map(() => ctx.ids.next('refund'));
  await trx
    .insertInto('refunds')
    .values(parts.map((part, k) => ({ account_id: part.accountId, livemode: part.livemode, refund_id: refundIds[k]!, charge_id: part.chargeId, amount: part.amount, reason: part.reason, created_at: at, payment_refund_id: part.paymentRefundId ?? null })))
    .execute();
  for (const part of parts) {
    await trx
      .updateTable('charges')
      .set({
        amount_refunded: sql<number>`amount_refunded + ${part.amount}`,
        refunded: sql<boolean>`amount_refunded + ${part.amount} >= amount_captured`,
        ...(part.chargeRefundReason === undefined ? {} : { refund_reason: part.chargeRefundReason }),
        updated_at: at,
      })
      .where('account_id', '=', part.accountId)
      .where('livemode', '=', part.livemode)
      .where('charge_id', '=', part.chargeId)
      .execute();
  }
  await settleRefunds(trx, ctx, parts.map((part, k) => ({ accountId: part.accountId, livemode: part.livemode, refundId: refundIds[k]! })));
  return refundIds;
}
