/**
 * Hosted checkout sessions (v2 §2.3, §4.1, §2.6 rule 6; service rules §3): create with line items
 * of prices, redirect the buyer to the session's `url`; completing the session on the hosted page
 * creates its payment flow (with `payment_flow_data.metadata` as the flow's metadata) and confirms
 * it; `checkout.session.completed`. Sessions are `open` → `complete` or `expired`; an open session
 * expires 24 hours after creation (session-expiry.ts) or when the merchant expires it.
 */
import { sql, type Kysely, type Selectable, type Updateable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { PaymentMethodType } from '../db/column-types';
import type { CheckoutSessionLineItemsTable, CheckoutSessionsTable, Database } from '../db/schema';
import { KessaiError, reject } from '../domain/errors';
import { CHECKOUT_SESSION_LIFETIME_MS, MAX_AMOUNT, MIN_PAYMENT_FLOW_AMOUNT } from '../domain/limits';
import { mergeMetadata, type Metadata } from '../domain/metadata';
import { toIsoSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvents, type EventInput } from '../events/outbox';
import { inV2Page, type V2Page } from '../operations/v2-pagination';
import { findPaymentFlow, type PaymentFlowRow } from '../payment-flows/payment-flow-object';
import { claimInlineConfirmation, finishConfirmation, flowEvent, insertPaymentFlow } from '../payment-flows/payment-flows';
import { resolvePaymentMethod } from '../payment-flows/payment-method';
import { findPrices } from '../prices/prices';
import { completeSetupFlowAction, confirmSetupFlow, findSetupFlow, insertSetupFlow, retrieveSetupFlow, setupFlowEvent, type SetupFlowRow } from '../setup-flows/setup-flows';
import { compositeKey, ROW_KEYS, ROW_KEYS_AT } from '../db/bulk-rows';
import { accountsOf, inAccounts } from '../db/account-scope';

export type CheckoutSessionRow = Selectable<CheckoutSessionsTable>;
export type LineItemRow = Selectable<CheckoutSessionLineItemsTable>;

/**
 * Where the hosted payment page lives when no server says otherwise (simulation, the engine
 * alone); the session id completes the address. `kessai serve` serves the page itself and sets
 * `config.checkoutPageBaseUrl` (src/api/server.ts, docs/decisions/payment-flows-and-checkout.md,
 * "Hosted checkout page and browser script").
 */
export const CHECKOUT_PAGE_BASE_URL = 'https://checkout.kessai.dev/pay/';

/** Where `kessai serve` serves the hosted page: a session's URL is `<public URL>/checkout/pay/<id>`. */
export const CHECKOUT_PAGE_PATH = '/checkout/pay';

/** The page base of a server reached at `publicUrl` (`--public-url`, KESSAI_PUBLIC_URL). */
export function checkoutPageBaseOf(publicUrl: string): string {
  let url: URL | undefined;
  try {
    url = new URL(publicUrl);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.search !== '' || url.hash !== '') {
    throw new Error(`the public URL must be an http(s) address without query or fragment, got ${JSON.stringify(publicUrl)}`);
  }
  return `${url.toString().replace(/\/+$/, '')}${CHECKOUT_PAGE_PATH}/`;
}

/** The base of the session URLs a context issues. */
export const checkoutPageBase = (ctx: Pick<Context, 'config'>): string => ctx.config.checkoutPageBaseUrl ?? CHECKOUT_PAGE_BASE_URL;
/** v2 §4.1: "may contain the literal placeholder {CHECKOUT_SESSION_ID}, which is replaced by the session id". */
export const CHECKOUT_SESSION_ID_PLACEHOLDER = '{CHECKOUT_SESSION_ID}';
/** **Decision:** at most 100 line items of at most 9,999 each: a checkout page, not a catalogue. */
export const MAX_LINE_ITEMS = 100;
export const MAX_QUANTITY = 9_999;

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type CheckoutSessionObject = {
  readonly id: string;
  readonly object: 'checkout.session';
  readonly livemode: boolean;
  readonly status: CheckoutSessionRow['status'];
  readonly mode: CheckoutSessionRow['mode'];
  /** The hosted payment page; null once the session is no longer open. */
  readonly url: string | null;
  readonly success_url: string;
  readonly cancel_url: string | null;
  /** Where the buyer is sent after paying: `success_url` with the placeholder replaced; null until complete. */
  readonly redirect_url: string | null;
  readonly amount_total: number;
  readonly currency: string;
  readonly line_items: { readonly object: 'list'; readonly data: readonly { readonly price: string; readonly quantity: number; readonly unit_amount: number; readonly amount_total: number }[] };
  readonly payment_method_types: readonly string[];
  readonly customer: string | null;
  readonly metadata: Readonly<Record<string, string | number | boolean>>;
  readonly payment_flow_data: { readonly capture_method: string; readonly metadata: Readonly<Record<string, string | number | boolean>> };
  readonly setup_flow_data: { readonly metadata: Readonly<Record<string, string | number | boolean>> };
  readonly payment_flow: string | null;
  readonly setup_flow: string | null;
  readonly expires_at: string;
  readonly completed_at: string | null;
  readonly created_at: string;
};

/** `success_url` with every `{CHECKOUT_SESSION_ID}` replaced by the session id. */
export function successRedirectUrl(successUrl: string, sessionId: string): string {
  return successUrl.split(CHECKOUT_SESSION_ID_PLACEHOLDER).join(sessionId);
}

export function renderCheckoutSession(row: CheckoutSessionRow, items: readonly LineItemRow[], pageBase = CHECKOUT_PAGE_BASE_URL): CheckoutSessionObject {
  return {
    id: row.checkout_session_id,
    object: 'checkout.session',
    livemode: row.livemode,
    status: row.status,
    mode: row.mode,
    url: row.status === 'open' ? pageBase + row.checkout_session_id : null,
    success_url: row.success_url,
    cancel_url: row.cancel_url,
    redirect_url: row.status === 'complete' ? successRedirectUrl(row.success_url, row.checkout_session_id) : null,
    amount_total: row.amount_total,
    currency: row.currency,
    line_items: {
      object: 'list',
      data: [...items].sort((a, b) => a.position - b.position).map((item) => ({ price: item.price_id, quantity: item.quantity, unit_amount: item.unit_amount, amount_total: item.amount_total })),
    },
    payment_method_types: row.payment_method_types,
    customer: row.customer_id,
    metadata: row.metadata,
    payment_flow_data: { capture_method: row.capture_method, metadata: row.payment_flow_metadata },
    setup_flow_data: { metadata: row.setup_flow_metadata },
    payment_flow: row.payment_flow_id,
    setup_flow: row.setup_flow_id,
    expires_at: toIsoSeconds(row.expires_at),
    completed_at: row.completed_at === null ? null : toIsoSeconds(row.completed_at),
    created_at: toIsoSeconds(row.created_at),
  };
}

/** A line of a new session: a price and how many. */
export interface LineItemInput {
  readonly price: string;
  readonly quantity: number;
}

/**
 * A session as the API shows it: the row, its line items, and the base of its hosted page URL
 * (the server's, `checkoutPageBase`).
 */
export interface CheckoutSessionView {
  readonly row: CheckoutSessionRow;
  readonly items: readonly LineItemRow[];
  readonly pageBase: string;
}

/** Line items of many sessions, by (account, mode, session id). */
export async function lineItemsOf(executor: Kysely<Database>, sessions: readonly Pick<CheckoutSessionRow, 'account_id' | 'livemode' | 'checkout_session_id'>[]): Promise<Map<string, LineItemRow[]>> {
  const byKey = new Map<string, LineItemRow[]>();
  if (sessions.length === 0) return byKey;
  const result = await sql<LineItemRow>`
    SELECT li.* FROM checkout_session_line_items li
    JOIN unnest(${sessions.map((s) => s.account_id)}::text[], ${sessions.map((s) => s.livemode)}::boolean[], ${sessions.map((s) => s.checkout_session_id)}::text[]) AS k(a, l, id)
      ON ${inAccounts('li.account_id', accountsOf(sessions, (s) => s.account_id))} AND li.account_id = k.a AND li.livemode = k.l AND li.checkout_session_id = k.id
    ORDER BY li.position`.execute(executor);
  for (const item of result.rows) {
    const key = sessionKey(item);
    const list = byKey.get(key) ?? [];
    list.push(item);
    byKey.set(key, list);
  }
  return byKey;
}

export const sessionKey = (row: { readonly account_id: string; readonly livemode: boolean; readonly checkout_session_id: string }): string =>
  compositeKey(row.account_id, row.livemode, row.checkout_session_id);

async function findSession(executor: Kysely<Database>, caller: Caller, id: string, lock: boolean, param = 'id'): Promise<CheckoutSessionRow> {
  let query = executor.selectFrom('checkout_sessions').selectAll().where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('checkout_session_id', '=', id);
  if (lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) return reject('invalid_id', param, `No such checkout session: ${id}`);
  return row;
}

async function viewOf(executor: Kysely<Database>, row: CheckoutSessionRow, ctx: Pick<Context, 'config'>): Promise<CheckoutSessionView> {
  return { row, items: (await lineItemsOf(executor, [row])).get(sessionKey(row)) ?? [], pageBase: checkoutPageBase(ctx) };
}

async function renderOne(executor: Kysely<Database>, row: CheckoutSessionRow, ctx: Pick<Context, 'config'>): Promise<CheckoutSessionObject> {
  const view = await viewOf(executor, row, ctx);
  return renderCheckoutSession(view.row, view.items, view.pageBase);
}

/** A new session, its parameters checked (src/api/v2/checkout-sessions.ts). */
export interface CreateCheckoutSessionCommand {
  readonly mode: CheckoutSessionRow['mode'];
  /** Empty in setup mode. */
  readonly items: readonly LineItemInput[];
  readonly paymentMethodTypes: readonly PaymentMethodType[];
  readonly successUrl: string;
  readonly cancelUrl: string | null;
  readonly metadata: Metadata;
  readonly customerId: string | null;
  readonly flowMetadata: Metadata;
  readonly setupMetadata: Metadata;
  readonly captureMethod: 'automatic' | 'manual';
}

/**
 * `checkout.sessions.create` (v2 §4.1): the line items' prices must exist and be active
 * (`invalid_id` on `line_items[i][price]`), the total (Σ price × quantity) a payable amount in
 * payment mode (`invalid_amount` on `line_items`), the customer an existing one.
 */
export async function createCheckoutSession(ctx: Context, caller: Caller, command: CreateCheckoutSessionCommand): Promise<CheckoutSessionView> {
  const { mode, items, customerId } = command;
  const now = ctx.clock.now();
  const row = await ctx.db.transaction().execute(async (trx) => {
    const prices = await findPrices(trx, caller, items.map((item) => item.price));
    const lines = items.map((item, i) => {
      const price = prices.get(item.price);
      if (!price || !price.active) return reject('invalid_id', `line_items[${i}][price]`, `No such price: ${item.price}`);
      return { ...item, position: i, unitAmount: price.unit_amount, total: price.unit_amount * item.quantity };
    });
    const total = lines.reduce((sum, line) => sum + line.total, 0);
    if (mode === 'payment' && (total < MIN_PAYMENT_FLOW_AMOUNT || total > MAX_AMOUNT)) reject('invalid_amount', 'line_items', `the total ${total} yen must be from ${MIN_PAYMENT_FLOW_AMOUNT} to ${MAX_AMOUNT}`);
    if (customerId !== null) {
      const found = await trx.selectFrom('customers').select('customer_id').where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('customer_id', '=', customerId).where('deleted_at', 'is', null).executeTakeFirst();
      if (!found) reject('invalid_id', 'customer', `No such customer: ${customerId}`);
    }
    const id = ctx.ids.next('checkoutSession');
    const session = await trx
      .insertInto('checkout_sessions')
      .values({
        account_id: caller.accountId,
        livemode: caller.livemode,
        checkout_session_id: id,
        status: 'open',
        mode,
        amount_total: total,
        payment_method_types: JSON.stringify(command.paymentMethodTypes),
        capture_method: command.captureMethod,
        success_url: command.successUrl,
        cancel_url: command.cancelUrl,
        customer_id: customerId,
        metadata: JSON.stringify(command.metadata),
        payment_flow_metadata: JSON.stringify(command.flowMetadata),
        setup_flow_metadata: JSON.stringify(command.setupMetadata),
        payment_flow_id: null,
        setup_flow_id: null,
        expires_at: new Date(now.getTime() + CHECKOUT_SESSION_LIFETIME_MS),
        completed_at: null,
        expired_at: null,
        created_at: now,
        updated_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    // The id → account directory the hosted page reads first (sql/000100).
    // An entry left by a removed session of the same id (seeded ids, tests) already says the same.
    await trx
      .insertInto('checkout_session_directory')
      .values({ checkout_session_id: id, account: caller.accountId, livemode: caller.livemode })
      .onConflict((oc) => oc.columns(['checkout_session_id', 'account', 'livemode']).doNothing())
      .execute();
    if (lines.length === 0) return session;
    await trx
      .insertInto('checkout_session_line_items')
      .values(lines.map((line) => ({ account_id: caller.accountId, livemode: caller.livemode, checkout_session_id: id, position: line.position, price_id: line.price, quantity: line.quantity, unit_amount: line.unitAmount, amount_total: line.total })))
      .execute();
    return session;
  });
  return viewOf(ctx.db, row, ctx);
}

export async function retrieveCheckoutSession(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<CheckoutSessionView> {
  return viewOf(ctx.db, await findSession(ctx.db, caller, command.id, false), ctx);
}

/** The hosted page's payment of a session: a card token or method (`methodId`) of `methodType`. */
export interface CompleteCheckoutSessionCommand {
  readonly id: string;
  readonly methodId: string | undefined;
  readonly methodType: PaymentMethodType;
}

/**
 * `checkout.sessions.complete`: the buyer pays on the hosted page with `payment_method` (a card
 * token, or `payment_method_type` `paypay`). The session's payment flow is created on the first
 * attempt (amount = the total, metadata = `payment_flow_data.metadata`, v2 §2.6 rule 6) and
 * confirmed; the hosted page runs any 3-D Secure challenge itself, so confirmation ends in
 * succeeded / requires_capture or in a decline. Success: the session is `complete` with
 * `checkout.session.completed`; a decline leaves it open (the buyer may try another card) and
 * fails with the card error. A session past `expires_at` cannot be completed, even before the
 * expiry job has marked it.
 *
 * The network is never asked under a lock: a short transaction (session, then flow, locked)
 * claims the flow (`processing`, committed), the network is asked with no transaction open, and
 * a second short transaction (session, then flow, locked again) records the answer and completes
 * the session in the same commit, so a flow never has the money while its session stays open
 * unnoticed. A second attempt meanwhile finds the flow `processing` and is refused
 * (`invalid_status`); a flow that already has the money (paid in the browser) only completes the
 * session.
 */
export async function completeCheckoutSession(ctx: Context, caller: Caller, command: CompleteCheckoutSessionCommand): Promise<CheckoutSessionView> {
  const { id, methodId, methodType: methodTypeText } = command;
  if ((await findSession(ctx.db, caller, id, false)).mode === 'setup') return completeSetupSession(ctx, caller, id, methodId, methodTypeText);
  const now = ctx.clock.now();
  const first = await ctx.db.transaction().execute(async (trx) => {
    const session = await findSession(trx, caller, id, true);
    assertOpen(session, now);
    if (!session.payment_method_types.includes(methodTypeText)) reject('no_allowed_param', 'payment_method_type', `this session accepts ${session.payment_method_types.join(', ')}`);
    const flow = await sessionPaymentFlow(trx, ctx, caller, session, now);
    const withFlow = session.payment_flow_id === null ? await saveSession(trx, session, { payment_flow_id: flow.payment_flow_id, updated_at: now }) : session;
    if (flowHasMoney(flow)) return { session: await completeSession(trx, ctx, withFlow, now), claim: undefined };
    const snapshot = await resolvePaymentMethod(trx, caller, { type: methodTypeText, id: methodId, customerId: flow.customer_id, at: now });
    return { session: withFlow, claim: await claimInlineConfirmation(trx, ctx, flow, snapshot, now) };
  });
  if (first.claim === undefined) return viewOf(ctx.db, first.session, ctx);
  let session = first.session;
  const outcome = await finishConfirmation(ctx, first.claim, {
    before: async (trx) => {
      session = await findSession(trx, caller, id, true);
    },
    after: async (trx, recorded) => {
      // The merchant may have expired it meanwhile only while the flow had no money (expireSessions).
      if (session.status === 'open' && flowHasMoney(recorded.row)) session = await completeSession(trx, ctx, session, now);
    },
  });
  if (outcome.failure !== null) throw new KessaiError(outcome.failure.code, { message: outcome.failure.message, param: 'payment_method' });
  return viewOf(ctx.db, session, ctx);
}

/** A payment flow that has the buyer's money: captured, or held for a manual capture. */
export function flowHasMoney(flow: Pick<PaymentFlowRow, 'status'>): boolean {
  return PAID_FLOW_STATUSES.includes(flow.status);
}
const PAID_FLOW_STATUSES: readonly PaymentFlowRow['status'][] = ['succeeded', 'requires_capture'];

/** Completes a locked open session at `at`, with `checkout.session.completed`. */
async function completeSession(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'config'>, session: CheckoutSessionRow, at: Date): Promise<CheckoutSessionRow> {
  const completed = await saveSession(trx, session, { status: 'complete', completed_at: at, updated_at: at });
  await recordEvents(trx, ctx.ids, [completedEvent(completed, await renderOne(trx, completed, ctx), at)]);
  return completed;
}

/**
 * The payment flow of a locked open payment session, made on first need (amount = the total,
 * metadata = `payment_flow_data.metadata`, v2 §2.6 rule 6; `payment_flow.created`), else its
 * own, locked. The session's own flow: the hosted page needs no client secret for it.
 */
async function sessionPaymentFlow(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, caller: Caller, session: CheckoutSessionRow, now: Date): Promise<PaymentFlowRow> {
  if (session.payment_flow_id !== null) return findPaymentFlow(trx, { ...caller, kind: 'secret' }, session.payment_flow_id, { lock: true });
  return insertPaymentFlow(
    trx,
    ctx,
    caller,
    {
      amount: session.amount_total,
      captureMethod: session.capture_method,
      paymentMethodTypes: session.payment_method_types,
      extendedAuthorization: undefined,
      metadata: session.payment_flow_metadata,
      customerId: session.customer_id,
      description: null,
      checkoutSessionId: session.checkout_session_id,
    },
    now,
  );
}

/** A session as the hosted page finds it by its URL alone: the session, its account and mode. */
export interface HostedSession {
  readonly caller: Caller;
  readonly session: CheckoutSessionObject;
  readonly row: CheckoutSessionRow;
  /** The session's payment flow (payment mode, once made). */
  readonly flow: PaymentFlowRow | null;
  /** The session's setup flow (setup mode, once made). */
  readonly setupFlow: SetupFlowRow | null;
}

/**
 * The session of a hosted page URL (`invalid_id` on `id` for an unknown one): the directory
 * (sql/000100) names its account and mode, then the session is read from its account. The
 * caller is the account's public key, as the buyer's browser holds it.
 */
export async function findHostedSession(ctx: Pick<Context, 'db' | 'config'>, id: string): Promise<HostedSession> {
  // Two entries only where seeded ids repeat across accounts (sql/000100): neither is the page's.
  const entries = await ctx.db.selectFrom('checkout_session_directory').selectAll().where('checkout_session_id', '=', id).limit(2).execute();
  const entry = entries.length === 1 ? entries[0]! : undefined;
  if (!entry) return reject('invalid_id', 'id', `No such checkout session: ${id}`);
  const caller: Caller = { accountId: entry.account, livemode: entry.livemode, kind: 'public' };
  const row = await findSession(ctx.db, caller, id, false);
  const server: Caller = { ...caller, kind: 'secret' };
  const flow = row.payment_flow_id === null ? null : await findPaymentFlow(ctx.db, server, row.payment_flow_id);
  const setupFlow = row.setup_flow_id === null ? null : await findSetupFlow(ctx.db, server, row.setup_flow_id);
  return { caller, row, flow, setupFlow, session: await renderOne(ctx.db, row, ctx) };
}

/**
 * The hosted page is opened on an open session: its payment flow (payment mode) or setup flow
 * (setup mode) is made now if no earlier visit or attempt made it, so the page can confirm it in
 * the browser with its `client_secret` (v2 §4.8). Other sessions are answered as they are.
 */
export async function openHostedSession(ctx: Context, id: string): Promise<HostedSession> {
  const found = await findHostedSession(ctx, id);
  const now = ctx.clock.now();
  const flowId = found.row.mode === 'setup' ? found.row.setup_flow_id : found.row.payment_flow_id;
  if (found.row.status !== 'open' || flowId !== null || found.row.expires_at.getTime() <= now.getTime()) return found;
  await ctx.db.transaction().execute(async (trx) => {
    const session = await findSession(trx, found.caller, id, true);
    if (session.status !== 'open') return;
    if (session.mode === 'setup') {
      if (session.setup_flow_id === null) await sessionSetupFlow(trx, ctx, found.caller, session, now);
      return;
    }
    if (session.payment_flow_id !== null) return;
    const flow = await sessionPaymentFlow(trx, ctx, found.caller, session, now);
    await saveSession(trx, session, { payment_flow_id: flow.payment_flow_id, updated_at: now });
  });
  return findHostedSession(ctx, id);
}

/**
 * The buyer is back on the hosted page from the session's flow (its id and `client_secret`, as
 * the browser script hands them over: a payment flow for a payment session, a setup flow for a
 * setup session): once the flow has the money (succeeded, or requires_capture for manual capture)
 * or the card is saved (setup flow succeeded) the session is `complete` with
 * `checkout.session.completed`, once; otherwise it stays as it is (a declined card: the buyer
 * tries another). A flow that is not the session's, or a wrong secret, is `invalid_id`.
 */
export async function completeHostedSessionFromFlow(ctx: Context, id: string, flowId: string, clientSecret: string): Promise<HostedSession> {
  const found = await findHostedSession(ctx, id);
  const setup = found.row.mode === 'setup';
  const param = setup ? 'setup_flow_id' : 'payment_flow_id';
  if ((setup ? found.row.setup_flow_id : found.row.payment_flow_id) !== flowId) return reject('invalid_id', param, `No such ${setup ? 'setup' : 'payment'} flow: ${flowId}`);
  if (setup) await findSetupFlow(ctx.db, found.caller, flowId, { param, clientSecret });
  else await findPaymentFlow(ctx.db, found.caller, flowId, { param, clientSecret });
  const server: Caller = { ...found.caller, kind: 'secret' };
  await ctx.db.transaction().execute(async (trx) => {
    const session = await findSession(trx, found.caller, id, true);
    if (session.status !== 'open') return;
    const done = setup ? (await findSetupFlow(trx, server, flowId)).status === 'succeeded' : flowHasMoney(await findPaymentFlow(trx, server, flowId));
    if (done) await completeSession(trx, ctx, session, ctx.clock.now());
  });
  return findHostedSession(ctx, id);
}

/**
 * The setup flow of a locked open setup session, made now (usage off_session, metadata =
 * `setup_flow_data.metadata`, v2 §2.6 rule 6) and recorded on the session.
 */
async function sessionSetupFlow(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, caller: Caller, session: CheckoutSessionRow, now: Date): Promise<SetupFlowRow> {
  const flow = await insertSetupFlow(trx, ctx, caller, { usage: 'off_session', customerId: session.customer_id, description: null, metadata: session.setup_flow_metadata, checkoutSessionId: session.checkout_session_id }, now);
  await saveSession(trx, session, { setup_flow_id: flow.setup_flow_id, updated_at: now });
  return flow;
}

/**
 * A setup session completed on the hosted page: its setup flow is made on the first attempt
 * (metadata = `setup_flow_data.metadata`, v2 §2.6 rule 6), then confirmed with the card token
 * outside the session's lock (the network is called by the setup flow, outside any transaction),
 * any 3-D Secure challenge run inline as the hosted page runs it; once the flow succeeded the
 * session is `complete` with `checkout.session.completed`, once. A refused card leaves the session
 * open for another card. An attempt whose flow already succeeded (a retry after a crash) only
 * completes the session.
 */
async function completeSetupSession(ctx: Context, caller: Caller, id: string, methodId: string | undefined, methodType: PaymentMethodType): Promise<CheckoutSessionView> {
  if (methodType !== 'card') reject('no_allowed_param', 'payment_method_type', 'a setup session saves cards only');
  // The session's own flow: the hosted page needs no client secret for it.
  const server: Caller = { ...caller, kind: 'secret' };
  const flowId = await ctx.db.transaction().execute(async (trx) => {
    const session = await findSession(trx, caller, id, true);
    const now = ctx.clock.now();
    assertOpen(session, now);
    if (session.setup_flow_id !== null) return session.setup_flow_id;
    return (await sessionSetupFlow(trx, ctx, caller, session, now)).setup_flow_id;
  });
  let flow = await retrieveSetupFlow(ctx, server, { id: flowId });
  if (flow.status !== 'succeeded') {
    flow = await confirmSetupFlow(ctx, server, { id: flowId, methodId });
    if (flow.status === 'requires_action') flow = await completeSetupFlowAction(ctx, server, { id: flowId });
  }
  if (flow.status !== 'succeeded') return reject('invalid_status', undefined, `the setup flow of checkout session ${id} is ${flow.status}`);
  const row = await ctx.db.transaction().execute(async (trx) => {
    const session = await findSession(trx, caller, id, true);
    // A racing attempt completed it already (or the merchant expired it meanwhile): that stands.
    if (session.status !== 'open') return session;
    return completeSession(trx, ctx, session, ctx.clock.now());
  });
  return viewOf(ctx.db, row, ctx);
}

/** `checkout.session.completed` of a session just completed, at `at`. */
function completedEvent(row: CheckoutSessionRow, data: CheckoutSessionObject, at: Date): EventInput {
  return { accountId: row.account_id, livemode: row.livemode, type: 'checkout.session.completed', data, at, apiVersion: 'v2' };
}

function assertOpen(session: CheckoutSessionRow, now: Date): void {
  if (session.status !== 'open' || session.expires_at.getTime() <= now.getTime()) {
    reject('invalid_status', undefined, `checkout session ${session.checkout_session_id} is ${session.status === 'open' ? 'expired' : session.status}`);
  }
}

async function saveSession(trx: Kysely<Database>, session: CheckoutSessionRow, changes: Updateable<CheckoutSessionsTable>): Promise<CheckoutSessionRow> {
  return trx
    .updateTable('checkout_sessions')
    .set(changes)
    .where('account_id', '=', session.account_id)
    .where('livemode', '=', session.livemode)
    .where('checkout_session_id', '=', session.checkout_session_id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Expires open sessions, each at its own instant (`at(row)`): status `expired`,
 * `checkout.session.expired`, and the session's payment flow, if a failed attempt left one
 * unpaid, canceled with reason `abandoned` (`payment_flow.canceled`). A paid session never
 * expires: one whose flow has the money (succeeded or requires_capture: confirmed in the browser,
 * the buyer never came back) is completed instead, at the same instant, with
 * `checkout.session.completed`; one whose flow is `processing` (a confirmation at the network) is
 * left open for that confirmation to decide. Rows must be locked by the caller; their flows are
 * locked here (session → flow, the order of every checkout transaction), so no confirmation
 * starts or ends while they are decided. Shared by `checkout.sessions.expire` and the expiry job
 * (one statement per table and outcome). Returns how many expired.
 */
export async function expireSessions(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, sessions: readonly CheckoutSessionRow[], at: (row: CheckoutSessionRow) => Date): Promise<number> {
  if (sessions.length === 0) return 0;
  // A request's sessions, or a job batch's: every statement names their accounts (account-scope.ts).
  const accountIds = accountsOf(sessions, (s) => s.account_id);
  const flowStatus = await lockSessionFlows(trx, accountIds, sessions);
  const statusOf = (s: CheckoutSessionRow) => (s.payment_flow_id === null ? undefined : flowStatus.get(compositeKey(s.account_id, s.livemode, s.payment_flow_id)));
  const paid = sessions.filter((s) => { const status = statusOf(s); return status !== undefined && flowHasMoney({ status }); });
  const unpaid = sessions.filter((s) => { const status = statusOf(s); return status === undefined || (status !== 'processing' && !flowHasMoney({ status })); });
  const completed = await endSessions(trx, accountIds, paid, at, 'complete');
  const expired = await endSessions(trx, accountIds, unpaid, at, 'expired');
  const withFlow = expired.filter((s) => s.payment_flow_id !== null);
  const f = ROW_KEYS_AT.table('u', withFlow.map((s) => ({ accountId: s.account_id, livemode: s.livemode, id: s.payment_flow_id!, at: at(s) })));
  const canceled =
    withFlow.length === 0
      ? { rows: [] as PaymentFlowRow[] }
      : await sql<PaymentFlowRow>`
    UPDATE payment_flows f SET status = 'canceled', cancellation_reason = 'abandoned', canceled_at = ${f.col('t')}, updated_at = ${f.col('t')}, next_action = NULL
    FROM ${f.from}
    WHERE ${inAccounts('f.account_id', accountIds)} AND f.account_id = ${f.col('a')} AND f.livemode = ${f.col('l')} AND f.payment_flow_id = ${f.col('id')}
      AND f.status IN ('requires_payment_method', 'requires_confirmation', 'requires_action')
    RETURNING f.*`.execute(trx);
  // A setup session's flow left unfinished by a failed attempt is abandoned with it.
  const withSetup = expired.filter((s) => s.setup_flow_id !== null);
  const g = ROW_KEYS_AT.table('u', withSetup.map((s) => ({ accountId: s.account_id, livemode: s.livemode, id: s.setup_flow_id!, at: at(s) })));
  const canceledSetups =
    withSetup.length === 0
      ? { rows: [] as SetupFlowRow[] }
      : await sql<SetupFlowRow>`
    UPDATE setup_flows f SET status = 'canceled', cancellation_reason = 'abandoned', canceled_at = ${g.col('t')}, updated_at = ${g.col('t')}, next_action = NULL
    FROM ${g.from}
    WHERE ${inAccounts('f.account_id', accountIds)} AND f.account_id = ${g.col('a')} AND f.livemode = ${g.col('l')} AND f.setup_flow_id = ${g.col('id')}
      AND f.status IN ('requires_payment_method', 'requires_confirmation', 'requires_action')
    RETURNING f.*`.execute(trx);
  const setupBySession = new Map(canceledSetups.rows.map((f) => [compositeKey(f.account_id, f.livemode, f.checkout_session_id), f]));
  const items = await lineItemsOf(trx, [...expired, ...completed]);
  const events: EventInput[] = [];
  const sorted = [...expired, ...completed].sort((x, y) => at(x).getTime() - at(y).getTime() || sessionKey(x).localeCompare(sessionKey(y)));
  const flowBySession = new Map(canceled.rows.map((f) => [compositeKey(f.account_id, f.livemode, f.checkout_session_id), f]));
  for (const session of sorted) {
    const data = renderCheckoutSession(session, items.get(sessionKey(session)) ?? []);
    if (session.status === 'complete') {
      events.push(completedEvent(session, data, at(session)));
      continue;
    }
    const flow = flowBySession.get(sessionKey(session));
    if (flow) events.push(flowEvent(flow, 'payment_flow.canceled', at(session)));
    const setup = setupBySession.get(sessionKey(session));
    if (setup) events.push(setupFlowEvent(setup, 'setup_flow.canceled', at(session)));
    events.push({ accountId: session.account_id, livemode: session.livemode, type: 'checkout.session.expired', data, at: at(session), apiVersion: 'v2' });
  }
  await recordEvents(trx, ctx.ids, events);
  return expired.length;
}

/** Ends the open sessions among `sessions`, each at `at(row)`: `complete` (completed_at) or `expired` (expired_at). One UPDATE. */
async function endSessions(trx: Kysely<Database>, accountIds: readonly string[], sessions: readonly CheckoutSessionRow[], at: (row: CheckoutSessionRow) => Date, status: 'complete' | 'expired'): Promise<CheckoutSessionRow[]> {
  if (sessions.length === 0) return [];
  const u = ROW_KEYS_AT.table('u', sessions.map((s) => ({ accountId: s.account_id, livemode: s.livemode, id: s.checkout_session_id, at: at(s) })));
  const { rows } = await sql<CheckoutSessionRow>`
    UPDATE checkout_sessions s SET status = ${status}, ${sql.ref(status === 'complete' ? 'completed_at' : 'expired_at')} = ${u.col('t')}, updated_at = ${u.col('t')}
    FROM ${u.from}
    WHERE ${inAccounts('s.account_id', accountIds)} AND s.account_id = ${u.col('a')} AND s.livemode = ${u.col('l')} AND s.checkout_session_id = ${u.col('id')} AND s.status = 'open'
    RETURNING s.*`.execute(trx);
  return rows;
}

/** The statuses of the sessions' payment flows, the flows locked (FOR UPDATE), by flow key. */
async function lockSessionFlows(trx: Kysely<Database>, accountIds: readonly string[], sessions: readonly CheckoutSessionRow[]): Promise<Map<string, PaymentFlowRow['status']>> {
  const withFlow = sessions.filter((s) => s.payment_flow_id !== null);
  if (withFlow.length === 0) return new Map();
  const k = ROW_KEYS.table('k', withFlow.map((s) => ({ accountId: s.account_id, livemode: s.livemode, id: s.payment_flow_id! })));
  const { rows } = await sql<Pick<PaymentFlowRow, 'account_id' | 'livemode' | 'payment_flow_id' | 'status'>>`
    SELECT f.account_id, f.livemode, f.payment_flow_id, f.status FROM payment_flows f, ${k.from}
    WHERE ${inAccounts('f.account_id', accountIds)} AND f.account_id = ${k.col('a')} AND f.livemode = ${k.col('l')} AND f.payment_flow_id = ${k.col('id')}
    ORDER BY f.account_id, f.livemode, f.payment_flow_id
    FOR UPDATE OF f`.execute(trx);
  return new Map(rows.map((f) => [compositeKey(f.account_id, f.livemode, f.payment_flow_id), f.status]));
}

/**
 * `checkout.sessions.expire`: the merchant ends an open session now (`invalid_status` otherwise).
 * A session whose flow has the money is completed instead (a paid session never expires), and one
 * whose flow is at the network is refused (`invalid_status`) until that confirmation ends.
 */
export async function expireCheckoutSession(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<CheckoutSessionView> {
  const { id } = command;
  const row = await ctx.db.transaction().execute(async (trx) => {
    const session = await findSession(trx, caller, id, true);
    const now = ctx.clock.now();
    if (session.status !== 'open') return reject('invalid_status', undefined, `checkout session ${id} is ${session.status}`);
    // An open session already past its lifetime expired at expires_at, not now.
    const at = session.expires_at.getTime() <= now.getTime() ? session.expires_at : now;
    await expireSessions(trx, ctx, [session], () => at);
    const ended = await findSession(trx, caller, id, false);
    if (ended.status === 'open') reject('invalid_status', undefined, `checkout session ${id} is being paid; its payment flow's confirmation decides how it ends`);
    return ended;
  });
  return viewOf(ctx.db, row, ctx);
}

/** `metadata`: undefined when not sent; merged into the session's (v2 §2.6 rules 3–5). */
export interface UpdateCheckoutSessionCommand {
  readonly id: string;
  readonly metadata: unknown;
}

/**
 * `checkout.sessions.update`: `metadata` (v2 §2.6 rules 3–5), in any status. v2 §6.1 has no
 * `checkout.session.updated`, so no event is written (as payment_flows.update).
 */
export async function updateCheckoutSession(ctx: Context, caller: Caller, command: UpdateCheckoutSessionCommand): Promise<CheckoutSessionView> {
  const now = ctx.clock.now();
  const row = await ctx.db.transaction().execute(async (trx) => {
    const session = await findSession(trx, caller, command.id, true);
    if (command.metadata === undefined) return session;
    const metadata = mergeMetadata(session.metadata, command.metadata, 'v2');
    return saveSession(trx, session, { metadata: JSON.stringify(metadata), updated_at: now });
  });
  return viewOf(ctx.db, row, ctx);
}

export const SESSION_STATUSES = ['open', 'complete', 'expired'] as const;

export interface ListCheckoutSessionsCommand {
  readonly page: V2Page;
  readonly status: CheckoutSessionRow['status'] | undefined;
  readonly customer: string | undefined;
}

/** A page of sessions (one row beyond the page tells there is more), their line items by `sessionKey`, and the page base. */
export interface CheckoutSessionPage {
  readonly rows: readonly CheckoutSessionRow[];
  readonly items: ReadonlyMap<string, readonly LineItemRow[]>;
  readonly pageBase: string;
}

/** `checkout.sessions.list`: newest first, cursors, optional `status` and `customer` filters. */
export async function listCheckoutSessions(ctx: Context, caller: Caller, command: ListCheckoutSessionsCommand): Promise<CheckoutSessionPage> {
  const { page, status, customer } = command;
  const cursor = page.cursor === undefined ? undefined : await findSession(ctx.db, caller, page.cursor.id, false, page.cursor.param);
  const rows = await ctx.db
    .selectFrom('checkout_sessions')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(status !== undefined, (q) => q.where('status', '=', status!))
    .$if(customer !== undefined, (q) => q.where('customer_id', '=', customer!))
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.checkout_session_id }, 'checkout_session_id'))
    .execute();
  // One query for the line items of every session on the page.
  return { rows, items: await lineItemsOf(ctx.db, rows.slice(0, page.limit)), pageBase: checkoutPageBase(ctx) };
}

export const CHECKOUT_SESSIONS_URL = '/v2/checkout/sessions';

/** A line item's id: the session's id and its position (`<cs_…>_li_<n>`), stable and unique. */
export const lineItemId = (sessionId: string, position: number): string => `${sessionId}_li_${position}`;

export interface SessionLineItemsCommand {
  readonly id: string;
  readonly page: V2Page;
}

/** A window of a session's line items, in the order given. */
export interface LineItemPage {
  readonly session: CheckoutSessionRow;
  readonly items: readonly LineItemRow[];
  readonly hasMore: boolean;
}

/**
 * `checkout.sessions.list_line_items` (`GET /v2/checkout/sessions/{id}/line_items`): the session's
 * items in the order given, `limit` and cursors over the item ids (at most 100 items exist).
 */
export async function listCheckoutSessionLineItems(ctx: Context, caller: Caller, command: SessionLineItemsCommand): Promise<LineItemPage> {
  const { id, page } = command;
  const session = await findSession(ctx.db, caller, id, false);
  const items = (await lineItemsOf(ctx.db, [session])).get(sessionKey(session)) ?? [];
  let start = 0;
  let end = items.length;
  if (page.cursor !== undefined) {
    const at = items.findIndex((item) => lineItemId(id, item.position) === page.cursor!.id);
    if (at < 0) return reject('invalid_id', page.cursor.param, `No such line item: ${page.cursor.id}`);
    if (page.cursor.param === 'starting_after') start = at + 1;
    else end = at;
  }
  const window = page.cursor?.param === 'ending_before' ? items.slice(Math.max(start, end - page.limit), end) : items.slice(start, start + page.limit);
  const hasMore = page.cursor?.param === 'ending_before' ? end - page.limit > start : start + page.limit < end;
  return { session, items: window, hasMore };
}
