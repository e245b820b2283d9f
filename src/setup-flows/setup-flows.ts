/**
 * v2 setup flows (official-sdks.md §2 "Setup flows", v2 §6.1 `setup_flow.*`): a card saved for
 * later use without a payment. create, retrieve, update, list, cancel, confirm (the server with
 * the secret key, or the browser with the public key and the flow's `client_secret`, as payment
 * flows), and the completion of a 3-D Secure action.
 *
 * Statuses: requires_payment_method → (payment method attached) requires_confirmation → confirm →
 * [requires_action (3-D Secure) →] processing → succeeded; a refused card goes back to
 * requires_payment_method with `last_setup_error` (`setup_flow.setup_failed`); canceled from any
 * status before succeeded. On success the payment method is attached to the flow's customer.
 *
 * The card is verified on the simulated network with a 1-yen authorization released at once
 * (docs/decisions/payment-flows-and-checkout.md, "Setup flows"). That network call is made outside any transaction:
 * the confirmation first claims the flow (`processing`, and a claim in `network_claims`,
 * src/engine/network-claims.ts, committed), then calls the network, then records the outcome only
 * if its claim still holds. A claim left behind by a crash is taken over by the next confirmation
 * once its lease lapsed (or undone by the hold-expiry job, the verification released; the flow
 * then stays `processing` until a confirmation takes it over); a verification moves no money, so
 * doing it twice is harmless, and the outcome is recorded once.
 */
import type { Kysely, Selectable, Updateable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { findCustomer } from '../customers/customer-record';
import { consumeToken } from '../customers/tokens';
import type { Database, SetupFlowsTable } from '../db/schema';
import { KessaiError, reject, type ErrorCode } from '../domain/errors';
import { mergeMetadata } from '../domain/metadata';
import { toIsoSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { liveNetworkClaim, moveRecoveryPoint, NetworkClaimLost, recordUnderClaim, takeNetworkClaimOver, type ClaimedObject, type NetworkClaim } from '../engine/network-claims';
import type { AuthorizationRequest } from '../processor/card-network';
import { recordEvents, type EventInput } from '../events/outbox';
import { inV2Page, type V2Page } from '../operations/v2-pagination';
import { newClientSecret } from '../payment-flows/payment-flow-object';
import { cardNeedsThreeDSecure } from '../payment-flows/payment-method';
import { attachMethod, findPaymentMethod, insertPaymentMethod, type PaymentMethodRow } from '../payment-methods/payment-methods';

export type SetupFlowRow = Selectable<SetupFlowsTable>;

/** The amount of the verification authorization, released at once (never captured). */
export const VERIFICATION_AMOUNT = 1;

const CONFIRMABLE = new Set<SetupFlowRow['status']>(['requires_payment_method', 'requires_confirmation']);

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type SetupFlowObject = {
  readonly id: string;
  readonly object: 'setup_flow';
  readonly livemode: boolean;
  readonly status: SetupFlowRow['status'];
  readonly usage: SetupFlowRow['usage'];
  readonly client_secret: string;
  readonly customer_id: string | null;
  readonly description: string | null;
  readonly payment_method_id: string | null;
  readonly payment_method_types: readonly string[];
  readonly payment_method_options: { readonly card: { readonly request_three_d_secure: 'automatic' } };
  readonly next_action: Readonly<Record<string, unknown>> | null;
  readonly return_url: string | null;
  readonly last_setup_error: Readonly<Record<string, unknown>> | null;
  readonly cancellation_reason: string | null;
  readonly checkout_session_id: string | null;
  readonly metadata: Readonly<Record<string, string | number | boolean>>;
  readonly created_at: string;
  readonly updated_at: string;
};

export function renderSetupFlow(row: SetupFlowRow): SetupFlowObject {
  return {
    id: row.setup_flow_id,
    object: 'setup_flow',
    livemode: row.livemode,
    status: row.status,
    usage: row.usage,
    client_secret: row.client_secret,
    customer_id: row.customer_id,
    description: row.description,
    payment_method_id: row.payment_method_id,
    payment_method_types: row.payment_method_types,
    payment_method_options: { card: { request_three_d_secure: 'automatic' } },
    next_action: row.next_action,
    return_url: row.return_url,
    last_setup_error: row.last_setup_error,
    cancellation_reason: row.cancellation_reason,
    checkout_session_id: row.checkout_session_id,
    metadata: row.metadata,
    created_at: toIsoSeconds(row.created_at),
    updated_at: toIsoSeconds(row.updated_at),
  };
}

export function setupFlowEvent(row: SetupFlowRow, type: string, at: Date): EventInput {
  return { accountId: row.account_id, livemode: row.livemode, type, data: renderSetupFlow(row), at, apiVersion: 'v2' as const };
}

/**
 * The flow `id` of the caller's account and mode (FOR UPDATE with `lock`). A public key must
 * present the flow's `client_secret`; a wrong or missing one is answered like an unknown id.
 */
export async function findSetupFlow(executor: Kysely<Database>, caller: Caller, id: string, options: { readonly lock?: boolean; readonly clientSecret?: string | undefined; readonly param?: string } = {}): Promise<SetupFlowRow> {
  let query = executor.selectFrom('setup_flows').selectAll().where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('setup_flow_id', '=', id);
  if (options.lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  const secretOk = options.clientSecret === undefined ? caller.kind === 'secret' : options.clientSecret === row?.client_secret;
  if (!row || !secretOk) return reject('invalid_id', options.param ?? 'id', `No such setup flow: ${id}`);
  return row;
}

async function saveFlow(trx: Kysely<Database>, row: SetupFlowRow, changes: Updateable<SetupFlowsTable>): Promise<SetupFlowRow> {
  return trx
    .updateTable('setup_flows')
    .set(changes)
    .where('account_id', '=', row.account_id)
    .where('livemode', '=', row.livemode)
    .where('setup_flow_id', '=', row.setup_flow_id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export interface NewSetupFlowInput {
  readonly usage: SetupFlowRow['usage'];
  readonly customerId: string | null;
  readonly description: string | null;
  readonly metadata: Readonly<Record<string, string | number | boolean>>;
  readonly checkoutSessionId: string | null;
}

/** Inserts a new flow (requires_payment_method) and writes `setup_flow.created`; checkout's mode `setup` uses it too. */
export async function insertSetupFlow(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, caller: Caller, input: NewSetupFlowInput, at: Date): Promise<SetupFlowRow> {
  const id = ctx.ids.next('setupFlow');
  const row = await trx
    .insertInto('setup_flows')
    .values({
      account_id: caller.accountId,
      livemode: caller.livemode,
      setup_flow_id: id,
      status: 'requires_payment_method',
      usage: input.usage,
      payment_method_types: JSON.stringify(['card']),
      client_secret: newClientSecret(ctx.ids, id),
      customer_id: input.customerId,
      description: input.description,
      payment_method_id: null,
      three_d_secure_status: null,
      next_action: null,
      last_setup_error: null,
      return_url: null,
      cancellation_reason: null,
      canceled_at: null,
      checkout_session_id: input.checkoutSessionId,
      metadata: JSON.stringify(input.metadata),
      created_at: at,
      updated_at: at,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await recordEvents(trx, ctx.ids, [setupFlowEvent(row, 'setup_flow.created', at)]);
  return row;
}

/** A setup flow to create (parameters read by the v2 codec, src/api/v2/setup-flows.ts). */
export interface CreateSetupFlowCommand {
  readonly customerId: string | null;
  readonly usage: SetupFlowRow['usage'];
  readonly description: string | null;
  readonly metadata: Readonly<Record<string, string | number | boolean>>;
}

/** `setup_flows.create`: the flow (requires_payment_method) and `setup_flow.created`; an unknown customer is refused on `customer_id`. */
export async function createSetupFlow(ctx: Context, caller: Caller, command: CreateSetupFlowCommand): Promise<SetupFlowRow> {
  const { customerId, usage, description, metadata } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    if (customerId !== null) await findCustomer(trx, caller, customerId, 'customer_id');
    return insertSetupFlow(trx, ctx, caller, { usage, customerId, description, metadata, checkoutSessionId: null }, now);
  });
}

/** A flow named by a caller: with the public key the flow's `client_secret` is required (v2 §4.8). */
export interface SetupFlowRef {
  readonly id: string;
  readonly clientSecret?: string | undefined;
}

/** `setup_flows.retrieve`. */
export function retrieveSetupFlow(ctx: Context, caller: Caller, command: SetupFlowRef): Promise<SetupFlowRow> {
  return findSetupFlow(ctx.db, caller, command.id, { clientSecret: command.clientSecret });
}

export interface UpdateSetupFlowCommand {
  readonly id: string;
  /** Each undefined when not sent. */
  readonly customerId?: string | undefined;
  readonly paymentMethodTypes?: readonly string[] | undefined;
  /** `payment_method_options` was sent (its one allowed value changes nothing, but it may only be sent before confirmation). */
  readonly paymentMethodOptionsSent: boolean;
  /** null empties it. */
  readonly description?: string | null | undefined;
  /** The metadata as sent, merged (and checked) against the flow's own once it is found; undefined when not sent. */
  readonly metadata?: unknown;
}

/**
 * `setup_flows.update`: `metadata` (merge rules of v2 §2.6) and `description` at any time;
 * `customer_id`, `payment_method_types` and `payment_method_options` only before confirmation
 * (`invalid_status` after). No event: v2 §6.1 has no `setup_flow.updated`.
 */
export async function updateSetupFlow(ctx: Context, caller: Caller, command: UpdateSetupFlowCommand): Promise<SetupFlowRow> {
  const { id, customerId, description } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const flow = await findSetupFlow(trx, caller, id, { lock: true });
    if (flow.status === 'processing' && (await liveNetworkClaim(trx, claimedFlow(flow), now))) reject('invalid_status', undefined, 'this setup flow is being confirmed; update it when the confirmation has ended');
    const beforeConfirmation = customerId !== undefined ? 'customer_id' : command.paymentMethodTypes !== undefined ? 'payment_method_types' : command.paymentMethodOptionsSent ? 'payment_method_options' : undefined;
    if (beforeConfirmation !== undefined && !CONFIRMABLE.has(flow.status)) {
      reject('invalid_status', beforeConfirmation, `customer_id, payment_method_types and payment_method_options can change only before confirmation; this setup flow is ${flow.status}`);
    }
    if (customerId !== undefined) await findCustomer(trx, caller, customerId, 'customer_id');
    const metadata = command.metadata === undefined ? undefined : mergeMetadata(flow.metadata, command.metadata, 'v2');
    return saveFlow(trx, flow, {
      ...(customerId === undefined ? {} : { customer_id: customerId }),
      ...(description === undefined ? {} : { description }),
      ...(metadata === undefined ? {} : { metadata: JSON.stringify(metadata) }),
      updated_at: now,
    });
  });
}

export interface ListSetupFlowsCommand {
  readonly page: V2Page;
  readonly customerId?: string | undefined;
}

/** `setup_flows.list`: newest first, v2 cursors, optionally one customer's. */
export async function listSetupFlows(ctx: Context, caller: Caller, command: ListSetupFlowsCommand): Promise<SetupFlowRow[]> {
  const { page, customerId } = command;
  const cursor = page.cursor === undefined ? undefined : await findSetupFlow(ctx.db, caller, page.cursor.id, { param: page.cursor.param });
  return ctx.db
    .selectFrom('setup_flows')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(customerId !== undefined, (q) => q.where('customer_id', '=', customerId!))
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.setup_flow_id }, 'setup_flow_id'))
    .execute();
}

export interface CancelSetupFlowCommand {
  readonly id: string;
  readonly reason: SetupFlowRow['cancellation_reason'];
}

/** `setup_flows.cancel`: from any status but succeeded and canceled; `setup_flow.canceled`. */
export async function cancelSetupFlow(ctx: Context, caller: Caller, command: CancelSetupFlowCommand): Promise<SetupFlowRow> {
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const flow = await findSetupFlow(trx, caller, command.id, { lock: true });
    if (flow.status === 'succeeded' || flow.status === 'canceled') reject('invalid_status', undefined, `a setup flow that is ${flow.status} cannot be canceled`);
    if (flow.status === 'processing' && (await liveNetworkClaim(trx, claimedFlow(flow), now))) reject('invalid_status', undefined, 'this setup flow is being confirmed; cancel it when the confirmation has ended');
    const canceled = await saveFlow(trx, flow, { status: 'canceled', cancellation_reason: command.reason, canceled_at: now, next_action: null, updated_at: now });
    await recordEvents(trx, ctx.ids, [setupFlowEvent(canceled, 'setup_flow.canceled', now)]);
    return canceled;
  });
}

/**
 * The payment method a confirmation names, inside the claiming transaction: a `pm_` card method
 * (the SDK's server-side way; one attached to another customer is refused), or a card token
 * (`tok_`, the browser's), consumed here and saved as a new unattached `pm_` method.
 */
async function methodToVerify(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, caller: Caller, flow: SetupFlowRow, id: string, at: Date): Promise<PaymentMethodRow> {
  if (id.startsWith('tok_')) {
    const token = await consumeToken(trx, caller, id, 'payment_method_id', at);
    const card = { fingerprint: token.fingerprint, brand: token.brand, last4: token.last4, expMonth: token.exp_month, expYear: token.exp_year, funding: token.funding, country: token.country, issuer: token.issuer };
    return insertPaymentMethod(trx, ctx, caller, { type: 'card', card, customerId: null, billing: { name: token.name, email: null, phone: null, address: null }, metadata: {}, at });
  }
  const method = await findPaymentMethod(trx, caller, id, { param: 'payment_method_id' });
  if (method.detached_at !== null) reject('detached_payment_method_not_usable', 'payment_method_id', `payment method ${id} was detached and cannot be saved`);
  if (method.type !== 'card' || method.fingerprint === null) reject('no_allowed_param', 'payment_method_id', 'a setup flow saves cards only');
  if (method.customer_id !== null && method.customer_id !== flow.customer_id) reject('payment_method_not_owned_by_customer', 'payment_method_id', `payment method ${id} belongs to another customer than this setup flow's`);
  return method;
}

type Claimed =
  | { readonly kind: 'claimed'; readonly flow: SetupFlowRow; readonly method: PaymentMethodRow; readonly authenticate: boolean; readonly claim: NetworkClaim }
  | { readonly kind: 'done'; readonly flow: SetupFlowRow };

/** The flow as a claimed object in `network_claims`. */
const claimedFlow = (flow: SetupFlowRow): ClaimedObject => ({ accountId: flow.account_id, livemode: flow.livemode, resource: 'setup_flow', resourceId: flow.setup_flow_id });

/** The 1-yen verification of `method` for `flow`, under the flow's id; `threeDSecure` when the buyer authenticated. */
function verification(flow: SetupFlowRow, method: PaymentMethodRow, at: Date, threeDSecure?: 'verified' | 'attempted'): AuthorizationRequest {
  return { reference: flow.setup_flow_id, fingerprint: method.fingerprint!, expMonth: method.exp_month!, expYear: method.exp_year!, amount: VERIFICATION_AMOUNT, currency: 'jpy', livemode: flow.livemode, at, kind: 'hold', ...(threeDSecure === undefined ? {} : { threeDSecure }) };
}

/**
 * In the claiming transaction: the flow `processing` with `changes`, and its claim (taking over one
 * that lapsed). Its recovery point is the verification it will ask, known now unless the buyer
 * authenticates first (then set once the issuer answered, verifyCard). A live claim: `invalid_status`.
 */
async function claimFlow(trx: Kysely<Database>, flow: SetupFlowRow, method: PaymentMethodRow, authenticate: boolean, changes: Updateable<SetupFlowsTable>, at: Date): Promise<Claimed> {
  const claim = await takeNetworkClaimOver(trx, claimedFlow(flow), 'setup_flows.confirm', at, { authorizations: authenticate ? [] : [verification(flow, method, at)] });
  if (claim === undefined) return reject('invalid_status', undefined, 'this setup flow is being confirmed');
  return { kind: 'claimed', flow: await saveFlow(trx, flow, { ...changes, status: 'processing', updated_at: at }), method, authenticate, claim };
}

export interface ConfirmSetupFlowCommand extends SetupFlowRef {
  /** A `pm_` method or a `tok_` token; undefined: the method attached before. */
  readonly methodId?: string | undefined;
  readonly returnUrl?: string | undefined;
}

/**
 * `setup_flows.confirm`: the server (secret key) or the browser (public key + `client_secret`)
 * confirms with `payment_method_id` (`pm_` or `tok_`; or the method attached before) and an
 * optional `return_url`. A card that asks for 3-D Secure stops at requires_action
 * (`setup_flow.requires_action`, `next_action`); otherwise the card is verified and the flow
 * succeeds (`setup_flow.succeeded`, the method attached to the customer) or fails
 * (`setup_flow.setup_failed`, then 402 with the card's code).
 */
export async function confirmSetupFlow(ctx: Context, caller: Caller, command: ConfirmSetupFlowCommand): Promise<SetupFlowRow> {
  const { id, clientSecret, methodId, returnUrl } = command;
  const now = ctx.clock.now();
  const claimed = await ctx.db.transaction().execute(async (trx): Promise<Claimed> => {
    const flow = await findSetupFlow(trx, caller, id, { lock: true, clientSecret });
    if (flow.status === 'processing' && flow.payment_method_id !== null && !(await liveNetworkClaim(trx, claimedFlow(flow), now))) {
      // A confirmation that died after its claim: take the claim over with the method it named.
      const method = await findPaymentMethod(trx, caller, flow.payment_method_id, { param: 'payment_method_id' });
      return claimFlow(trx, flow, method, flow.three_d_secure_status !== null, {}, now);
    }
    if (!CONFIRMABLE.has(flow.status)) reject('invalid_status', undefined, `a setup flow that is ${flow.status} cannot be confirmed`);
    const named = methodId ?? flow.payment_method_id;
    if (named === null) return reject('missing_param', 'payment_method_id', 'confirm needs a payment_method_id (none is attached to this setup flow)');
    const method = await methodToVerify(trx, ctx, caller, flow, named, now);
    const attached = { payment_method_id: method.payment_method_id, last_setup_error: null, return_url: returnUrl ?? flow.return_url, updated_at: now };
    if (cardNeedsThreeDSecure(method.fingerprint!)) {
      const row = await saveFlow(trx, flow, { ...attached, status: 'requires_action', three_d_secure_status: 'unverified', next_action: JSON.stringify({ type: 'three_d_secure', three_d_secure: { status: 'unverified' } }) });
      await recordEvents(trx, ctx.ids, [setupFlowEvent(row, 'setup_flow.requires_action', now)]);
      return { kind: 'done', flow: row };
    }
    return claimFlow(trx, flow, method, false, { ...attached, three_d_secure_status: null, next_action: null }, now);
  });
  return finish(ctx, caller, claimed);
}

/**
 * `setup_flows.complete_action`: the browser returns from the 3-D Secure challenge of a flow in
 * requires_action; the issuer's answer decides, then the card is verified as at confirmation.
 */
export async function completeSetupFlowAction(ctx: Context, caller: Caller, command: SetupFlowRef): Promise<SetupFlowRow> {
  const { id, clientSecret } = command;
  const now = ctx.clock.now();
  const claimed = await ctx.db.transaction().execute(async (trx): Promise<Claimed> => {
    const flow = await findSetupFlow(trx, caller, id, { lock: true, clientSecret });
    if (flow.status !== 'requires_action' || flow.payment_method_id === null) reject('invalid_status', undefined, `a setup flow that is ${flow.status} has no action to complete`);
    const method = await findPaymentMethod(trx, caller, flow.payment_method_id!, { param: 'payment_method_id' });
    return claimFlow(trx, flow, method!, true, { next_action: null }, now);
  });
  return finish(ctx, caller, claimed);
}

/**
 * Outside any transaction: 3-D Secure (when asked; the claim's recovery point then set to the
 * verification it leads to), the verification authorization and its release.
 */
async function verifyCard(ctx: Pick<Context, 'db' | 'processor'>, claimed: Extract<Claimed, { kind: 'claimed' }>): Promise<{ readonly code: ErrorCode; readonly message: string; readonly threeDSecure: string | null } | { readonly code: null; readonly threeDSecure: string | null }> {
  const { flow, method, claim } = claimed;
  const at = claim.claimedAt;
  let threeDSecure: 'verified' | 'attempted' | undefined;
  if (claimed.authenticate) {
    const [result] = await ctx.processor.authenticate([{ reference: flow.setup_flow_id, fingerprint: method.fingerprint!, livemode: flow.livemode, at }]);
    if (result!.status !== 'verified' && result!.status !== 'attempted') return { code: 'three_d_secure_failed', message: `3-D Secure authentication ended ${result!.status}`, threeDSecure: result!.status };
    threeDSecure = result!.status;
    await moveRecoveryPoint(ctx.db, claim, { authorizations: [verification(flow, method, at, threeDSecure)] });
  }
  const [authorization] = await ctx.processor.authorize([verification(flow, method, at, threeDSecure)]);
  if (!authorization!.approved) return { code: authorization!.code, message: authorization!.message, threeDSecure: threeDSecure ?? null };
  await ctx.processor.release([{ reference: flow.setup_flow_id, authorizationCode: authorization!.authorizationCode, amount: VERIFICATION_AMOUNT, at }]);
  return { code: null, threeDSecure: threeDSecure ?? null };
}

/** Verifies a claimed flow's card, then records the outcome if the claim still holds (dropping it in the same commit). */
async function finish(ctx: Context, caller: Caller, claimed: Claimed): Promise<SetupFlowRow> {
  if (claimed.kind === 'done') return claimed.flow;
  const { flow, method, claim } = claimed;
  const clientSecret = caller.kind === 'secret' ? undefined : flow.client_secret;
  let row: SetupFlowRow;
  try {
    const outcome = await verifyCard(ctx, claimed);
    const now = ctx.clock.now();
    row = await recordUnderClaim(ctx.db, claim, async (trx) => {
      const current = await findSetupFlow(trx, caller, flow.setup_flow_id, { lock: true, clientSecret });
      if (current.status !== 'processing') return current;
      if (outcome.code !== null) {
        const failed = await saveFlow(trx, current, {
          status: 'requires_payment_method',
          payment_method_id: null,
          three_d_secure_status: outcome.threeDSecure,
          last_setup_error: JSON.stringify({ type: 'card_error', code: outcome.code, message: outcome.message, payment_method_id: method.payment_method_id }),
          updated_at: now,
        });
        await recordEvents(trx, ctx.ids, [setupFlowEvent(failed, 'setup_flow.setup_failed', now)]);
        return failed;
      }
      if (current.customer_id !== null) {
        const latest = await findPaymentMethod(trx, caller, method.payment_method_id, { lock: true, param: 'payment_method_id' });
        if (latest.customer_id === null) await attachMethod(trx, ctx, caller, { id: latest.payment_method_id, param: 'payment_method_id', customerId: current.customer_id, at: now });
        else if (latest.customer_id !== current.customer_id) reject('payment_method_not_owned_by_customer', 'payment_method_id', `payment method ${latest.payment_method_id} was attached to another customer meanwhile`);
      }
      const succeeded = await saveFlow(trx, current, { status: 'succeeded', three_d_secure_status: outcome.threeDSecure, last_setup_error: null, updated_at: now });
      await recordEvents(trx, ctx.ids, [setupFlowEvent(succeeded, 'setup_flow.succeeded', now)]);
      return succeeded;
    });
  } catch (error) {
    // Another confirmation took the claim over (and records its outcome): that one stands.
    if (!(error instanceof NetworkClaimLost)) throw error;
    return findSetupFlow(ctx.db, caller, flow.setup_flow_id, { clientSecret });
  }
  const error = row.last_setup_error as { code?: ErrorCode; message?: string } | null;
  if (row.status === 'requires_payment_method' && error?.code !== undefined) throw new KessaiError(error.code, { message: error.message ?? 'the card was refused', param: 'payment_method_id' });
  return row;
}
