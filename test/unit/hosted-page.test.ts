/**
 * The hosted checkout page's renderer (src/checkout/hosted-page.ts): every value escaped, the
 * Content-Security-Policy strict (no inline script, the one stylesheet by its hash), and the return
 * address of the browser script (v2 §4.8 step 4).
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { returnAddress } from '../../src/api/hosted-checkout';
import { pageSecurityPolicy, renderCheckoutPage, renderSessionEndPage, renderSetupPage, renderThreeDSecurePage, renderWalletPage } from '../../src/checkout/hosted-page';

const view = {
  sessionId: 'cs_1',
  livemode: false,
  amountTotal: 12345,
  lineItems: [{ label: '<script>alert("x")</script> & "tea"', quantity: 3, unitAmount: 4115, amountTotal: 12345 }],
  methods: ['card', 'paypay'] as const,
  publicKey: 'pk_test_"><b>',
  paymentFlowId: 'pfw_1',
  clientSecret: 'pfw_1_secret_abc',
  returnUrl: 'https://kessai.example/checkout/pay/cs_1/return',
  cancelUrl: 'https://shop.example/cart?a=1&b=<2>',
  message: 'Your card was declined <again>',
  resumeActionUrl: null,
};

describe('hosted checkout page renderer', () => {
  it('escapes every value it shows: names, keys, messages, links', () => {
    const html = renderCheckoutPage(view);
    expect(html).not.toContain('<script>alert');
    expect(html).not.toContain('"><b>');
    expect(html).not.toContain('<again>');
    expect(html).not.toContain('b=<2>');
    expect(html).toContain('&#60;script&#62;alert(&#34;x&#34;)&#60;/script&#62; &#38; &#34;tea&#34;');
    expect(html).toContain('href="https://shop.example/cart?a=1&#38;b=&#60;2&#62;"');
    // Yen with grouping; the card form and the PayPay button, each control labelled.
    expect(html).toContain('<td class="n" id="total">¥12,345</td>');
    for (const id of ['card-number', 'card-exp-month', 'card-exp-year', 'card-cvc']) expect(html).toContain(`<label for="${id}">`);
    expect(html).toContain('id="pay-paypay"');
    // No inline script: only the two scripts kessai serves.
    expect([...html.matchAll(/<script([^>]*)>/g)].map((m) => m[1])).toEqual([' src="/v2/js/kessai.js"', ' src="/v2/js/checkout.js"']);
  });

  it('shows only the methods given, and no cancel link without cancel_url', () => {
    const html = renderCheckoutPage({ ...view, methods: ['card'], cancelUrl: null });
    expect(html).not.toContain('id="wallets"');
    expect(html).not.toContain('id="cancel"');
    expect(renderCheckoutPage({ ...view, methods: ['paypay'] })).not.toContain('id="card-form"');
  });

  it('the CSP allows nothing but kessai itself and the page\'s one stylesheet, by its hash', () => {
    const html = renderWalletPage({ publicKey: 'pk_test_x', flow: 'payment_flow', flowId: 'pfw_1', clientSecret: 's', returnUrl: 'https://shop.example/r', amount: 500, livemode: false, method: 'paypay' });
    const style = /<style>([\s\S]*?)<\/style>/.exec(html)![1]!;
    const policy = pageSecurityPolicy(['https://shop.example']);
    expect(policy).toBe(
      `default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'sha256-${createHash('sha256').update(style).digest('base64')}'; img-src 'self'; form-action 'self' https://shop.example; base-uri 'none'; frame-ancestors 'none'`,
    );
    expect(policy).not.toContain('unsafe');
    expect(renderSessionEndPage('expired', { cancelUrl: 'https://shop.example/cart' })).toContain('data-state="expired"');
  });

  it('the return address keeps the merchant\'s query and adds the flow, its client secret and the redirect status', () => {
    expect(returnAddress('https://shop.example/done?order=42', 'pfw_1', 'pfw_1_secret_abc', 'succeeded')).toBe(
      'https://shop.example/done?order=42&payment_flow_id=pfw_1&payment_flow_client_secret=pfw_1_secret_abc&redirect_status=succeeded',
    );
    expect(returnAddress('https://shop.example/done', 'sfw_1', 'sfw_1_secret_abc', 'failed', 'setup_flow')).toBe('https://shop.example/done?setup_flow_id=sfw_1&setup_flow_client_secret=sfw_1_secret_abc&redirect_status=failed');
  });

  it('a setup session\'s page saves a card: no line items, no total, the setup flow for the glue, every value escaped', () => {
    const html = renderSetupPage({ ...view, clientSecret: 'sfw_1_secret_"><i>' });
    expect(html).not.toContain('id="line-items"');
    expect(html).not.toContain('id="total"');
    expect(html).not.toContain('¥');
    expect(html).toContain('No payment is taken now');
    expect(html).toContain('data-flow="setup_flow"');
    expect(html).not.toContain('"><i>');
    expect(html).not.toContain('<again>');
    for (const id of ['card-number', 'card-exp-month', 'card-exp-year', 'card-cvc']) expect(html).toContain(`<label for="${id}">`);
    expect(html).toContain('カードを保存する / Save card');
    // The challenge of a setup flow names no amount and posts the setup flow back.
    const challenge = renderThreeDSecurePage({ publicKey: 'pk_test_x', flow: 'setup_flow', flowId: 'sfw_1', clientSecret: 's', returnUrl: 'https://k.example/r', amount: null, livemode: false, cardLast4: null });
    expect(challenge).toContain('<input type="hidden" name="setup_flow_id" value="sfw_1">');
    expect(challenge).not.toContain('id="amount"');
  });
});
