/**
 * v2 payment flows (v2 §2.2, §3, §4.2–§4.4, §4.8; service rules §2.1 and §3): create, retrieve,
 * update, confirm (by the browser with the flow's `client_secret`), the completion of a 3-D Secure
 * action, capture (full, or one partial capture then only the full remainder, never above the
 * hold), cancel, and list. Every state change writes its v2 event in the same transaction. The
 * executions take typed commands and return flow rows; parameters and rendering are the v2
 * codec's (src/api/v2/payment-flows.ts).
 *
 * Statuses: requires_payment_method → (payment method attached) requires_confirmation → confirm →
 * requires_action (3-D Secure) → requires_capture (manual) or succeeded (automatic); a declined
 * payment goes back to requires_payment_method with `last_payment_error`; canceled from any status
 * before money moved. A hold that lapses cancels the flow with reason `expired` (hold-expiry.ts).
 *
 * Confirmation (create with confirm=true, confirm, complete_action), capture and cancel of a hold
 * never call the card network while the flow's row is locked: a short transaction claims the flow
 * (`processing`, and a claim in `network_claims`, src/engine/network-claims.ts, committed), the
 * network is asked with no transaction open, and a second short transaction records the answer
 * only if the claim still holds (recordUnderClaim, the claim dropped in the same commit). A second
 * call meanwhile is refused (`invalid_status`); a claim left by a crash is taken over after the
 * lease by the next call of the same kind (confirm or complete_action; capture; cancel), which
 * finishes the same work. The claim's recovery point names that work, so the engine's recovery
 * leaves it to those calls.
 */
import type { Kysely, Updateable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { PaymentMethodType } from '../db/column-types';
import type { Database, PaymentFlowsTable } from '../db/schema';
import { assertCardNotFlagged, recordCardError } from '../customers/card-flags';
import { CARD_CAUSED_ERRORS } from '../domain/card-flags';
import { KessaiError, reject, type ErrorCode } from '../domain/errors';
import { debitedAtAuthorization, holdLapsed, v2HoldExpiresAt, type ExtendedAuthorizationRequest } from '../domain/hold-periods';
import { mergeMetadata, type Metadata } from '../domain/metadata';
import { toIsoSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { liveNetworkClaim, networkClaimAt, NetworkClaimLost, recordUnderClaim, takeNetworkClaimOver, type ClaimedObject, type ClaimFinishers, type HeldClaim, type NetworkClaim } from '../engine/network-claims';
import { recordEvents, type EventInput } from '../events/outbox';
import { sentFields } from '../operations/params';
import { inV2Page, type V2Page } from '../operations/v2-pagination';

import { recordDebitReturns } from './debit-returns';
import { recordFlowCaptures } from './flow-charges';
import { findPaymentFlow, newClientSecret, renderPaymentFlow, type PaymentFlowRow } from './payment-flow-object';
import { needsThreeDSecure, paymentMethodColumns, resolvePaymentMethod, storedPaymentMethod, type PaymentMethodSnapshot } from './payment-method';

export const FLOW_CURRENCY = 'jpy';

/** Reasons a merchant may give when canceling (`expired` is the hold-expiry job's own). */
export const CANCELLATION_REASONS = ['duplicate', 'fraudulent', 'requested_by_customer', 'abandoned'] as const;
export type CancellationReason = (typeof CANCELLATION_REASONS)[number];

/** Statuses a flow can still be confirmed from. */
const CONFIRMABLE = new Set<PaymentFlowRow['status']>(['requires_payment_method', 'requires_confirmation']);
/** Statuses before confirmation, when amount and methods may still change. */
const UNCONFIRMED = CONFIRMABLE;

export function flowEvent(row: PaymentFlowRow, type: string, at: Date): EventInput {
  return { accountId: row.account_id, livemode: row.livemode, type, data: renderPaymentFlow(row), at, apiVersion: 'v2' };
}

/** A method the flow does not accept is refused before anything else happens. */
export function assertMethodAllowed(types: readonly PaymentMethodType[], type: PaymentMethodType): void {
  if (!types.includes(type)) reject('no_allowed_param', 'payment_method_type', `this payment flow accepts ${types.join(', ')}, not ${type}`);
}

/**
 * The hold a manual-capture flow would take with this method at `at`: refuses `must_extend` where
 * the rule cannot extend (service rules §2.1; v2 §4.2 "With must_extend on a card issued overseas
 * the request fails"). `payment_method_options.card` applies to card payments, Apple Pay included
 * (an Apple Pay payment is a card payment; §2.1 gives it the card rows); PayPay ignores it.
 */
export function holdFor(flow: Pick<PaymentFlowRow, 'request_extended_authorization'>, snapshot: PaymentMethodSnapshot, at: Date) {
  const request = snapshot.type === 'paypay' ? undefined : (flow.request_extended_authorization ?? undefined);
  return v2HoldExpiresAt(snapshot.type, snapshot.card?.issuer ?? 'domestic', at, request);
}

async function saveFlow(trx: Kysely<Database>, row: PaymentFlowRow, changes: Updateable<PaymentFlowsTable>): Promise<PaymentFlowRow> {
  return trx
    .updateTable('payment_flows')
    .set(changes)
    .where('account_id', '=', row.account_id)
    .where('livemode', '=', row.livemode)
    .where('payment_flow_id', '=', row.payment_flow_id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

async function assertCustomer(trx: Kysely<Database>, caller: Caller, customerId: string): Promise<void> {
  const found = await trx
    .selectFrom('customers')
    .select('customer_id')
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('customer_id', '=', customerId)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  if (!found) reject('invalid_id', 'customer', `No such customer: ${customerId}`);
}

export interface NewFlowInput {
  readonly amount: number;
  readonly captureMethod: 'automatic' | 'manual';
  readonly paymentMethodTypes: readonly PaymentMethodType[];
  readonly extendedAuthorization: ExtendedAuthorizationRequest | undefined;
  readonly metadata: Metadata;
  readonly customerId: string | null;
  readonly description: string | null;
  readonly checkoutSessionId: string | null;
}

/** Inserts a new flow (status requires_payment_method) and writes `payment_flow.created`. */
export async function insertPaymentFlow(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, caller: Caller, input: NewFlowInput, at: Date): Promise<PaymentFlowRow> {
  const id = ctx.ids.next('paymentFlow');
  const row = await trx
    .insertInto('payment_flows')
    .values({
      account_id: caller.accountId,
      livemode: caller.livemode,
      payment_flow_id: id,
      status: 'requires_payment_method',
      amount: input.amount,
      currency: FLOW_CURRENCY,
      capture_method: input.captureMethod,
      payment_method_types: JSON.stringify(input.paymentMethodTypes),
      request_extended_authorization: input.extendedAuthorization ?? null,
      client_secret: newClientSecret(ctx.ids, id),
      customer_id: input.customerId,
      description: input.description,
      ...paymentMethodColumns(null),
      authorization_code: null,
      authorized_at: null,
      capture_before: null,
      three_d_secure_status: null,
      next_action: null,
      last_payment_error: null,
      cancellation_reason: null,
      canceled_at: null,
      checkout_session_id: input.checkoutSessionId,
      metadata: JSON.stringify(input.metadata),
      created_at: at,
      updated_at: at,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await recordEvents(trx, ctx.ids, [flowEvent(row, 'payment_flow.created', at)]);
  return row;
}

/** A new flow, its parameters checked (src/api/v2/payment-flows.ts); `methodId` / `methodType` attach a method now. */
export interface CreatePaymentFlowCommand extends Omit<NewFlowInput, 'checkoutSessionId'> {
  readonly methodId: string | undefined;
  readonly methodType: PaymentMethodType | undefined;
  readonly confirm: boolean;
}

/**
 * `payment_flows.create` (v2 §4.2). With a method (`methodId`, or `methodType`) attached the flow
 * is requires_confirmation; with a card attached, `must_extend` on a card that cannot be extended
 * is refused here, as v2 §4.2 says; otherwise at confirmation. `confirm` (the SDK's
 * createPaymentFlow) confirms in the same transaction with the method named or the customer's
 * default payment method, as `payment_flows.confirm` would; a declined card commits the flow and
 * its `payment_flow.payment_failed`, then fails with 402.
 */
export async function createPaymentFlow(ctx: Context, caller: Caller, command: CreatePaymentFlowCommand): Promise<PaymentFlowRow> {
  const { amount, captureMethod, paymentMethodTypes: types, extendedAuthorization, metadata, customerId, description, methodId: sentMethodId, methodType, confirm } = command;
  const now = ctx.clock.now();
  const claim = await ctx.db.transaction().execute(async (trx): Promise<ConfirmClaim> => {
    if (customerId !== null) await assertCustomer(trx, caller, customerId);
    // With confirm=true and no method named, the customer's default payment method pays (SDK).
    const methodId = sentMethodId ?? (confirm && methodType === undefined && customerId !== null ? await defaultPaymentMethodOf(trx, caller, customerId) : undefined);
    let flow = await insertPaymentFlow(trx, ctx, caller, { amount, captureMethod, paymentMethodTypes: types, extendedAuthorization, metadata, customerId, description, checkoutSessionId: null }, now);
    if (methodId === undefined && methodType === undefined) {
      if (confirm) reject('missing_param', 'payment_method', 'confirm=true needs a payment_method (or a customer with a default payment method)');
      return finished(flow);
    }
    const snapshot = await resolvePaymentMethod(trx, caller, { type: methodType ?? 'card', id: methodId, customerId, at: now });
    assertMethodAllowed(types, snapshot.type);
    if (captureMethod === 'manual') holdFor(flow, snapshot, now);
    // With confirm=true the new flow is committed with its claim; the network comes after.
    if (confirm) return claimConfirmation(trx, ctx, flow, snapshot, now, { authenticateInline: false });
    flow = await saveFlow(trx, flow, { ...paymentMethodColumns(snapshot), status: 'requires_confirmation', updated_at: now });
    return finished(flow);
  });
  return throwIfFailed(await finishConfirmation(ctx, claim));
}

/** The customer's default v2 payment method, if any. */
async function defaultPaymentMethodOf(trx: Kysely<Database>, caller: Caller, customerId: string): Promise<string | undefined> {
  const row = await trx.selectFrom('customers').select('default_payment_method_id').where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('customer_id', '=', customerId).executeTakeFirst();
  return row?.default_payment_method_id ?? undefined;
}

/** A flow and, with the public key (the browser), its `client_secret`. */
export interface PaymentFlowRef {
  readonly id: string;
  readonly clientSecret: string | undefined;
}

/**
 * `payment_flows.retrieve` (v2 §4.3). With a public key (the browser, v2 §4.8 step 5) the flow's
 * `client_secret` is required.
 */
export function retrievePaymentFlow(ctx: Context, caller: Caller, command: PaymentFlowRef): Promise<PaymentFlowRow> {
  return findPaymentFlow(ctx.db, caller, command.id, { clientSecret: command.clientSecret });
}

/** The fields sent (undefined: not sent); `extendedAuthorization` null clears the request, `metadata` is merged. */
export interface UpdatePaymentFlowCommand {
  readonly id: string;
  readonly amount: number | undefined;
  readonly paymentMethodTypes: readonly PaymentMethodType[] | undefined;
  readonly extendedAuthorization: ExtendedAuthorizationRequest | null | undefined;
  readonly description: string | null | undefined;
  readonly customerId: string | undefined;
  readonly methodId: string | undefined;
  readonly metadata: unknown;
}

/**
 * `payment_flows.update`: `metadata` (merge rules of v2 §2.6) and `description` at any time;
 * `amount`, `payment_method_types`, the extended-authorization request, `customer` and
 * `payment_method` (attached as at creation: requires_confirmation) only before confirmation (`invalid_status` after: the hold cannot be increased, v2 §3). No event: v2 §6.1 has
 * no `payment_flow.updated`.
 */
export async function updatePaymentFlow(ctx: Context, caller: Caller, command: UpdatePaymentFlowCommand): Promise<PaymentFlowRow> {
  const { id, amount, paymentMethodTypes: types, extendedAuthorization, description, customerId, methodId } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const flow = await findPaymentFlow(trx, caller, id, { lock: true });
    // The flow is left alone while a claim holds (one request's time).
    if (flow.status === 'processing' && (await liveNetworkClaim(trx, claimedFlow(flow), now))) reject('invalid_status', undefined, 'this payment flow is being confirmed; update it when the confirmation has ended');
    // The first of the sent fields that may change only before confirmation, for the refusal.
    const changedPayment = ([
      ['amount', amount],
      ['payment_method_types', types],
      ['payment_method_options', extendedAuthorization],
      ['customer', customerId],
      ['payment_method', methodId],
    ] as const).find(([, value]) => value !== undefined)?.[0];
    if (changedPayment !== undefined && !UNCONFIRMED.has(flow.status)) {
      reject('invalid_status', changedPayment, `amount, payment_method_types, payment_method_options, customer and payment_method can change only before confirmation; this payment flow is ${flow.status}`);
    }
    if (changedPayment !== undefined && flow.checkout_session_id !== null) {
      // The hosted page charges what the session shows (its line items): a flow of a checkout
      // session changes only through the session.
      reject('invalid_status', changedPayment, `this payment flow belongs to checkout session ${flow.checkout_session_id}; its amount and payment methods follow the session`);
    }
    if (types !== undefined && methodId === undefined && flow.payment_method_type !== null && !types.includes(flow.payment_method_type)) {
      reject('no_allowed_param', 'payment_method_types', `the attached payment method is ${flow.payment_method_type}, which these types leave out`);
    }
    if (customerId !== undefined) await assertCustomer(trx, caller, customerId);
    const metadata = command.metadata === undefined ? undefined : mergeMetadata(flow.metadata, command.metadata, 'v2');
    let attached = {};
    if (methodId !== undefined) {
      // Attaching a method (the SDK's payment_method_id): checked as at creation, then requires_confirmation.
      const snapshot = await resolvePaymentMethod(trx, caller, { type: 'card', id: methodId, customerId: customerId ?? flow.customer_id, at: now });
      assertMethodAllowed(types ?? flow.payment_method_types, snapshot.type);
      if (flow.capture_method === 'manual') holdFor({ request_extended_authorization: extendedAuthorization === undefined ? flow.request_extended_authorization : extendedAuthorization }, snapshot, now);
      attached = { ...paymentMethodColumns(snapshot), status: 'requires_confirmation' as const };
    }
    return saveFlow(trx, flow, {
      ...(amount === undefined ? {} : { amount }),
      ...(types === undefined ? {} : { payment_method_types: JSON.stringify(types) }),
      ...(extendedAuthorization === undefined ? {} : { request_extended_authorization: extendedAuthorization }),
      ...(description === undefined ? {} : { description }),
      ...(metadata === undefined ? {} : { metadata: JSON.stringify(metadata) }),
      ...(customerId === undefined ? {} : { customer_id: customerId }),
      ...attached,
      updated_at: now,
    });
  });
}

/** What a confirmation ended in; a declined payment still commits its state and event. */
export interface ConfirmOutcome {
  readonly row: PaymentFlowRow;
  readonly failure: { readonly code: ErrorCode; readonly message: string } | null;
}

/** `next_action` of a flow waiting for the buyer's 3-D Secure challenge. */
const THREE_D_SECURE_ACTION = { type: 'three_d_secure', three_d_secure: { status: 'unverified' } } as const;

/**
 * A confirmation after its first, short transaction: finished there (no network needed: 3-D Secure
 * handed to the browser, or nothing to confirm), or a committed `processing` claim whose network
 * work is still to do.
 */
export type ConfirmClaim = { readonly kind: 'done'; readonly outcome: ConfirmOutcome } | Claimed;

/**
 * What a caller adds to the transaction that records a confirmation's answer (the checkout
 * session's completion): `before` runs first, so rows it locks are locked before the flow's (the
 * session → flow order of every checkout transaction); `after` sees the outcome, recorded now or
 * by a call that took the claim over.
 */
export interface ConfirmationHooks {
  readonly before?: (trx: Kysely<Database>) => Promise<void>;
  readonly after?: (trx: Kysely<Database>, outcome: ConfirmOutcome) => Promise<void>;
}

interface Claimed {
  readonly kind: 'claimed';
  readonly flow: PaymentFlowRow;
  readonly snapshot: PaymentMethodSnapshot;
  /** The buyer's 3-D Secure authentication comes before the authorization. */
  readonly authenticate: boolean;
  readonly at: Date;
  readonly claim: NetworkClaim;
}

/** The network's answer to a claim, asked with no transaction open. */
type NetworkAnswer =
  | { readonly approved: true; readonly authorizationCode: string; readonly threeDSecure: 'verified' | 'attempted' | null }
  | { readonly approved: false; readonly code: ErrorCode; readonly message: string; readonly threeDSecure: string | null };

const finished = (row: PaymentFlowRow): ConfirmClaim => ({ kind: 'done', outcome: { row, failure: null } });

/** What a flow's claim is for, named in its recovery point: a confirmation, or a capture or release of the hold. */
type FlowWork = { readonly op: 'confirm' } | SettlementWork;

/** The flow as a claimed object in `network_claims`. */
const claimedFlow = (flow: PaymentFlowRow): ClaimedObject => ({ accountId: flow.account_id, livemode: flow.livemode, resource: 'payment_flow', resourceId: flow.payment_flow_id });
const operationOf = (op: FlowWork['op']): string => `payment_flows.${op}`;

/**
 * In the claiming transaction (the flow locked): the flow's claim for `work` at `at`, taking over
 * one that lapsed (fenced); a live claim: `invalid_status`. The recovery point names the work and
 * no authorization: the engine's recovery leaves the claim to this operation's next call, which
 * asks the network again under the flow's id (the same answer) and records it.
 */
async function claimFlowWork(trx: Kysely<Database>, flow: PaymentFlowRow, work: FlowWork, at: Date): Promise<NetworkClaim> {
  const claim = await takeNetworkClaimOver(trx, claimedFlow(flow), operationOf(work.op), at, { authorizations: [], work });
  return claim ?? reject('invalid_status', undefined, 'this payment flow is being processed');
}

/** A lapsed claim of `op` on a processing flow (its call died at the network), with the work it named; undefined otherwise. */
async function lapsedClaimOf(trx: Kysely<Database>, flow: PaymentFlowRow, op: FlowWork['op'], at: Date): Promise<FlowWork | undefined> {
  if (flow.status !== 'processing') return undefined;
  const held = await networkClaimAt(trx, claimedFlow(flow), at);
  if (held === undefined || held.live || held.claim.operation !== operationOf(op)) return undefined;
  return held.claim.recovery.work as FlowWork;
}

/**
 * Claims the flow: `processing`, and its claim at `at`. An authentication still to do is kept as
 * `three_d_secure_status` `unverified`, so a takeover after a crash knows to authenticate.
 * Entering `processing` writes `payment_flow.processing` (v2 §6.1) in the claim's commit, so the
 * event is out before the card network is asked; a takeover re-stamps a flow that is already
 * processing and writes none.
 */
async function claimFlow(trx: Kysely<Database>, ids: Context['ids'], flow: PaymentFlowRow, changes: Updateable<PaymentFlowsTable>, snapshot: PaymentMethodSnapshot, authenticate: boolean, at: Date): Promise<Claimed> {
  const claim = await claimFlowWork(trx, flow, { op: 'confirm' }, at);
  const row = await saveFlow(trx, flow, { ...changes, ...(authenticate ? { three_d_secure_status: 'unverified' } : {}), status: 'processing', next_action: null, updated_at: at });
  if (flow.status !== 'processing') await recordEvents(trx, ids, [flowEvent(row, 'payment_flow.processing', at)]);
  return { kind: 'claimed', flow: row, snapshot, authenticate, at, claim };
}

/**
 * A claim left behind by a confirmation that died (older than the lease) is taken over by the next
 * confirm or complete_action, with the payment method and authentication it had claimed: the
 * interrupted payment is finished, never started a second time with other terms.
 */
async function takeOverLapsedClaim(trx: Kysely<Database>, ids: Context['ids'], flow: PaymentFlowRow, at: Date): Promise<Claimed | undefined> {
  const snapshot = storedPaymentMethod(flow);
  // A capture's or release's claim is finished by its own operation.
  if (snapshot === null || (await lapsedClaimOf(trx, flow, 'confirm', at)) === undefined) return undefined;
  return claimFlow(trx, ids, flow, {}, snapshot, flow.three_d_secure_status === 'unverified', at);
}

/**
 * The first half of confirming a locked flow with a payment method, inside the caller's
 * transaction: checks (status, allowed method, the hold rule) come first, so a refusal changes
 * nothing. A card that needs 3-D Secure stops at requires_action unless `authenticateInline` (the
 * browser completes the action later); otherwise the flow is claimed for the network.
 */
async function claimConfirmation(
  trx: Kysely<Database>,
  ctx: Pick<Context, 'ids'>,
  flow: PaymentFlowRow,
  snapshot: PaymentMethodSnapshot,
  at: Date,
  options: { readonly authenticateInline: boolean },
): Promise<ConfirmClaim> {
  if (!CONFIRMABLE.has(flow.status)) reject('invalid_status', undefined, `a payment flow that is ${flow.status} cannot be confirmed`);
  assertMethodAllowed(flow.payment_method_types, snapshot.type);
  if (flow.capture_method === 'manual') holdFor(flow, snapshot, at);
  // card_flagged (src/domain/card-flags.ts): a card locked out after repeated refusals is not
  // sent to the network again; the refusal rolls back the confirmation, so the flow is unchanged.
  if (snapshot.card !== null) await assertCardNotFlagged(trx, flowCaller(flow), snapshot.card.fingerprint, at);
  const attached = { ...paymentMethodColumns(snapshot), last_payment_error: null, three_d_secure_status: null };
  const authenticate = needsThreeDSecure(snapshot);
  if (authenticate && !options.authenticateInline) {
    const row = await saveFlow(trx, flow, { ...attached, status: 'requires_action', three_d_secure_status: 'unverified', next_action: JSON.stringify(THREE_D_SECURE_ACTION), updated_at: at });
    await recordEvents(trx, ctx.ids, [flowEvent(row, 'payment_flow.requires_action', at)]);
    return finished(row);
  }
  return claimFlow(trx, ctx.ids, flow, attached, snapshot, authenticate, at);
}

/** Outside any transaction: the buyer's 3-D Secure authentication when claimed (v1 §4.3 step 2 rules), then the authorization. */
async function askNetwork(ctx: Pick<Context, 'processor'>, claim: Claimed): Promise<NetworkAnswer> {
  const { flow, snapshot, at } = claim;
  let threeDSecure: 'verified' | 'attempted' | null = null;
  if (claim.authenticate) {
    const [result] = await ctx.processor.authenticate([{ reference: flow.payment_flow_id, fingerprint: snapshot.card!.fingerprint, livemode: flow.livemode, at }]);
    const status = result!.status;
    if (status !== 'verified' && status !== 'attempted') return { approved: false, code: 'three_d_secure_failed', message: `3-D Secure authentication ended ${status}`, threeDSecure: status };
    threeDSecure = status;
  }
  // **Decision:** PayPay is a wallet outside the card network; the simulated wallet approves
  // every payment (v2 §4.8 step 3: the buyer approves in the wallet app).
  if (snapshot.card === null) return { approved: true, authorizationCode: 'paypay', threeDSecure };
  // The flow id is the request's reference: a takeover after a crash sends the same reference,
  // which a real network adapter passes as its idempotency key.
  const [result] = await ctx.processor.authorize([
    {
      reference: flow.payment_flow_id,
      fingerprint: snapshot.card.fingerprint,
      expMonth: snapshot.card.expMonth,
      expYear: snapshot.card.expYear,
      amount: flow.amount,
      currency: 'jpy',
      livemode: flow.livemode,
      at,
      kind: flow.capture_method === 'manual' ? 'hold' : 'charge',
      ...(threeDSecure === null ? {} : { threeDSecure }),
    },
  ]);
  if (!result!.approved) return { approved: false, code: result!.code, message: result!.message, threeDSecure };
  return { approved: true, authorizationCode: result!.authorizationCode, threeDSecure };
}

/** A declined payment: back to requires_payment_method with `last_payment_error` (v2 §6.1). */
async function failFlow(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, flow: PaymentFlowRow, at: Date, code: ErrorCode, message: string, threeDSecure: string | null): Promise<ConfirmOutcome> {
  const row = await saveFlow(trx, flow, {
    ...paymentMethodColumns(null),
    status: 'requires_payment_method',
    three_d_secure_status: threeDSecure,
    next_action: null,
    last_payment_error: JSON.stringify({ type: 'card_error', code, message, payment_method: flow.payment_method_id }),
    updated_at: at,
  });
  await recordEvents(trx, ctx.ids, [flowEvent(row, 'payment_flow.payment_failed', at)]);
  return { row, failure: { code, message } };
}

/**
 * Writes a claim's answer on the claimed flow, in the caller's transaction: a decline, a hold
 * (requires_capture), or an automatic capture (succeeded, with its charge row for settlement).
 */
async function recordAnswer(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'clock'>, claim: Claimed, flow: PaymentFlowRow, answer: NetworkAnswer): Promise<ConfirmOutcome> {
  const { snapshot, at } = claim;
  if (!answer.approved) return failFlow(trx, ctx, flow, at, answer.code, answer.message, answer.threeDSecure);
  const authorized = { authorization_code: answer.authorizationCode, authorized_at: at, three_d_secure_status: answer.threeDSecure, next_action: null, last_payment_error: null, updated_at: at };
  if (flow.capture_method === 'manual') {
    const hold = holdFor(flow, snapshot, at);
    const row = await saveFlow(trx, flow, { ...authorized, status: 'requires_capture', capture_before: hold.expiresAt, extended_authorization: hold.extended, amount_capturable: flow.amount });
    await recordEvents(trx, ctx.ids, [flowEvent(row, 'payment_flow.amount_capturable_updated', at)]);
    return { row, failure: null };
  }
  // Automatic capture (v2 §3): "captured automatically; event payment_flow.succeeded". The
  // authorization above was of kind 'charge', which the network captures in the same step (as a
  // v1 charge with capture=true): a separate capture call would move the money twice.
  const row = await saveFlow(trx, flow, { ...authorized, status: 'succeeded', amount_received: flow.amount, amount_capturable: 0, capture_count: 1 });
  await recordFlowCaptures(trx, ctx, [{ flow: row, captureNumber: 1, amount: flow.amount, at }]);
  await recordEvents(trx, ctx.ids, [flowEvent(row, 'payment_flow.succeeded', at)]);
  return { row, failure: null };
}

/** What a flow's row says of a confirmation another call recorded: its decline, if it declined. */
function recordedOutcome(row: PaymentFlowRow): ConfirmOutcome {
  const error = row.last_payment_error as { code?: ErrorCode; message?: string } | null;
  if (row.status !== 'requires_payment_method' || error?.code === undefined) return { row, failure: null };
  return { row, failure: { code: error.code, message: error.message ?? 'the payment was declined' } };
}

/**
 * The second half of a confirmation: the network with no transaction open and no row locked, then
 * the answer recorded in a short transaction, only if the claim still holds (recordUnderClaim).
 * Two confirmations never both reach the network: the second finds the flow claimed and is
 * refused in its own first transaction.
 */
export async function finishConfirmation(ctx: Context, claim: ConfirmClaim, hooks: ConfirmationHooks = {}): Promise<ConfirmOutcome> {
  if (claim.kind === 'done') return claim.outcome;
  const answer = await askNetwork(ctx, claim);
  const caller = flowCaller(claim.flow);
  // The session (hooks.before), then the flow, then the claim: the order of the claiming transaction.
  const lockFlow = async (trx: Kysely<Database>) => {
    await hooks.before?.(trx);
    return findPaymentFlow(trx, caller, claim.flow.payment_flow_id, { lock: true });
  };
  const { outcome, recorded } = await recordUnderClaim(
    ctx.db,
    claim.claim,
    async (trx, current) => {
      const outcome = await recordAnswer(trx, ctx, claim, current, answer);
      await hooks.after?.(trx, outcome);
      return { outcome, recorded: true };
    },
    lockFlow,
  ).catch(async (error: unknown) => {
    if (!(error instanceof NetworkClaimLost)) throw error;
    // Taken over after the lease (the claimer's answer came too late): the record made stands.
    return ctx.db.transaction().execute(async (trx) => {
      const outcome = recordedOutcome(await lockFlow(trx));
      await hooks.after?.(trx, outcome);
      return { outcome, recorded: false };
    });
  });
  // The issuer's refusal of the card counts towards its lockout, once: by the confirmation that
  // recorded it, after its commit (as a declined v1 charge).
  if (recorded && !answer.approved && claim.snapshot.card !== null && CARD_CAUSED_ERRORS.has(answer.code)) {
    await recordCardError(ctx.db, caller, claim.snapshot.card.fingerprint, claim.at);
  }
  return outcome;
}

/** The flow's own account and mode, as the engine reads it (a secret-key caller). */
function flowCaller(flow: PaymentFlowRow): Caller {
  return { accountId: flow.account_id, livemode: flow.livemode, kind: 'secret' };
}

/**
 * Claims a locked flow for a confirmation whose 3-D Secure challenge the caller runs inline (the
 * hosted checkout page), in the caller's transaction: a claim left by a crash is taken over as it
 * was claimed; otherwise as claimConfirmation. The caller finishes it with finishConfirmation.
 */
export async function claimInlineConfirmation(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, flow: PaymentFlowRow, snapshot: PaymentMethodSnapshot, at: Date): Promise<ConfirmClaim> {
  return (await takeOverLapsedClaim(trx, ctx.ids, flow, at)) ?? claimConfirmation(trx, ctx, flow, snapshot, at, { authenticateInline: true });
}

/** A capture or a release claimed on a held flow (`processing`), the work named in its claim's recovery point. */
type SettlementWork = { readonly op: 'capture'; readonly amount: number } | { readonly op: 'release'; readonly amount: number; readonly reason: string | null; readonly lapsed: boolean };

interface SettlementClaim {
  readonly flow: PaymentFlowRow;
  readonly work: SettlementWork;
  readonly claim: NetworkClaim;
}

async function claimSettlement(trx: Kysely<Database>, flow: PaymentFlowRow, work: SettlementWork, at: Date): Promise<SettlementClaim> {
  const claim = await claimFlowWork(trx, flow, work, at);
  return { flow: await saveFlow(trx, flow, { status: 'processing', updated_at: at }), work, claim };
}

/** A claim of `op` left by a call that died (its lease lapsed), taken over to be finished as it was claimed. */
async function takeOverLapsedSettlement(trx: Kysely<Database>, flow: PaymentFlowRow, op: SettlementWork['op'], now: Date): Promise<SettlementClaim | undefined> {
  const work = await lapsedClaimOf(trx, flow, op, now);
  return work === undefined || work.op === 'confirm' ? undefined : claimSettlement(trx, flow, work, now);
}

/** The instant a release is booked at: a lapsed hold ends at its `capture_before` (service rules §3). */
function releasedAt(claim: SettlementClaim): Date {
  return claim.work.op === 'release' && claim.work.lapsed ? claim.flow.capture_before! : claim.claim.claimedAt;
}

/**
 * The network half of a capture or release, with no transaction open (PayPay holds have no card:
 * nothing to ask), then its outcome recorded if the claim still holds: `record` on success; a
 * refusal puts the flow back to requires_capture and answers the network's error after the commit.
 */
async function finishSettlement(ctx: Context, claim: SettlementClaim, record: (trx: Kysely<Database>, flow: PaymentFlowRow) => Promise<PaymentFlowRow>): Promise<PaymentFlowRow> {
  const { flow, work } = claim;
  const [result] = flow.payment_method_type === 'paypay' ? [] : await ctx.processor[work.op]([{ reference: flow.payment_flow_id, authorizationCode: flow.authorization_code ?? '', amount: work.amount, at: releasedAt(claim) }]);
  const lockFlow = (trx: Kysely<Database>) => findPaymentFlow(trx, flowCaller(flow), flow.payment_flow_id, { lock: true });
  const outcome = await recordUnderClaim(
    ctx.db,
    claim.claim,
    async (trx, current) => {
      if (result !== undefined && !result.ok) return { row: await saveFlow(trx, current, { status: 'requires_capture', updated_at: current.updated_at }), refusal: result };
      return { row: await record(trx, current), refusal: undefined };
    },
    lockFlow,
  ).catch(async (error: unknown) => {
    if (!(error instanceof NetworkClaimLost)) throw error;
    // Taken over after the lease: the record made stands.
    return { row: await findPaymentFlow(ctx.db, flowCaller(flow), flow.payment_flow_id), refusal: undefined };
  });
  if (outcome.refusal !== undefined) reject(outcome.refusal.code, undefined, outcome.refusal.message);
  return outcome.row;
}

/** Throws the card error of a declined confirmation after its state was committed. */
function throwIfFailed(outcome: ConfirmOutcome): PaymentFlowRow {
  if (outcome.failure !== null) {
    // The flow exists (createPaymentFlow with confirm made it): the refusal names it, as v1 names the charge.
    throw new KessaiError(outcome.failure.code, { message: outcome.failure.message, param: 'payment_method', paymentFlow: outcome.row.payment_flow_id });
  }
  return outcome.row;
}

/** A confirmation: the method to pay with (or the one attached), and what an update before confirmation sets. */
export interface ConfirmPaymentFlowCommand extends PaymentFlowRef {
  readonly methodId: string | undefined;
  readonly methodType: PaymentMethodType | undefined;
  readonly paymentMethodTypes: readonly PaymentMethodType[] | undefined;
  readonly extendedAuthorization: ExtendedAuthorizationRequest | null | undefined;
  readonly captureMethod: 'automatic' | 'manual' | undefined;
  readonly description: string | null | undefined;
}

/**
 * `payment_flows.confirm` (v2 §4.8): the browser (public key + `client_secret`) or the server
 * (secret key) confirms with `payment_method` (`tok_…` or a card of the flow's customer) and
 * `payment_method_type` (`card` default, `apple_pay`, `paypay`), or with the method attached at
 * creation. `return_url` is accepted and echoed by the browser flow; the engine has no redirect.
 * `payment_method_types`, `payment_method_options`, `capture_method` and `description` change the
 * flow as an update before confirmation would, in the same transaction (a refusal changes nothing).
 * A declined payment commits its `payment_flow.payment_failed` and then fails with the card error
 * (402), like a v1 charge.
 */
export async function confirmPaymentFlow(ctx: Context, caller: Caller, command: ConfirmPaymentFlowCommand): Promise<PaymentFlowRow> {
  const { id, clientSecret, methodId, methodType, paymentMethodTypes: types, extendedAuthorization, captureMethod, description } = command;
  const now = ctx.clock.now();
  const claim = await ctx.db.transaction().execute(async (trx): Promise<ConfirmClaim> => {
    let flow = await findPaymentFlow(trx, caller, id, { lock: true, clientSecret });
    const takenOver = await takeOverLapsedClaim(trx, ctx.ids, flow, now);
    if (takenOver !== undefined) return takenOver;
    if (!CONFIRMABLE.has(flow.status)) reject('invalid_status', undefined, `a payment flow that is ${flow.status} cannot be confirmed`);
    const changes = sentFields({
      payment_method_types: types === undefined ? undefined : JSON.stringify(types),
      request_extended_authorization: extendedAuthorization,
      capture_method: captureMethod,
      description,
    });
    if (Object.keys(changes).length > 0) {
      if (flow.checkout_session_id !== null && (types !== undefined || extendedAuthorization !== undefined || captureMethod !== undefined)) {
        reject('invalid_status', undefined, `this payment flow belongs to checkout session ${flow.checkout_session_id}; its payment methods and capture follow the session`);
      }
      flow = await saveFlow(trx, flow, { ...changes, updated_at: now });
    }
    if (methodType !== undefined) assertMethodAllowed(flow.payment_method_types, methodType);
    let snapshot: PaymentMethodSnapshot | null;
    if (methodId !== undefined || methodType !== undefined) {
      snapshot = await resolvePaymentMethod(trx, caller, { type: methodType ?? 'card', id: methodId, customerId: flow.customer_id, at: now });
    } else {
      snapshot = storedPaymentMethod(flow);
    }
    if (snapshot === null) return reject('missing_param', 'payment_method', 'confirm needs a payment_method (none is attached to this payment flow)');
    return claimConfirmation(trx, ctx, flow, snapshot, now, { authenticateInline: false });
  });
  return throwIfFailed(await finishConfirmation(ctx, claim));
}

/**
 * `payment_flows.complete_action`: the browser returns from the 3-D Secure challenge of a flow in
 * `requires_action` (public key + `client_secret`, or the secret key). The issuer's answer decides:
 * `verified` / `attempted` → authorization (requires_capture or succeeded); `failed` / `error` →
 * requires_payment_method with `last_payment_error` and `payment_flow.payment_failed`.
 */
export async function completePaymentFlowAction(ctx: Context, caller: Caller, command: PaymentFlowRef): Promise<PaymentFlowRow> {
  const { id, clientSecret } = command;
  const now = ctx.clock.now();
  const claim = await ctx.db.transaction().execute(async (trx): Promise<ConfirmClaim> => {
    const flow = await findPaymentFlow(trx, caller, id, { lock: true, clientSecret });
    const takenOver = await takeOverLapsedClaim(trx, ctx.ids, flow, now);
    if (takenOver !== undefined) return takenOver;
    const snapshot = storedPaymentMethod(flow);
    if (flow.status !== 'requires_action' || snapshot === null || snapshot.card === null) {
      return reject('invalid_status', undefined, `a payment flow that is ${flow.status} has no action to complete`);
    }
    if (flow.capture_method === 'manual') holdFor(flow, snapshot, now);
    return claimFlow(trx, ctx.ids, flow, {}, snapshot, true, now);
  });
  return throwIfFailed(await finishConfirmation(ctx, claim));
}

export interface CapturePaymentFlowCommand {
  readonly id: string;
  /** Undefined: the whole remaining hold. */
  readonly amountToCapture: number | undefined;
}

/**
 * `payment_flows.capture` (v2 §4.4, §3, §8): from requires_capture only. Without
 * `amount_to_capture` the whole remaining hold is captured. A first capture of less is the one
 * partial capture allowed: the flow stays requires_capture with `amount_capturable` = the rest;
 * after it only exactly the full remainder may be captured. Never above the hold
 * (`capture_amount_gt_net`); after the hold lapsed `charge_expired`.
 */
export async function capturePaymentFlow(ctx: Context, caller: Caller, command: CapturePaymentFlowCommand): Promise<PaymentFlowRow> {
  const { id, amountToCapture: requested } = command;
  const claim = await ctx.db.transaction().execute(async (trx) => {
    const flow = await findPaymentFlow(trx, caller, id, { lock: true });
    // Read after the lock: an expiry committed while this call waited is in its past.
    const now = ctx.clock.now();
    const takenOver = await takeOverLapsedSettlement(trx, flow, 'capture', now);
    if (takenOver !== undefined) return takenOver;
    if (flow.status !== 'requires_capture') return reject('invalid_status', undefined, `a payment flow that is ${flow.status} cannot be captured`);
    if (flow.capture_before !== null && holdLapsed(flow.capture_before, now)) {
      return reject('charge_expired', undefined, `the hold lapsed at ${toIsoSeconds(flow.capture_before)}`);
    }
    const remaining = flow.amount_capturable;
    const amount = requested ?? remaining;
    if (amount > remaining) {
      return reject('capture_amount_gt_net', 'amount_to_capture', `amount_to_capture ${amount} is above the ${remaining} yen still held; the hold cannot be increased`);
    }
    if (flow.capture_count >= 1 && amount !== remaining) {
      // A wrong state for a partial capture, not a malformed amount: 400 `Invalid Status` in v2.
      return reject('invalid_status', 'amount_to_capture', `a partial capture was made already; only the full remaining ${remaining} yen may be captured`);
    }
    return claimSettlement(trx, flow, { op: 'capture', amount }, now);
  });
  return finishSettlement(ctx, claim, captureRecord(ctx, claim.work.amount, claim.claim.claimedAt));
}

/** The record step of a capture of `amount` claimed at `at`, on the flow as locked then. */
function captureRecord(ctx: Context, amount: number, at: Date) {
  return async (trx: Kysely<Database>, flow: PaymentFlowRow): Promise<PaymentFlowRow> => {
    const remaining = flow.amount_capturable;
    // Service rules §2.1: on a debit or prepaid card "releasing or partially capturing refunds the
    // rest" — the network gave the remainder back with this capture, so nothing is left to capture
    // or to release later.
    const full = amount === remaining || debitedAtAuthorization(flow.card_funding);
    const captured = await saveFlow(trx, flow, {
      status: full ? 'succeeded' : 'requires_capture',
      amount_received: flow.amount_received + amount,
      amount_capturable: full ? 0 : remaining - amount,
      capture_count: flow.capture_count + 1,
      updated_at: at,
    });
    await recordFlowCaptures(trx, ctx, [{ flow: captured, captureNumber: captured.capture_count, amount, at }]);
    const returned = await recordDebitReturns(trx, ctx.ids, [{ flow, amount: remaining - amount, at }]);
    await recordEvents(trx, ctx.ids, [flowEvent(captured, full ? 'payment_flow.succeeded' : 'payment_flow.amount_capturable_updated', at), ...returned]);
    return captured;
  };
}

export interface CancelPaymentFlowCommand {
  readonly id: string;
  readonly reason: CancellationReason | null;
}

/**
 * `payment_flows.cancel` (`cancellation_reason` optional: duplicate, fraudulent,
 * requested_by_customer, abandoned): from any status before money moved; a hold is released
 * through the network. After a partial capture the flow cannot be canceled (money was taken): the
 * remainder is captured in full or released when the hold lapses.
 */
export async function cancelPaymentFlow(ctx: Context, caller: Caller, command: CancelPaymentFlowCommand): Promise<PaymentFlowRow> {
  const { id, reason } = command;
  const claim = await ctx.db.transaction().execute(async (trx): Promise<SettlementClaim | PaymentFlowRow> => {
    const flow = await findPaymentFlow(trx, caller, id, { lock: true });
    const now = ctx.clock.now();
    const takenOver = await takeOverLapsedSettlement(trx, flow, 'release', now);
    if (takenOver !== undefined) return takenOver;
    if (flow.status === 'canceled' || flow.status === 'succeeded' || flow.status === 'processing' || flow.capture_count > 0) {
      return reject('invalid_status', undefined, `a payment flow that is ${flow.status}${flow.capture_count > 0 ? ' and partially captured' : ''} cannot be canceled`);
    }
    // A hold that lapsed before the expiry job came round ends as the job would end it (service
    // rules §3: reason expired, at capture_before), whatever reason the merchant sent.
    const lapsed = flow.status === 'requires_capture' && flow.capture_before !== null && holdLapsed(flow.capture_before, now);
    if (flow.status === 'requires_capture') return claimSettlement(trx, flow, { op: 'release', amount: flow.amount_capturable, reason, lapsed }, now);
    // Nothing held: nothing to ask the network.
    return cancelFlow(trx, ctx, flow, reason, now, 0);
  });
  return 'work' in claim ? finishSettlement(ctx, claim, releaseRecord(ctx, claim, reason)) : claim;
}

/** The record step of a release: the flow canceled with `reason` (`expired` for a lapsed hold) at the release's instant. */
function releaseRecord(ctx: Context, claim: SettlementClaim, reason: string | null) {
  return (trx: Kysely<Database>, flow: PaymentFlowRow) => cancelFlow(trx, ctx, flow, claim.work.op === 'release' && claim.work.lapsed ? 'expired' : reason, releasedAt(claim), claim.work.amount);
}

/**
 * How the hold-expiry job finishes a capture or release of a hold whose call died at the network
 * (recoverLapsedClaims, the claim already restamped to it): as the next capture or cancel would,
 * the claimed work asked again under the flow's id (the same answer) and recorded once, the
 * cancellation with the reason the dead call sent. A refusal by the network puts the flow back to
 * requires_capture, as for the call. A confirmation's claim has no finisher: it is left to the
 * buyer's next confirmation (a checkout session's completion follows it).
 */
export function paymentFlowFinishers(ctx: Context): ClaimFinishers {
  const finish = async (held: HeldClaim): Promise<void> => {
    const work = held.recovery.work as SettlementWork;
    const flow = await findPaymentFlow(ctx.db, { accountId: held.accountId, livemode: held.livemode, kind: 'secret' }, held.resourceId);
    const claim: SettlementClaim = { flow, work, claim: held };
    const record = work.op === 'capture' ? captureRecord(ctx, work.amount, held.claimedAt) : releaseRecord(ctx, claim, work.reason);
    await finishSettlement(ctx, claim, record).catch((error: unknown) => {
      if (!(error instanceof KessaiError)) throw error;
      ctx.log.warn({ payment_flow: flow.payment_flow_id, code: error.code }, 'a recovered capture or release was refused by the network; the flow is back to requires_capture');
    });
  };
  return { [operationOf('capture')]: finish, [operationOf('release')]: finish };
}

/**
 * Cancels the flow at `at` with `payment_flow.canceled`; its hold, if any, already released:
 * `released` yen, which a debited card gets back as a refund.
 */
async function cancelFlow(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, flow: PaymentFlowRow, reason: string | null, at: Date, released: number): Promise<PaymentFlowRow> {
  const canceled = await saveFlow(trx, flow, { status: 'canceled', cancellation_reason: reason, canceled_at: at, amount_capturable: 0, next_action: null, updated_at: at });
  const returned = await recordDebitReturns(trx, ctx.ids, [{ flow, amount: released, at }]);
  await recordEvents(trx, ctx.ids, [flowEvent(canceled, 'payment_flow.canceled', at), ...returned]);
  return canceled;
}

/**
 * `payment_flows.list`: newest first (the id descending on ties), `limit` (default 10, at most 100),
 * cursors `starting_after` / `ending_before` (a flow id: the page after / before it), and the
 * optional `customer` filter.
 */
export interface ListPaymentFlowsCommand {
  readonly page: V2Page;
  readonly customer: string | undefined;
}

export async function listPaymentFlows(ctx: Context, caller: Caller, command: ListPaymentFlowsCommand): Promise<PaymentFlowRow[]> {
  const { page, customer } = command;
  const cursor = page.cursor === undefined ? undefined : await findPaymentFlow(ctx.db, caller, page.cursor.id, { param: page.cursor.param });
  return ctx.db
    .selectFrom('payment_flows')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(customer !== undefined, (q) => q.where('customer_id', '=', customer!))
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.payment_flow_id }, 'payment_flow_id'))
    .execute();
}


