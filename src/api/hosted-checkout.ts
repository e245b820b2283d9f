/**
 * What the buyer's browser reaches on `kessai serve` without an API key:
 *
 * - the hosted checkout page of a session (`GET /checkout/pay/{id}`, the session's `url`) and its
 *   return address (`…/return`), where the browser script brings the buyer back after confirming
 *   the session's payment flow (payment mode) or setup flow (setup mode, the card saved to the
 *   customer): a flow with the money, or the card saved, completes the session, then the buyer
 *   goes to `success_url` with the session id filled in;
 * - the browser script (`/v2/js/kessai.js`) and the page glue (`/v2/js/checkout.js`);
 * - the simulated redirect pages of the browser script: the 3-D Secure challenge and the test-mode
 *   PayPay / Apple Pay wallets. They act with the public key and the flow's `client_secret` the
 *   script hands over, through the same operations as the v2 API (payment_flows.complete_action,
 *   setup_flows.complete_action, payment_flows.confirm, tokens.create), and send the buyer to
 *   `return_url` with `payment_flow_id` and `payment_flow_client_secret` (v2 §4.8 step 4), or
 *   `setup_flow_id` and `setup_flow_client_secret` for a setup flow.
 *
 * Every page is rendered by src/checkout/hosted-page.ts under its Content-Security-Policy; a
 * refusal is a page too, never a JSON body.
 */
import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authenticate, publicKeyOf, type Caller } from '../accounts/accounts';
import { CHECKOUT_PAGE_PATH, checkoutPageBase, completeHostedSessionFromFlow, findHostedSession, openHostedSession, type HostedSession } from '../checkout/checkout-sessions';
import {
  BROWSER_SCRIPT_PATH,
  CHECKOUT_SCRIPT_PATH,
  pageSecurityPolicy,
  renderCheckoutPage,
  renderRefusalPage,
  renderSessionEndPage,
  renderSetupPage,
  renderThreeDSecurePage,
  renderWalletPage,
  THREE_D_SECURE_PAGE_PATH,
  WALLET_PAGE_PATH,
  type FlowKind,
  type PageLineItem,
  type RedirectPageView,
} from '../checkout/hosted-page';
import { defaultConfiguration, renderPaymentMethodConfiguration } from '../checkout/payment-method-configurations';
import { KessaiError } from '../domain/errors';
import { DISPLAY_METHODS, type DisplayMethod } from '../domain/payment-method-display';
import type { Context } from '../engine/context';
import { runOperation } from './operations';
import type { PaymentFlowObject } from '../payment-flows/payment-flow-object';
import { findPrices } from '../prices/prices';
import { TEST_CARDS } from '../processor/test-cards';
import type { SetupFlowObject } from '../setup-flows/setup-flows';
import { packagePath } from '../package-root';

const script = (name: string): string => readFileSync(packagePath(`src/checkout/browser/${name}`), 'utf8');
const SCRIPTS: Readonly<Record<string, string>> = { [BROWSER_SCRIPT_PATH]: script('kessai.js'), [CHECKOUT_SCRIPT_PATH]: script('checkout.js') };

/** What the buyer is told when the browser script brings them back without the money taken. */
const NOTICES: Readonly<Record<string, string>> = {
  canceled: '本人認証がキャンセルされました。 / 3-D Secure authentication was canceled: authenticate, or pay another way.',
  failed: 'お支払いが承認されませんでした。別の方法でお支払いください。 / The payment was not approved: try another card or way to pay.',
};
const SETUP_NOTICES: Readonly<Record<string, string>> = {
  canceled: '本人認証がキャンセルされました。 / 3-D Secure authentication was canceled: authenticate, or save another card.',
  failed: 'カードを保存できませんでした。別のカードをお試しください。 / The card could not be saved: try another card.',
};

export type Query = Readonly<Record<string, unknown>>;
export const text = (fields: Query, name: string): string => (typeof fields[name] === 'string' ? (fields[name] as string) : '');

/** A page of kessai's own: HTML under its Content-Security-Policy, never cached, no referrer. */
export function sendPage(reply: FastifyReply, status: number, html: string, formTargets: readonly string[] = []): FastifyReply {
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .header('content-security-policy', pageSecurityPolicy(formTargets))
    .header('cache-control', 'no-store')
    .header('referrer-policy', 'no-referrer')
    .header('x-content-type-options', 'nosniff')
    .send(html);
}

/** An http(s) address or null. */
export function httpUrl(value: string): URL | null {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : null;
  } catch {
    return null;
  }
}

/** `return_url` with the flow handed back (v2 §4.8 step 4) and how the redirect ended. */
export function returnAddress(returnUrl: string, flowId: string, clientSecret: string, redirectStatus: string, flow: FlowKind = 'payment_flow'): string {
  const url = new URL(returnUrl);
  url.searchParams.set(`${flow}_id`, flowId);
  url.searchParams.set(`${flow}_client_secret`, clientSecret);
  url.searchParams.set('redirect_status', redirectStatus);
  return url.toString();
}

/** The line items as the page lists them: the price's nickname, else its product's name, else its id. */
async function pageLineItems(ctx: Context, found: HostedSession): Promise<PageLineItem[]> {
  const items = found.session.line_items.data;
  const prices = await findPrices(ctx.db, found.caller, items.map((item) => item.price));
  const productIds = [...new Set([...prices.values()].map((price) => price.product_id).filter((id): id is string => id !== null))];
  const products =
    productIds.length === 0
      ? []
      : await ctx.db.selectFrom('products').select(['product_id', 'name']).where('account_id', '=', found.caller.accountId).where('livemode', '=', found.caller.livemode).where('product_id', 'in', productIds).execute();
  const names = new Map(products.map((product) => [product.product_id, product.name]));
  return items.map((item) => {
    const price = prices.get(item.price);
    const label = price?.nickname ?? (price?.product_id ? names.get(price.product_id) : undefined) ?? item.price;
    return { label, quantity: item.quantity, unitAmount: item.unit_amount, amountTotal: item.amount_total };
  });
}

/** The session's payment method types the account's configuration displays (v2 §4.5), in display order. */
async function shownMethods(ctx: Context, found: HostedSession): Promise<DisplayMethod[]> {
  const configuration = renderPaymentMethodConfiguration(await defaultConfiguration(ctx.db, ctx, found.caller));
  return DISPLAY_METHODS.filter((method) => found.session.payment_method_types.includes(method) && configuration[method].available);
}

/** A handed-over flow as the redirect pages read it, payment flow or setup flow. */
interface HandedFlow {
  readonly status: string;
  readonly checkoutSession: string | null;
  readonly cardLast4: string | null;
}

/**
 * The redirect page's hand-over: the public key's account and the flow it names (`payment_flow_id`,
 * or `setup_flow_id` for a setup flow), by its client secret.
 */
async function handedOver(ctx: Context, fields: Query): Promise<{ caller: Caller; flow: HandedFlow; view: RedirectPageView; returnUrl: URL }> {
  const returnUrl = httpUrl(text(fields, 'return_url'));
  if (returnUrl === null) throw new KessaiError('invalid_param_key', { param: 'return_url', message: 'return_url must be an http or https URL' });
  const caller = await authenticate(ctx, text(fields, 'key'));
  if (caller.kind !== 'public') throw new KessaiError('invalid_api_key', { message: 'A browser page takes the public key, never the secret key.' });
  const clientSecret = text(fields, 'client_secret');
  const kind: FlowKind = text(fields, 'setup_flow_id') !== '' ? 'setup_flow' : 'payment_flow';
  const asked = { id: text(fields, `${kind}_id`), client_secret: clientSecret };
  const view = { publicKey: text(fields, 'key'), flow: kind, clientSecret, returnUrl: returnUrl.toString() };
  if (kind === 'setup_flow') {
    const flow = (await runOperation(ctx, caller, 'setup_flows.retrieve', asked)) as SetupFlowObject;
    return { caller, returnUrl, flow: { status: flow.status, checkoutSession: flow.checkout_session_id, cardLast4: null }, view: { ...view, flowId: flow.id, amount: null, livemode: flow.livemode } };
  }
  const flow = (await runOperation(ctx, caller, 'payment_flows.retrieve', asked)) as PaymentFlowObject;
  return {
    caller,
    returnUrl,
    flow: { status: flow.status, checkoutSession: flow.checkout_session, cardLast4: flow.payment_method_details?.card?.last4 ?? null },
    view: { ...view, flowId: flow.id, amount: flow.amount, livemode: flow.livemode },
  };
}

/**
 * Where a redirect page's form may lead (CSP form-action covers the redirects after the post):
 * the return address, and when that is a hosted page's own return address, the shop's success
 * address it goes on to.
 */
async function formTargets(ctx: Context, returnUrl: URL): Promise<string[]> {
  const hosted = new RegExp(`^${CHECKOUT_PAGE_PATH}/([^/]+)/return$`).exec(returnUrl.pathname);
  if (hosted === null) return [returnUrl.origin];
  try {
    const { session } = await findHostedSession(ctx, decodeURIComponent(hosted[1]!));
    const success = httpUrl(session.success_url);
    return success === null ? [returnUrl.origin] : [returnUrl.origin, success.origin];
  } catch (error) {
    if (error instanceof KessaiError) return [returnUrl.origin];
    throw error;
  }
}

/** A redirect page's refusal, as a page (a wrong client secret reads as an unknown flow). */
function refusal(reply: FastifyReply, error: unknown): FastifyReply {
  if (!(error instanceof KessaiError)) throw error;
  return sendPage(reply, error.status, renderRefusalPage('お手続きできません / This cannot be done', error.message));
}

/**
 * Any refusal on a page route (`config.page`), as a page: a request the page cannot read (its
 * query string, a path parameter) answered in the page's style, as src/api/refusal.ts decides; a
 * fault is a page too, logged, with nothing of its internals.
 */
export function sendRefusalPage(request: FastifyRequest, reply: FastifyReply, error: unknown): FastifyReply {
  if (error instanceof KessaiError) {
    request.log.info({ code: error.code, param: error.param }, 'request refused');
    return refusal(reply, error);
  }
  request.log.error({ err: error }, 'request failed');
  return sendPage(reply, 500, renderRefusalPage('エラーが発生しました / Something went wrong', 'An unexpected error occurred.'));
}

/** Runs an operation of the buyer's; a card refusal (402) is an answer, not an error. */
async function outcome(run: () => Promise<unknown>): Promise<RedirectStatus> {
  try {
    await run();
    return 'succeeded';
  } catch (error) {
    if (error instanceof KessaiError && error.status === 402) return 'failed';
    throw error;
  }
}

export async function registerHostedCheckout(app: FastifyInstance, ctx: Context, contextOf: (request: FastifyRequest) => Context): Promise<void> {
  const publicRoute = { config: { public: true } } as const;
  const pageRoute = { config: { public: true, page: true } } as const;

  // Browsers ask every origin for an icon: none, and no 401 for asking.
  app.get('/favicon.ico', publicRoute, async (_request, reply) => reply.code(204).header('cache-control', 'max-age=86400').send());

  for (const [path, source] of Object.entries(SCRIPTS)) {
    app.get(path, publicRoute, async (_request, reply) =>
      reply.type('text/javascript; charset=utf-8').header('cache-control', 'no-cache').header('x-content-type-options', 'nosniff').header('access-control-allow-origin', '*').send(source),
    );
  }

  app.get(`${CHECKOUT_PAGE_PATH}/:id`, pageRoute, async (request, reply) => {
    const pageCtx = contextOf(request);
    const { id } = request.params as { id: string };
    let found: HostedSession;
    try {
      found = await openHostedSession(pageCtx, id);
    } catch (error) {
      if (error instanceof KessaiError && error.code === 'invalid_id') return sendPage(reply, 404, renderSessionEndPage('unknown'));
      throw error;
    }
    const { session, row, flow, setupFlow } = found;
    if (session.status === 'complete') return sendPage(reply, 200, renderSessionEndPage('complete', { redirectUrl: session.redirect_url }));
    if (session.status === 'expired' || row.expires_at.getTime() <= pageCtx.clock.now().getTime()) return sendPage(reply, 410, renderSessionEndPage('expired', { cancelUrl: session.cancel_url }));
    const publicKey = await publicKeyOf(ctx.db, found.caller.accountId, found.caller.livemode);
    if (publicKey === null) return sendPage(reply, 503, renderRefusalPage('準備ができていません / Not available', 'This account has no public key kessai can publish (its keys predate the hosted page).'));
    const pageUrl = checkoutPageBase(pageCtx) + id;
    const returnUrl = `${pageUrl}/return`;
    const notice = text(request.query as Query, 'notice');
    /** The flow's state on the page: why its last card was refused, and a 3-D Secure challenge left open. */
    const flowState = (kind: FlowKind, flowId: string, current: { status: string; client_secret: string }, lastError: unknown) => ({
      message: (kind === 'setup_flow' ? SETUP_NOTICES : NOTICES)[notice] ?? (current.status === 'requires_payment_method' && lastError !== null ? String((lastError as { message?: unknown }).message ?? '') : null),
      resumeActionUrl: current.status === 'requires_action' ? `${THREE_D_SECURE_PAGE_PATH}?${new URLSearchParams({ key: publicKey, [`${kind}_id`]: flowId, client_secret: current.client_secret, return_url: returnUrl })}` : null,
    });
    if (setupFlow !== null) {
      const state = flowState('setup_flow', setupFlow.setup_flow_id, setupFlow, setupFlow.last_setup_error);
      return sendPage(reply, 200, renderSetupPage({ livemode: row.livemode, publicKey, clientSecret: setupFlow.client_secret, returnUrl, cancelUrl: row.cancel_url, ...state }));
    }
    if (flow === null) return sendPage(reply, 404, renderSessionEndPage('unknown'));
    const { message, resumeActionUrl: resume } = flowState('payment_flow', flow.payment_flow_id, flow, flow.last_payment_error);
    return sendPage(
      reply,
      200,
      renderCheckoutPage({
        sessionId: id,
        livemode: row.livemode,
        amountTotal: row.amount_total,
        lineItems: await pageLineItems(ctx, found),
        methods: await shownMethods(ctx, found),
        publicKey,
        paymentFlowId: flow.payment_flow_id,
        clientSecret: flow.client_secret,
        returnUrl,
        cancelUrl: row.cancel_url,
        message,
        resumeActionUrl: resume,
      }),
    );
  });

  app.get(`${CHECKOUT_PAGE_PATH}/:id/return`, pageRoute, async (request, reply) => {
    const pageCtx = contextOf(request);
    const { id } = request.params as { id: string };
    const query = request.query as Query;
    const pageUrl = checkoutPageBase(pageCtx) + id;
    // The flow handed back: the setup flow of a setup session, else the payment flow.
    const kind: FlowKind = text(query, 'setup_flow_id') !== '' ? 'setup_flow' : 'payment_flow';
    let found: HostedSession;
    try {
      found = await completeHostedSessionFromFlow(pageCtx, id, text(query, `${kind}_id`), text(query, `${kind}_client_secret`));
    } catch (error) {
      if (error instanceof KessaiError && error.code === 'invalid_id') return sendPage(reply, 404, renderSessionEndPage('unknown'));
      throw error;
    }
    if (found.session.status === 'complete') return reply.redirect(found.session.redirect_url!, 303);
    const status = text(query, 'redirect_status');
    return reply.redirect(status in NOTICES ? `${pageUrl}?notice=${status}` : pageUrl, 303);
  });

  redirectPage(app, ctx, THREE_D_SECURE_PAGE_PATH, {
    // Nothing to authenticate (already done, or never asked): straight back to the merchant.
    show: async ({ flow, view }) =>
      flow.status === 'requires_action' ? renderThreeDSecurePage({ ...view, cardLast4: flow.cardLast4 }) : flow.status === 'succeeded' || flow.status === 'requires_capture' ? 'succeeded' : 'failed',
    answer: async ({ caller, view }, fields) =>
      text(fields, 'decision') === 'authenticate'
        ? outcome(() => runOperation(ctx, caller, view.flow === 'setup_flow' ? 'setup_flows.complete_action' : 'payment_flows.complete_action', { id: view.flowId, client_secret: view.clientSecret }))
        : 'canceled',
  });

  redirectPage(app, ctx, WALLET_PAGE_PATH, {
    show: async ({ view }, fields) => renderWalletPage({ ...view, amount: view.amount ?? 0, method: walletMethod(fields, view) }),
    answer: async ({ caller, view }, fields) => {
      const method = walletMethod(fields, view);
      if (text(fields, 'decision') !== 'approve') return 'failed';
      const confirm = { id: view.flowId, client_secret: view.clientSecret, return_url: view.returnUrl, payment_method_type: method };
      return outcome(async () => {
        if (method === 'paypay') return runOperation(ctx, caller, 'payment_flows.confirm', confirm);
        // The simulated Apple Pay sheet pays with the test Visa card, as a device would with its card.
        const year = ctx.clock.now().getUTCFullYear() + 3;
        const token = (await runOperation(ctx, caller, 'tokens.create', { card: { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: year, cvc: '123' } })) as { id: string };
        return runOperation(ctx, caller, 'payment_flows.confirm', { ...confirm, payment_method: token.id });
      });
    },
  });
}

type RedirectStatus = 'succeeded' | 'failed' | 'canceled';
type HandedOver = Awaited<ReturnType<typeof handedOver>>;

/**
 * A redirect page of the browser script: GET shows it for the flow handed over (or sends the buyer
 * straight back with a status), POST runs the buyer's answer and sends them to `return_url`
 * with the flow (v2 §4.8 step 4); a hosted checkout session whose flow succeeded here is
 * completed here too. A refusal (wrong secret, bad return address) is a page.
 */
function redirectPage(
  app: FastifyInstance,
  ctx: Context,
  path: string,
  handlers: { readonly show: (handed: HandedOver, fields: Query) => Promise<string | RedirectStatus>; readonly answer: (handed: HandedOver, fields: Query) => Promise<RedirectStatus> },
): void {
  const back = (reply: FastifyReply, { view }: HandedOver, status: RedirectStatus) => reply.redirect(returnAddress(view.returnUrl, view.flowId, view.clientSecret, status, view.flow), 303);
  app.get(path, { config: { public: true, page: true } }, async (request, reply) => {
    try {
      const fields = request.query as Query;
      const handed = await handedOver(ctx, fields);
      const shown = await handlers.show(handed, fields);
      if (shown === 'succeeded' || shown === 'failed' || shown === 'canceled') return back(reply, handed, shown);
      return sendPage(reply, 200, shown, await formTargets(ctx, handed.returnUrl));
    } catch (error) {
      return refusal(reply, error);
    }
  });
  app.post(path, { config: { public: true, page: true } }, async (request, reply) => {
    try {
      const fields = request.body as Query;
      const handed = await handedOver(ctx, fields);
      const status = await handlers.answer(handed, fields);
      // A checkout session's flow that took the money completes its session now, whether or not
      // the buyer's browser makes it back to the return address.
      const sessionId = handed.flow.checkoutSession;
      if (status === 'succeeded' && sessionId !== null) await completeHostedSessionFromFlow(ctx, sessionId, handed.view.flowId, handed.view.clientSecret);
      return back(reply, handed, status);
    } catch (error) {
      return refusal(reply, error);
    }
  });
}

/** The wallet a page is asked for: PayPay or Apple Pay, simulated in test mode only. */
function walletMethod(fields: Query, view: RedirectPageView): 'paypay' | 'apple_pay' {
  const method = text(fields, 'method');
  if (view.flow !== 'payment_flow') throw new KessaiError('invalid_param_key', { param: 'setup_flow_id', message: 'a wallet pays a payment flow; a setup flow saves cards only' });
  if (method !== 'paypay' && method !== 'apple_pay') throw new KessaiError('invalid_param_key', { param: 'method', message: 'method must be paypay or apple_pay' });
  if (view.livemode) throw new KessaiError(method === 'apple_pay' ? 'apple_pay_disabled_in_livemode' : 'invalid_param_key', { param: 'method', message: `${method} is simulated in test mode only: kessai has no live wallet` });
  return method;
}
