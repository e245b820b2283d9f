/**
 * v2 payment refunds (official-sdks.md §2 "Refunds", v2 §6.1 `refund.*`): create (full or
 * partial, never above what the flow captured minus what was refunded), retrieve, update
 * (metadata), list, and a flow's refunds.
 *
 * Money: a refund draws on the flow's capture rows in `charges` (capture 1 first, then the
 * remainder's row), writing one `refunds` row per capture it draws on and handing them to
 * `settleRefunds` in the same transaction, exactly as v1 `charges.refund` does; so the term close
 * books `gross_refund`, `refund_fee_offset` and `refund_platform_fee_offset` for v2 refunds like
 * for v1 ones. Concurrency: every refund locks its flow row first (as capture and cancel do), so
 * two racing refunds see each other's amounts and together never pass the captured amount.
 */
import { sql, type Kysely, type Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database, PaymentRefundsTable } from '../db/schema';
import type { PaymentRefundReason } from '../db/column-types';
import { reject } from '../domain/errors';
import { REFUND_WINDOW_MS } from '../domain/limits';
import { mergeMetadata, type Metadata } from '../domain/metadata';
import { toIsoSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { NetworkClaimLost, recordUnderClaim, recoveryOf, takeNetworkClaim, takeOverClaim, type ClaimFinishers, type NetworkClaim } from '../engine/network-claims';
import type { RefundRequest, SettlementResult } from '../processor/card-network';
import { recordEvent } from '../events/outbox';
import type { Params } from '../operations/params';
import { inV2Page, readV2Page, type V2Page } from '../operations/v2-pagination';
import { findPaymentFlow, type PaymentFlowRow } from '../payment-flows/payment-flow-object';
import { refundCharges } from '../charges/charge-refunds';
import { disputedAmounts } from '../disputes/disputes';

export type PaymentRefundRow = Selectable<PaymentRefundsTable>;

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type PaymentRefundObject = {
  readonly id: string;
  readonly object: 'payment_refund';
  readonly livemode: boolean;
  readonly payment_flow_id: string;
  readonly amount: number;
  readonly currency: 'jpy';
  readonly status: PaymentRefundRow['status'];
  readonly reason: PaymentRefundReason | null;
  readonly metadata: Metadata;
  readonly created_at: string;
  readonly updated_at: string;
};

export function renderPaymentRefund(row: PaymentRefundRow): PaymentRefundObject {
  return {
    id: row.payment_refund_id,
    object: 'payment_refund',
    livemode: row.livemode,
    payment_flow_id: row.payment_flow_id,
    amount: row.amount,
    currency: 'jpy',
    status: row.status,
    reason: row.reason,
    metadata: row.metadata,
    created_at: toIsoSeconds(row.created_at),
    updated_at: toIsoSeconds(row.updated_at),
  };
}

function refundEvent(row: PaymentRefundRow, type: 'refund.created' | 'refund.updated' | 'refund.failed', at: Date) {
  return { accountId: row.account_id, livemode: row.livemode, type, data: renderPaymentRefund(row), at, apiVersion: 'v2' as const };
}

/** The refund `id` of the caller's account and mode, locked when `lock` is set; unknown: `invalid_id` on `param`. */
async function findPaymentRefund(executor: Kysely<Database>, caller: Caller, id: string, options: { readonly param?: string; readonly lock?: boolean } = {}): Promise<PaymentRefundRow> {
  let query = executor
    .selectFrom('payment_refunds')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('payment_refund_id', '=', id);
  if (options.lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) return reject('invalid_id', options.param ?? 'id', `No such payment refund: ${id}`);
  return row;
}

/** How much of each capture a refund of `amount` takes: the first capture first, each at most what it has left. */
export function allocateRefund(captures: readonly { readonly chargeId: string; readonly refundable: number }[], amount: number): { chargeId: string; amount: number }[] {
  const parts: { chargeId: string; amount: number }[] = [];
  let left = amount;
  for (const capture of captures) {
    if (left === 0) break;
    const take = Math.min(left, capture.refundable);
    if (take > 0) parts.push({ chargeId: capture.chargeId, amount: take });
    left -= take;
  }
  if (left !== 0) throw new Error(`refund of ${amount} exceeds what the captures hold`);
  return parts;
}

/** The operation that claims a refund in `network_claims` (src/engine/network-claims.ts). */
const REFUND_OPERATION = 'payment_refunds.create';

/** A refund claimed for the card network: its `pending` row and its claim, both committed. */
interface RefundClaim {
  readonly refund: PaymentRefundRow;
  readonly claim: NetworkClaim;
  /** What the issuer is asked under the refund's id: nothing for PayPay (a wallet outside the card network). */
  readonly requests: readonly RefundRequest[];
  /** A claim left by a crash, taken over: finished, then the request's own refund is made. */
  readonly takenOver: boolean;
}

/** The flow's captures, locked, with what each has left to refund, less what `pending` refunds (other than `except`) have reserved. */
async function refundableCaptures(trx: Kysely<Database>, flow: PaymentFlowRow, except: string | null) {
  const captures = await trx
    .selectFrom('charges')
    .select(['charge_id', 'amount_captured', 'amount_refunded'])
    .where('account_id', '=', flow.account_id)
    .where('livemode', '=', flow.livemode)
    .where('payment_flow_id', '=', flow.payment_flow_id)
    .orderBy('payment_flow_capture')
    .forUpdate()
    .execute();
  // Read after the lock (the disputes job locks a charge to dispute it): a disputed capture has nothing left to refund.
  const disputed = await disputedAmounts(trx, flow.account_id, flow.livemode, captures.map((c) => c.charge_id));
  const refundable = captures.map((c) => ({ chargeId: c.charge_id, refundable: (c.amount_captured ?? 0) - c.amount_refunded - (disputed.get(c.charge_id) ?? 0) }));
  const pending = await trx
    .selectFrom('payment_refunds')
    .select(({ fn }) => fn.coalesce(fn.sum<number>('amount'), sql<number>`0`).as('reserved'))
    .where('account_id', '=', flow.account_id)
    .where('livemode', '=', flow.livemode)
    .where('payment_flow_id', '=', flow.payment_flow_id)
    .where('status', '=', 'pending')
    .$if(except !== null, (q) => q.where('payment_refund_id', '!=', except!))
    .executeTakeFirstOrThrow();
  const left = refundable.reduce((sum, c) => sum + c.refundable, 0) - Number(pending.reserved);
  return { refundable, left };
}

/** The issuer's half of `refund` on `flow`'s card, under the refund's id: none when the flow was not paid by card. */
function refundRequests(flow: PaymentFlowRow, refund: PaymentRefundRow, at: Date): RefundRequest[] {
  if (flow.card_fingerprint === null) return [];
  return [{ reference: refund.payment_refund_id, authorizationCode: flow.authorization_code ?? '', fingerprint: flow.card_fingerprint, amount: refund.amount, at }];
}

/**
 * The refund's network half and its record (src/engine/network-claims.ts: no row lock across the
 * call): the issuer is asked with no transaction open, under the refund's id as the reference;
 * then recordRefund records the answer while the claim holds.
 */
async function finishRefund(ctx: Context, claimed: RefundClaim): Promise<PaymentRefundRow> {
  const answers = claimed.requests.length === 0 ? [] : await ctx.processor.refund(claimed.requests);
  return recordRefund(ctx, claimed.claim, answers);
}

/**
 * The record step of a refund's claim, in a short transaction on the flow locked again, only while
 * the claim still holds (dropped in the same commit; a claim taken over meanwhile: the taker's
 * record stands, the refund answered as it is). Approved: the money moves exactly as a v1 refund's
 * (`refunds` rows on the captures, settled in the same transaction), `succeeded`, `refund.created`
 * ("a processed refund emits refund.created", v2 §6.1). Refused: `failed`, `refund.failed`, and
 * nothing moves. Dated at the claim's instant.
 */
async function recordRefund(ctx: Pick<Context, 'db' | 'ids' | 'clock' | 'testClock'>, claim: NetworkClaim, answers: readonly SettlementResult[]): Promise<PaymentRefundRow> {
  const caller: Caller = { accountId: claim.accountId, livemode: claim.livemode, kind: 'secret' };
  const at = claim.claimedAt;
  try {
    return await recordUnderClaim(ctx.db, claim, async (trx) => {
      const refund = await findPaymentRefund(trx, caller, claim.resourceId);
      const flow = await findPaymentFlow(trx, caller, refund.payment_flow_id, { lock: true });
      const current = await findPaymentRefund(trx, caller, claim.resourceId, { lock: true });
      if (current.status !== 'pending') return current;
      const [answer] = answers;
      if (answer !== undefined && !answer.ok) {
        const failed = await setRefundStatus(trx, current, 'failed', at);
        await recordEvent(trx, ctx.ids, refundEvent(failed, 'refund.failed', at));
        return failed;
      }
      const { refundable } = await refundableCaptures(trx, flow, current.payment_refund_id);
      const parts = allocateRefund(refundable, current.amount).map((part) => ({
        accountId: current.account_id,
        livemode: current.livemode,
        chargeId: part.chargeId,
        amount: part.amount,
        reason: current.reason,
        paymentRefundId: current.payment_refund_id,
      }));
      await refundCharges(trx, ctx, parts, at);
      const succeeded = await setRefundStatus(trx, current, 'succeeded', at);
      await recordEvent(trx, ctx.ids, refundEvent(succeeded, 'refund.created', at));
      return succeeded;
    });
  } catch (error) {
    if (error instanceof NetworkClaimLost) return findPaymentRefund(ctx.db, caller, claim.resourceId);
    throw error;
  }
}

/** How the hold-expiry job finishes a refund whose request died at the network (recoverLapsedClaims). */
export function paymentRefundFinishers(ctx: Pick<Context, 'db' | 'ids' | 'clock' | 'testClock'>): ClaimFinishers {
  return { [REFUND_OPERATION]: async (claim, answers) => void (await recordRefund(ctx, claim, answers)) };
}

async function setRefundStatus(trx: Kysely<Database>, row: PaymentRefundRow, status: PaymentRefundRow['status'], at: Date): Promise<PaymentRefundRow> {
  return trx
    .updateTable('payment_refunds')
    .set({ status, updated_at: at })
    .where('account_id', '=', row.account_id)
    .where('livemode', '=', row.livemode)
    .where('payment_refund_id', '=', row.payment_refund_id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** A refund to make (parameters read by the v2 codec, src/api/v2/payment-refunds.ts). */
export interface CreatePaymentRefundCommand {
  readonly flowId: string;
  /** Omitted: everything still refundable. */
  readonly amount: number | undefined;
  readonly reason: PaymentRefundReason | null;
  readonly metadata: Metadata;
}

export interface UpdatePaymentRefundCommand {
  readonly id: string;
  /** The metadata as sent, merged (and checked) against the refund's own once it is found; undefined when not sent. */
  readonly metadata?: unknown;
}

export interface ListPaymentFlowRefundsCommand {
  readonly flowId: string;
  /** The pagination parameters as sent, read once the flow is found (an unknown flow is refused first). */
  readonly pageParams: Params;
}

/**
 * `payment_refunds.create`: a refund of `amount` (omitted = everything still refundable) on the
 * flow `flowId`. Refused: a flow that captured nothing (`invalid_status`), one refunded in full
 * (`already_refunded`), an amount above what is left (`refund_amount_gt_net` on `amount`), past the
 * 180-day window from the flow's creation (`refund_limit_exceeded`, service rules §2).
 *
 * Three steps, as a capture: a short transaction on the flow's row (the lock serialises it with
 * every other refund and capture of the flow) checks and commits the refund `pending`, which
 * reserves its amount against racing refunds; the card network is asked; finishRefund records the
 * answer (`succeeded`, or `failed` when the issuer refuses: answered 200 with the failed refund, as
 * the SDK's PaymentRefund has the status for it). A `pending` refund left by a crash is taken over
 * after the lease by the flow's next refund request, which finishes it (the same reference at the
 * network) before making its own.
 */
export async function createPaymentRefund(ctx: Context, caller: Caller, command: CreatePaymentRefundCommand): Promise<PaymentRefundRow> {
  const { flowId, amount: requested, reason, metadata } = command;
  for (;;) {
    const claim = await ctx.db.transaction().execute(async (trx): Promise<RefundClaim> => {
      const flow = await findPaymentFlow(trx, caller, flowId, { lock: true, param: 'payment_flow_id' });
      const now = ctx.clock.now();
      // A refund whose request died at the network (its claim lapsed): taken over and finished first.
      // SKIP LOCKED: a claim being recorded or taken over by the hold-expiry job is theirs.
      const lapsed = await trx
        .selectFrom('payment_refunds as r')
        .innerJoin('network_claims as c', (join) =>
          join
            .onRef('c.account_id', '=', 'r.account_id')
            .onRef('c.livemode', '=', 'r.livemode')
            .on('c.resource', '=', 'payment_refund')
            .onRef('c.resource_id', '=', 'r.payment_refund_id'),
        )
        .selectAll('r')
        .select(['c.claimed_at as claimed_at', 'c.operation as operation', 'c.recovery as recovery'])
        .where('r.account_id', '=', flow.account_id)
        .where('r.livemode', '=', flow.livemode)
        .where('r.payment_flow_id', '=', flow.payment_flow_id)
        .where('r.status', '=', 'pending')
        .where('c.lease_until', '<=', now)
        .orderBy('r.created_at')
        .limit(1)
        .forUpdate(['r', 'c'])
        .skipLocked()
        .executeTakeFirst();
      if (lapsed !== undefined) {
        const { claimed_at: claimedAt, operation, recovery, ...row } = lapsed;
        const taken = await takeOverClaim(trx, { accountId: row.account_id, livemode: row.livemode, resource: 'payment_refund', resourceId: row.payment_refund_id, operation, claimedAt }, now);
        if (taken !== undefined) {
          // Asked again as first asked: the same references, the same answers.
          const requests = recoveryOf(recovery).refunds ?? [];
          return { refund: await setRefundStatus(trx, row, 'pending', now), claim: taken, requests, takenOver: true };
        }
      }
      if (flow.amount_received === 0) return reject('invalid_status', 'payment_flow_id', `a payment flow that is ${flow.status} has captured nothing to refund`);
      if (now.getTime() > flow.created_at.getTime() + REFUND_WINDOW_MS) reject('refund_limit_exceeded', 'payment_flow_id', `payment flow ${flowId} is more than 180 days old`);
      const { left } = await refundableCaptures(trx, flow, null);
      if (left <= 0) return reject('already_refunded', 'payment_flow_id', `payment flow ${flowId} is already refunded in full`);
      const amount = requested ?? left;
      if (amount > left) return reject('refund_amount_gt_net', 'amount', `amount ${amount} is above the ${left} yen left to refund`);
      const refund = await trx
        .insertInto('payment_refunds')
        .values({
          account_id: caller.accountId,
          livemode: caller.livemode,
          payment_refund_id: ctx.ids.next('paymentRefund'),
          payment_flow_id: flow.payment_flow_id,
          amount,
          status: 'pending',
          reason,
          metadata: JSON.stringify(metadata),
          created_at: now,
          updated_at: now,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      const requests = refundRequests(flow, refund, now);
      const claim = await takeNetworkClaim(trx, { accountId: refund.account_id, livemode: refund.livemode, resource: 'payment_refund', resourceId: refund.payment_refund_id }, REFUND_OPERATION, now, { authorizations: [], refunds: requests });
      return { refund, claim, requests, takenOver: false };
    });
    const row = await finishRefund(ctx, claim);
    if (!claim.takenOver) return row;
  }
}

export function retrievePaymentRefund(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<PaymentRefundRow> {
  return findPaymentRefund(ctx.db, caller, command.id);
}

/** `payment_refunds.update`: `metadata` under v2 §2.6 rules 3–5; `refund.updated`. */
export async function updatePaymentRefund(ctx: Context, caller: Caller, command: UpdatePaymentRefundCommand): Promise<PaymentRefundRow> {
  const { id } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findPaymentRefund(trx, caller, id, { lock: true });
    const metadata = command.metadata === undefined ? current.metadata : mergeMetadata(current.metadata, command.metadata, 'v2');
    const updated = await trx
      .updateTable('payment_refunds')
      .set({ metadata: JSON.stringify(metadata), updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('payment_refund_id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    await recordEvent(trx, ctx.ids, refundEvent(updated, 'refund.updated', now));
    return updated;
  });
}

async function listRefunds(ctx: Context, caller: Caller, page: V2Page, flowId: string | undefined): Promise<PaymentRefundRow[]> {
  const cursor = page.cursor === undefined ? undefined : await findPaymentRefund(ctx.db, caller, page.cursor.id, { param: page.cursor.param });
  return ctx.db
    .selectFrom('payment_refunds')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(flowId !== undefined, (q) => q.where('payment_flow_id', '=', flowId!))
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.payment_refund_id }, 'payment_refund_id'))
    .execute();
}

/** `payment_refunds.list`: every refund of the account and mode, newest first, with cursors. */
export function listPaymentRefunds(ctx: Context, caller: Caller, command: { readonly page: V2Page }): Promise<PaymentRefundRow[]> {
  return listRefunds(ctx, caller, command.page, undefined);
}

/** `payment_flows.list_refunds` (`GET /v2/payment_flows/{id}/refunds`): the flow's refunds, newest first, and the page read. */
export async function listPaymentFlowRefunds(ctx: Context, caller: Caller, command: ListPaymentFlowRefundsCommand): Promise<{ rows: PaymentRefundRow[]; page: V2Page }> {
  await findPaymentFlow(ctx.db, caller, command.flowId);
  const page = readV2Page(command.pageParams);
  return { rows: await listRefunds(ctx, caller, page, command.flowId), page };
}
