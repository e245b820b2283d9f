/**
 * The money side of the subscription operations: the charge a create, plan change or resume makes
 * before anything changes ("charge first", service rules §1.3), and the pro-rata refund of a
 * delete (§1.6). Every charge goes through chargeCards.
 */
import type { Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { refundCharges } from '../charges/charge-refunds';
import { authorizationOf, chargeCards, renderCharge, type ChargeOutcome, type ChargeRequest, type ChargeRow } from '../charges/charges';
import type { CardRow } from '../customers/card-object';
import type { Database } from '../db/schema';
import { KessaiError } from '../domain/errors';
import { assertProratedRefundAllowed, proratedRefund } from '../domain/proration';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import type { AuthorizationRequest } from '../processor/card-network';
import type { SubscriptionRow } from './subscription-object';

/**
 * What a charging operation's transaction ends with. A declined charge is not thrown inside the
 * transaction: its charge row and `charge.failed` event must be kept (v1 shows failed charges),
 * while the subscription stays as it was. The transaction commits, and `settle` throws afterwards.
 */
export type Settled<T> = { readonly done: T } | { readonly declined: KessaiError };

/** The operation's result, or the card error of its declined charge (402, `error.charge` set). */
export function settle<T>(result: Settled<T>): T {
  if ('declined' in result) throw result.declined;
  return result.done;
}

export interface SubscriptionChargeRequest {
  readonly caller: Caller;
  readonly customerId: string;
  readonly card: CardRow;
  readonly amount: number;
  readonly at: Date;
  readonly subscriptionId: string;
  /** The start of the period the charge pays for. */
  readonly periodStart: Date;
  /** The paid charge already holding that period start, if any (ChargeRequest.follows). */
  readonly follows?: string;
}

export type SubscriptionChargeOutcome = { readonly status: 'succeeded'; readonly row: ChargeRow } | { readonly status: 'declined'; readonly error: KessaiError };

/** The card error a declined subscription charge fails its operation with (402, `error.charge` set). */
export function cardDeclined(outcome: Extract<ChargeOutcome, { status: 'failed' }>): KessaiError {
  return new KessaiError(outcome.code, { charge: outcome.row.charge_id, message: outcome.message });
}

/** The charge request of a subscription charge (kind `charge`). */
function chargeRequestOf(request: SubscriptionChargeRequest): ChargeRequest {
  return {
    accountId: request.caller.accountId,
    livemode: request.caller.livemode,
    customerId: request.customerId,
    card: request.card,
    amount: request.amount,
    at: request.at,
    kind: 'charge',
    subscriptionId: request.subscriptionId,
    periodStart: request.periodStart,
    ...(request.follows === undefined ? {} : { follows: request.follows }),
  };
}

/** The authorization chargeSubscription asks the network for (its reference names the subscription and period, not a charge id). */
export function subscriptionAuthorization(request: SubscriptionChargeRequest): AuthorizationRequest {
  return authorizationOf(chargeRequestOf(request), request.subscriptionId);
}

/**
 * One customer-present charge for a subscription (kind `charge`: the buyer is acting, unlike a
 * renewal). Writes the charge row and its event either way.
 */
export async function chargeSubscription(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'processor' | 'clock'>, request: SubscriptionChargeRequest): Promise<SubscriptionChargeOutcome> {
  const [outcome] = await chargeCards(trx, ctx, [chargeRequestOf(request)]);
  if (outcome === undefined || outcome.status === 'duplicate') {
    // The subscription row is locked, so only a second call at the very same instant gets here.
    throw new Error(`subscription ${request.subscriptionId} already has a charge for the period starting ${request.periodStart.toISOString()}`);
  }
  if (outcome.status === 'failed') return { status: 'declined', error: cardDeclined(outcome) };
  return { status: 'succeeded', row: outcome.row };
}

/** How a delete asked for its refund: `prorate=true` sent, or the subscription's own flag (v1 §4.6 rule 3). */
export type RefundRequest = 'explicit' | 'by_subscription';

/**
 * §1.6 delete with prorate: refunds floor(last charge × remaining UTC days / period days) of the
 * last charge, recorded on the charge row (`amount_refunded`, `refunded` when full, no reason)
 * and as a `refunds` row (settlement counts it in the term of the delete),
 * with a `charge.refunded` event. Returns the refunded yen (0 when nothing is left to refund).
 *
 * The period the last charge paid for runs from its `period_start` to the current period end; a
 * charge for an earlier period than the current one (a plan change that started a trial since)
 * has nothing left to refund. Past the 180-day window: `cannot_prorated_refund_of_subscription`
 * when prorate was sent; a refund asked for only by the subscription's flag is skipped instead,
 * so that a plain delete always succeeds.
 */
export async function refundRemainder(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'clock'>, subscription: SubscriptionRow, at: Date, request: RefundRequest): Promise<number> {
  if (subscription.last_charge_id === null) return 0;
  const charge = await trx
    .selectFrom('charges')
    .selectAll()
    .where('account_id', '=', subscription.account_id)
    .where('livemode', '=', subscription.livemode)
    .where('charge_id', '=', subscription.last_charge_id)
    .forUpdate()
    .executeTakeFirst();
  if (!charge || !charge.paid) return 0;
  if (request === 'explicit') assertProratedRefundAllowed(charge.created_at, at);
  else {
    try {
      assertProratedRefundAllowed(charge.created_at, at);
    } catch (error) {
      if (error instanceof KessaiError) return 0;
      throw error;
    }
  }
  const paidFrom = charge.period_start ?? charge.created_at;
  if (paidFrom.getTime() < subscription.current_period_start.getTime() || paidFrom.getTime() >= subscription.current_period_end.getTime()) return 0;
  const due = proratedRefund(charge.amount, paidFrom, subscription.current_period_end, at);
  const refund = Math.min(due, charge.amount - charge.amount_refunded);
  if (refund <= 0) return 0;
  const amountRefunded = charge.amount_refunded + refund;
  const refunded: ChargeRow = { ...charge, amount_refunded: amountRefunded, refunded: amountRefunded === charge.amount, refund_reason: null, updated_at: at };
  await refundCharges(trx, ctx, [{ accountId: charge.account_id, livemode: charge.livemode, chargeId: charge.charge_id, amount: refund, reason: null, chargeRefundReason: null }], at);
  const card = await trx
    .selectFrom('cards')
    .selectAll()
    .where('account_id', '=', charge.account_id)
    .where('livemode', '=', charge.livemode)
    .where('card_id', '=', charge.card_id)
    .executeTakeFirstOrThrow();
  await recordEvent(trx, ctx.ids, { accountId: charge.account_id, livemode: charge.livemode, type: 'charge.refunded', data: renderCharge(refunded, card), at });
  return refund;
}
