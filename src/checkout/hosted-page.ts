/**
 * The one renderer of the pages the buyer sees on kessai: the hosted checkout
 * page of a session (a payment session's, or a setup session's that saves a card), its complete / expired / unknown pages, and the simulated redirect pages of
 * the browser script (the 3-D Secure challenge, the PayPay and Apple Pay wallets of test mode); the
 * same challenge is v1's issuer page of the 3-D Secure redirect workflow.
 * Plain server-rendered HTML, every value escaped (src/domain/html.ts); no inline script, one
 * stylesheet allowed by its hash, nothing loaded from anywhere but kessai (`pageSecurityPolicy`).
 * The page's behaviour is the browser script /v2/js/kessai.js and the page glue /v2/js/checkout.js
 * (src/checkout/browser/).
 */
import { createHash } from 'node:crypto';
import { escapeHtml, formatYen } from '../domain/html';
import type { DisplayMethod } from '../domain/payment-method-display';

/** Where the browser script and the page glue are served. */
export const BROWSER_SCRIPT_PATH = '/v2/js/kessai.js';
export const CHECKOUT_SCRIPT_PATH = '/v2/js/checkout.js';
/** The simulated redirect pages of the browser script (GET shows, POST answers). */
export const THREE_D_SECURE_PAGE_PATH = '/v2/js/three_d_secure';
export const WALLET_PAGE_PATH = '/v2/js/wallet';

const STYLE = `body{font-family:system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1a1a1a}
main{max-width:34rem;margin:2rem auto;background:#fff;padding:1.5rem 2rem;border-radius:.5rem;box-shadow:0 1px 3px #0002}
h1{font-size:1.4rem}table{width:100%;border-collapse:collapse;margin-bottom:1rem}
th,td{text-align:left;padding:.35rem .25rem;border-bottom:1px solid #ddd}td.n,th.n{text-align:right}
tfoot th,tfoot td{font-weight:bold;border-bottom:none}
label{display:block;margin-top:.75rem;font-weight:600}input{font-size:1rem;padding:.45rem;width:100%;box-sizing:border-box;border:1px solid #888;border-radius:.25rem}
.row{display:flex;gap:.75rem}.row>div{flex:1}
button{font-size:1rem;margin-top:1rem;padding:.6rem 1rem;border-radius:.25rem;border:1px solid #0b4f9c;background:#0b5fbf;color:#fff;cursor:pointer;width:100%}
button.secondary{background:#fff;color:#0b4f9c}button:focus-visible,input:focus-visible,a:focus-visible{outline:3px solid #f5a623;outline-offset:2px}
#message{min-height:1.5rem;color:#b00020;font-weight:600}.mode{display:inline-block;background:#ffe08a;padding:.1rem .5rem;border-radius:.25rem;font-size:.85rem}
.wallets{margin-top:1.5rem;border-top:1px solid #ddd;padding-top:.5rem}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}`;
const STYLE_HASH = `'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`;

/**
 * The Content-Security-Policy of every page here: nothing but kessai's own script, its one
 * stylesheet (by hash), requests to kessai itself; forms post to kessai and may be redirected to
 * `formTargets` (the origins of the return address the browser script was given).
 */
export function pageSecurityPolicy(formTargets: readonly string[] = []): string {
  const targets = [...new Set(formTargets)].map((origin) => ` ${origin}`).join('');
  return `default-src 'none'; script-src 'self'; connect-src 'self'; style-src ${STYLE_HASH}; img-src 'self'; form-action 'self'${targets}; base-uri 'none'; frame-ancestors 'none'`;
}

function page(title: string, body: string, scripts: readonly string[] = []): string {
  return [
    '<!doctype html>',
    '<html lang="ja"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="robots" content="noindex">',
    `<title>${escapeHtml(title)}</title><style>${STYLE}</style></head>`,
    `<body><main>${body}</main>${scripts.map((src) => `<script src="${escapeHtml(src)}"></script>`).join('')}</body></html>`,
    '',
  ].join('\n');
}

const modeBadge = (livemode: boolean): string => (livemode ? '' : '<p class="mode" id="mode">テストモード / Test mode</p>');

export interface PageLineItem {
  readonly label: string;
  readonly quantity: number;
  readonly unitAmount: number;
  readonly amountTotal: number;
}

export interface CheckoutPageView {
  readonly sessionId: string;
  readonly livemode: boolean;
  readonly amountTotal: number;
  readonly lineItems: readonly PageLineItem[];
  /** The methods shown, in this order: the session's types the configuration displays (v2 §4.5). */
  readonly methods: readonly DisplayMethod[];
  readonly publicKey: string;
  readonly paymentFlowId: string;
  readonly clientSecret: string;
  /** Where the browser script sends the buyer back after confirming (this page's return address). */
  readonly returnUrl: string;
  readonly cancelUrl: string | null;
  /** Why the last attempt failed (a declined card), shown where the buyer reads it first. */
  readonly message: string | null;
  /** A 3-D Secure challenge left open: the address to resume it. */
  readonly resumeActionUrl: string | null;
}

const METHOD_LABELS: Readonly<Record<DisplayMethod, string>> = { card: 'カード / Card', paypay: 'PayPay', apple_pay: 'Apple Pay' };

function lineItemsTable(items: readonly PageLineItem[], total: number): string {
  const rows = items
    .map((item) => `<tr><td>${escapeHtml(item.label)}</td><td class="n">${item.quantity}</td><td class="n">${formatYen(item.unitAmount)}</td><td class="n">${formatYen(item.amountTotal)}</td></tr>`)
    .join('');
  return (
    '<table id="line-items"><caption class="visually-hidden">ご注文 / Order</caption>' +
    '<thead><tr><th scope="col">商品 / Item</th><th scope="col" class="n">数量 / Qty</th><th scope="col" class="n">単価 / Unit</th><th scope="col" class="n">金額 / Amount</th></tr></thead>' +
    `<tbody>${rows}</tbody><tfoot><tr><th scope="row" colspan="3">合計 / Total</th><td class="n" id="total">${formatYen(total)}</td></tr></tfoot></table>`
  );
}

function cardForm(heading: string, submit: string): string {
  return `<form id="card-form" novalidate>
<h2>${escapeHtml(heading)}</h2>
<label for="card-number">カード番号 / Card number</label><input id="card-number" name="number" inputmode="numeric" autocomplete="cc-number" required aria-describedby="message">
<div class="row"><div><label for="card-exp-month">有効期限 月 / Expiry month</label><input id="card-exp-month" name="exp_month" inputmode="numeric" autocomplete="cc-exp-month" placeholder="MM" required></div>
<div><label for="card-exp-year">有効期限 年 / Expiry year</label><input id="card-exp-year" name="exp_year" inputmode="numeric" autocomplete="cc-exp-year" placeholder="YYYY" required></div></div>
<label for="card-cvc">セキュリティコード / Security code</label><input id="card-cvc" name="cvc" inputmode="numeric" autocomplete="cc-csc" required>
<button type="submit" id="pay">${escapeHtml(submit)}</button>
</form>`;
}

/** The hosted checkout page of an open session (GET <session url>). */
export function renderCheckoutPage(view: CheckoutPageView): string {
  const wallets = view.methods.filter((method) => method !== 'card');
  const body = [
    '<h1>お支払い / Checkout</h1>',
    modeBadge(view.livemode),
    lineItemsTable(view.lineItems, view.amountTotal),
    checkoutOpening('payment_flow', view),
    view.methods.includes('card') ? cardForm('カードで支払う / Pay by card', `${formatYen(view.amountTotal)} を支払う / Pay`) : '',
    wallets.length === 0
      ? ''
      : `<div class="wallets" id="wallets"><h2>その他の支払い方法 / Other ways to pay</h2>${wallets.map((method) => `<button type="button" class="secondary" id="pay-${method}" data-method="${method}">${escapeHtml(METHOD_LABELS[method])}で支払う / Pay with ${escapeHtml(METHOD_LABELS[method])}</button>`).join('')}</div>`,
    checkoutClosing(view.cancelUrl),
  ].join('\n');
  return page('お支払い / Checkout — kessai', body, [BROWSER_SCRIPT_PATH, CHECKOUT_SCRIPT_PATH]);
}

/** The flows the browser script confirms, by the prefix of their hand-over fields (`<kind>_id`, `<kind>_client_secret`). */
export type FlowKind = 'payment_flow' | 'setup_flow';

/** What the page glue reads (the key, the flow's secret and kind, the return address), the message and a challenge to resume. */
function checkoutOpening(flow: FlowKind, view: Pick<CheckoutPageView, 'publicKey' | 'clientSecret' | 'returnUrl' | 'message' | 'resumeActionUrl'>): string {
  return [
    `<div id="checkout" data-flow="${flow}" data-public-key="${escapeHtml(view.publicKey)}" data-client-secret="${escapeHtml(view.clientSecret)}" data-return-url="${escapeHtml(view.returnUrl)}">`,
    `<p id="message" role="alert" aria-live="assertive">${escapeHtml(view.message ?? '')}</p>`,
    view.resumeActionUrl === null ? '' : `<p><a id="resume-action" href="${escapeHtml(view.resumeActionUrl)}">本人認証を続ける / Continue 3-D Secure authentication</a></p>`,
  ].join('\n');
}

function checkoutClosing(cancelUrl: string | null): string {
  return [
    '<noscript><p>このページの手続きには JavaScript が必要です / This page needs JavaScript.</p></noscript>',
    '</div>',
    cancelUrl === null ? '' : `<p><a id="cancel" href="${escapeHtml(cancelUrl)}">キャンセルしてショップに戻る / Cancel and return to the shop</a></p>`,
  ].join('\n');
}

/** The hosted page of an open setup session: a card is saved for later, nothing is charged now. */
export type SetupPageView = Pick<CheckoutPageView, 'livemode' | 'publicKey' | 'clientSecret' | 'returnUrl' | 'cancelUrl' | 'message' | 'resumeActionUrl'>;

export function renderSetupPage(view: SetupPageView): string {
  const body = [
    '<h1>カードを保存 / Save your card</h1>',
    modeBadge(view.livemode),
    '<p id="no-charge">今回のお支払いはありません。カードはショップでの今後のお支払いのために保存されます。 / No payment is taken now: your card is saved for future payments to this shop.</p>',
    checkoutOpening('setup_flow', view),
    cardForm('カード情報 / Card details', 'カードを保存する / Save card'),
    checkoutClosing(view.cancelUrl),
  ].join('\n');
  return page('カードを保存 / Save your card — kessai', body, [BROWSER_SCRIPT_PATH, CHECKOUT_SCRIPT_PATH]);
}

/** The page of a session that is no longer open, or of an unknown session URL. */
export function renderSessionEndPage(state: 'complete' | 'expired' | 'unknown', links: { readonly redirectUrl?: string | null; readonly cancelUrl?: string | null } = {}): string {
  const text = {
    complete: ['お支払いは完了しています / This checkout is complete', 'このお支払いは完了しました。 / This payment was made; nothing more to do here.'],
    expired: ['有効期限切れ / This checkout has expired', 'このお支払いページは有効期限が切れました。ショップで注文をやり直してください。 / This checkout session expired: start again from the shop.'],
    unknown: ['ページが見つかりません / Checkout not found', 'このお支払いページは存在しません。 / No checkout session has this address.'],
  }[state];
  const link = state === 'complete' ? links.redirectUrl : links.cancelUrl;
  const body = [
    `<h1 id="state" data-state="${state}">${escapeHtml(text[0]!)}</h1>`,
    `<p>${escapeHtml(text[1]!)}</p>`,
    link ? `<p><a id="back" href="${escapeHtml(link)}">ショップに戻る / Return to the shop</a></p>` : '',
  ].join('\n');
  return page(`${text[0]} — kessai`, body);
}

/** The hidden fields every redirect page posts back (the browser script's hand-over). */
export interface RedirectPageView {
  readonly publicKey: string;
  readonly flow: FlowKind;
  readonly flowId: string;
  readonly clientSecret: string;
  readonly returnUrl: string;
  /** What a payment flow takes; null for a setup flow (it saves the card, it charges nothing). */
  readonly amount: number | null;
  readonly livemode: boolean;
}

/** The hidden fields of a redirect page's form (the browser script's hand-over). */
function redirectFields(view: RedirectPageView, extra: Readonly<Record<string, string>> = {}): Readonly<Record<string, string>> {
  return { key: view.publicKey, [`${view.flow}_id`]: view.flowId, client_secret: view.clientSecret, return_url: view.returnUrl, ...extra };
}

function hiddenFields(fields: Readonly<Record<string, string>>): string {
  return Object.entries(fields)
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('');
}

/** A 3-D Secure challenge of the simulated issuer: what is confirmed, and where the form posts. */
export interface ChallengeView {
  /** The page's own address: the form posts back to it. */
  readonly action: string;
  readonly fields: Readonly<Record<string, string>>;
  readonly livemode: boolean;
  /** The payment confirmed; null when nothing is charged now (a card saved or checked). */
  readonly amount: number | null;
  readonly cardLast4: string | null;
  /** The host the buyer goes back to, named so the buyer sees where the buttons lead. */
  readonly returnHost: string | null;
}

/**
 * The simulated issuer's 3-D Secure challenge, one page for the v2 redirect (payment and setup
 * flows) and the v1 redirect workflow (charges, tokens, 3-D Secure requests): the buyer completes
 * authentication (the issuer's answer is the test card's, service rules §2.2: 4000000000003014 is
 * verified, 4000000000003030 fails) or cancels and goes back without authenticating.
 */
export function renderChallengePage(view: ChallengeView): string {
  const subject = view.amount === null ? '<span id="save-card">this card (nothing is charged now)</span>' : `this payment of <strong id="amount">${escapeHtml(formatYen(view.amount))}</strong>`;
  const body = [
    '<h1>本人認証 / 3-D Secure</h1>',
    modeBadge(view.livemode),
    `<p>カード発行会社の本人認証（シミュレーション） / Your card issuer asks you to confirm ${subject}${view.cardLast4 === null ? '' : ` with the card ending <span id="last4">${escapeHtml(view.cardLast4)}</span>`}.</p>`,
    `<form method="post" action="${escapeHtml(view.action)}">${hiddenFields(view.fields)}`,
    '<button type="submit" name="decision" value="authenticate" id="authenticate">認証する / Authenticate</button>',
    '<button type="submit" name="decision" value="cancel" class="secondary" id="cancel-authentication">キャンセル / Cancel</button>',
    '</form>',
    view.returnHost === null ? '' : `<p id="return-host">どちらを選んでも <strong>${escapeHtml(view.returnHost)}</strong> に戻ります。 / Either way you return to <strong>${escapeHtml(view.returnHost)}</strong>.</p>`,
  ].join('\n');
  return page('本人認証 / 3-D Secure — kessai', body);
}

/** The v2 challenge of a payment flow (saving a card for a setup flow) handed over by the browser script. */
export function renderThreeDSecurePage(view: RedirectPageView & { readonly cardLast4: string | null }): string {
  return renderChallengePage({ action: THREE_D_SECURE_PAGE_PATH, fields: redirectFields(view), livemode: view.livemode, amount: view.amount, cardLast4: view.cardLast4, returnHost: null });
}

/** A simulated wallet of test mode (PayPay, Apple Pay): the buyer approves or declines the payment. */
export function renderWalletPage(view: RedirectPageView & { readonly amount: number; readonly method: 'paypay' | 'apple_pay' }): string {
  const label = METHOD_LABELS[view.method];
  const body = [
    `<h1 id="wallet" data-method="${view.method}">${escapeHtml(label)}</h1>`,
    modeBadge(view.livemode),
    `<p>${escapeHtml(label)}（テスト用シミュレーション / test simulation）: <strong id="amount">${escapeHtml(formatYen(view.amount))}</strong></p>`,
    `<form method="post" action="${WALLET_PAGE_PATH}">${hiddenFields(redirectFields(view, { method: view.method }))}`,
    '<button type="submit" name="decision" value="approve" id="approve">承認 / Approve</button>',
    '<button type="submit" name="decision" value="decline" class="secondary" id="decline">拒否 / Decline</button>',
    '</form>',
  ].join('\n');
  return page(`${label} — kessai`, body);
}

/**
 * A redirect page asked for what cannot be done (a wrong client secret, a live-mode wallet, a
 * lapsed 3-D Secure window); `backUrl` links the way back to the shop when it can be trusted.
 */
export function renderRefusalPage(title: string, detail: string, backUrl: string | null = null): string {
  const back = backUrl === null ? '' : `<p><a id="back" href="${escapeHtml(backUrl)}">ショップに戻る / Return to the shop</a></p>`;
  return page(`${title} — kessai`, `<h1 id="refused">${escapeHtml(title)}</h1><p role="alert">${escapeHtml(detail)}</p>${back}`);
}
