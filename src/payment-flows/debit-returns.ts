/**
 * The money a debit or prepaid card gets back (service rules §2.1: such a card is debited at
 * authorization; "releasing or partially capturing refunds the rest"): each return is a succeeded
 * refund of the flow with `refund.created`, written where the hold ends — the hold-expiry job, a
 * merchant's cancel, a partial capture. No `refunds` row: what comes back was never sold, so
 * settlement has nothing to book (docs/decisions/holds.md "Debit holds on v2: the returned money
 * is a refund of the flow").
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema';
import { debitedAtAuthorization } from '../domain/hold-periods';
import type { Context } from '../engine/context';
import type { EventInput } from '../events/outbox';
import { renderPaymentRefund } from '../payment-refunds/payment-refunds';
import type { PaymentFlowRow } from './payment-flow-object';

export interface HoldReturn {
  readonly flow: Pick<PaymentFlowRow, 'account_id' | 'livemode' | 'payment_flow_id' | 'card_funding'>;
  /** Yen given back: what was still held. */
  readonly amount: number;
  /** When the hold ended. */
  readonly at: Date;
}

/**
 * Writes a succeeded refund for each return of a debited card (other cards, and nothing given
 * back, write none) and answers their `refund.created` events, for the caller to record with its
 * own events in its transaction.
 */
export async function recordDebitReturns(trx: Kysely<Database>, ids: Context['ids'], returns: readonly HoldReturn[]): Promise<EventInput[]> {
  const rows = returns
    .filter((r) => r.amount > 0 && debitedAtAuthorization(r.flow.card_funding))
    .map(({ flow, amount, at }) => ({
      account_id: flow.account_id,
      livemode: flow.livemode,
      payment_refund_id: ids.next('paymentRefund'),
      payment_flow_id: flow.payment_flow_id,
      amount,
      status: 'succeeded' as const,
      reason: null,
      metadata: '{}',
      created_at: at,
      updated_at: at,
    }));
  if (rows.length === 0) return [];
  const refunds = await trx.insertInto('payment_refunds').values(rows).returningAll().execute();
  return refunds.map((refund) => ({ accountId: refund.account_id, livemode: refund.livemode, type: 'refund.created', data: renderPaymentRefund(refund), at: refund.created_at, apiVersion: 'v2' as const }));
}
