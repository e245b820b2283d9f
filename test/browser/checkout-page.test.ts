/**
 * The hosted checkout page and the browser script in a real browser: Debian's
 * Chromium driven by playwright-core against the real server (startTestServer), the session made
 * with the official `@payjp/payjpv2` SDK as a merchant would, a shop of the test's own on a local
 * HTTP server (success and cancel addresses, and a merchant page that uses /v2/js/kessai.js). The
 * buyer's actions are asserted by where the browser lands, by what the page says, and by the
 * events they wrote, read through the v2 events API. No request may leave for a third party, and
 * no page may log a console error (a Content-Security-Policy violation is one). A screenshot of
 * each page is kept under test-output/checkout-page/ for review.
 */
import { fileURLToPath } from 'node:url';
import * as v2 from '@payjp/payjpv2';
import type { Client } from '@payjp/payjpv2';
import type { Page } from 'playwright-core';
import { beforeEach, describe, expect, it } from 'vitest';
import { TEST_CARDS, type TestCardName } from '../../src/processor/test-cards';
import { checkoutBrowserSuite, fillCard, type Shop } from '../support/checkout-browser';
import type { TestServer } from '../support/http-server';
import { ok, v2EventTypes } from '../support/v2-sdk';

const OUTPUT = fileURLToPath(new URL('../../test-output/checkout-page/', import.meta.url));

describe('hosted checkout page and browser script in Chromium', () => {
  const suite = checkoutBrowserSuite({ output: OUTPUT, viewport: { width: 900, height: 1000 } });
  const shot = suite.shot;
  let server: TestServer;
  let client: Client;
  let shop: Shop;
  let page: Page;
  let problems: string[];
  beforeEach(() => {
    ({ server, client, shop, page, problems } = suite.current());
  });

  const eventTypes = (resourceId: string) => v2EventTypes(client, resourceId);

  let product = 0;
  async function session(options: { amount?: number; quantity?: number; types?: string[] } = {}) {
    product += 1;
    const made = await ok(v2.createProduct({ client, body: { name: `Tenugui ${product}` } }));
    const price = await ok(v2.createPrice({ client, body: { product_id: made.id, unit_amount: options.amount ?? 1200, currency: 'jpy' } }));
    return ok(
      v2.createCheckoutSession({
        client,
        body: {
          mode: 'payment',
          line_items: [{ price_id: price.id, quantity: options.quantity ?? 2 }],
          success_url: `${shop.url}/success?session_id={CHECKOUT_SESSION_ID}`,
          cancel_url: `${shop.url}/cancel`,
          ...(options.types ? { payment_method_types: options.types as never } : {}),
        },
      }),
    );
  }

  async function payByCard(card: TestCardName): Promise<void> {
    await fillCard(page, card);
    await page.getByRole('button', { name: /Pay$/ }).click();
  }

  /** A new session's page, paid with a 3-D Secure card: the browser is on the challenge page. */
  async function challengeOfNewSession(card: TestCardName = 'threeDSecureRequired') {
    const created = await session();
    await page.goto(created.url!);
    await payByCard(card);
    await page.waitForURL(/\/v2\/js\/three_d_secure\?/);
    return created;
  }

  /** The payment flow of a session (made when its page was first opened). */
  const flowOf = async (sessionId: string): Promise<string> => ((await ok(v2.getCheckoutSession({ client, path: { checkout_session_id: sessionId } }))) as { payment_flow_id: string }).payment_flow_id;

  it('a Visa card completes the checkout: line items and total in yen, success_url with the session id, the events written', async () => {
    const created = await session();
    // The session's url is the serving kessai's own page.
    expect(created.url).toBe(`${server.baseUrl}/checkout/pay/${created.id}`);
    const response = await page.goto(created.url!);
    const csp = response!.headers()['content-security-policy']!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(await page.locator('#line-items tbody tr').allInnerTexts()).toEqual([expect.stringMatching(/Tenugui \d+\s+2\s+¥1,200\s+¥2,400/)]);
    expect(await page.locator('#total').innerText()).toBe('¥2,400');
    // Card only (the session's default types), a cancel link, and every field labelled.
    expect(await page.locator('#wallets').count()).toBe(0);
    await shot('01-checkout-page');

    await payByCard('visa');
    await page.waitForURL(`${shop.url}/success?session_id=${created.id}`);
    await shot('02-success-url');
    const done = await ok(v2.getCheckoutSession({ client, path: { checkout_session_id: created.id } }));
    expect(done).toMatchObject({ status: 'complete', url: null, redirect_url: `${shop.url}/success?session_id=${created.id}` });
    const flowId = (done as { payment_flow_id: string }).payment_flow_id;
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flowId } }))).toMatchObject({ status: 'succeeded', amount: 2400, amount_received: 2400, payment_method_types: ['card'] });
    expect(await eventTypes(created.id)).toEqual(['checkout.session.completed']);
    expect(await eventTypes(flowId)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.succeeded']);

    // The completed session's address now says so, with the way back to the shop.
    await page.goto(created.url!);
    expect(await page.locator('#state').getAttribute('data-state')).toBe('complete');
    expect(await page.locator('#back').getAttribute('href')).toBe(`${shop.url}/success?session_id=${created.id}`);
    await shot('03-completed-session');
    expect(problems).toEqual([]);
  });

  it('a declined card shows the error on the page; a second card then succeeds', async () => {
    const created = await session();
    await page.goto(created.url!);
    await payByCard('declinesOnCharge');
    const message = page.locator('#message');
    await expect.poll(() => message.innerText()).not.toBe('');
    expect(await message.getAttribute('role')).toBe('alert');
    expect(page.url()).toBe(created.url);
    await shot('04-declined-card');
    const open = await ok(v2.getCheckoutSession({ client, path: { checkout_session_id: created.id } }));
    expect(open.status).toBe('open');

    await payByCard('visa');
    await page.waitForURL(`${shop.url}/success?session_id=${created.id}`);
    const flowId = (open as { payment_flow_id: string }).payment_flow_id;
    expect(await eventTypes(flowId)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.payment_failed', 'payment_flow.processing', 'payment_flow.succeeded']);
    expect(await eventTypes(created.id)).toEqual(['checkout.session.completed']);
    // The decline is a 402 of the confirm call, which Chromium logs; nothing else.
    expect(problems.filter((problem) => !/status of 402/.test(problem))).toEqual([]);
  });

  it('a 3-D Secure card passes the challenge page; a card whose authentication fails is told so and another card pays', async () => {
    const created = await session();
    await page.goto(created.url!);
    await payByCard('threeDSecureFailed');
    await page.waitForURL(/\/v2\/js\/three_d_secure\?/);
    expect(await page.locator('#last4').innerText()).toBe('3030');
    await page.getByRole('button', { name: /Authenticate/ }).click();
    // Back on the page (its return address found no money taken), with the reason.
    await page.waitForURL(`${created.url}?notice=failed`);
    expect(await page.locator('#message').innerText()).toContain('not approved');

    await payByCard('threeDSecureRequired');
    await page.waitForURL(/\/v2\/js\/three_d_secure\?/);
    expect(await page.locator('#amount').innerText()).toBe('¥2,400');
    await shot('05-three-d-secure-challenge');
    await page.getByRole('button', { name: /Authenticate/ }).click();
    await page.waitForURL(`${shop.url}/success?session_id=${created.id}`);
    const flowId = await flowOf(created.id);
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flowId } }))).toMatchObject({ status: 'succeeded', three_d_secure_status: 'verified' });
    expect(await eventTypes(flowId)).toEqual([
      'payment_flow.created',
      'payment_flow.requires_action',
      'payment_flow.processing',
      'payment_flow.payment_failed',
      'payment_flow.requires_action',
      'payment_flow.processing',
      'payment_flow.succeeded',
    ]);
    expect(await eventTypes(created.id)).toEqual(['checkout.session.completed']);
    expect(problems).toEqual([]);
  });

  it('a challenge passed completes the session at once, even if the browser never follows the redirect back', async () => {
    const created = await challengeOfNewSession();
    const fields = Object.fromEntries(new URL(page.url()).searchParams);
    // The form's post, sent without following the redirect (a tab closed on the way back).
    const answer = await fetch(`${server.baseUrl}/v2/js/three_d_secure`, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ ...fields, decision: 'authenticate' }).toString() });
    expect(answer.status).toBe(303);
    const back = new URL(answer.headers.get('location')!);
    expect(back.href.startsWith(`${created.url}/return?`)).toBe(true);
    expect([back.searchParams.get('payment_flow_id'), back.searchParams.get('redirect_status')]).toEqual([fields.payment_flow_id, 'succeeded']);
    expect(await ok(v2.getCheckoutSession({ client, path: { checkout_session_id: created.id } }))).toMatchObject({ status: 'complete' });
    expect(await eventTypes(created.id)).toEqual(['checkout.session.completed']);
    // Coming back later changes nothing more: still one completion.
    await page.goto(back.href);
    await page.waitForURL(`${shop.url}/success?session_id=${created.id}`);
    expect(await eventTypes(created.id)).toEqual(['checkout.session.completed']);
  });

  it('the cancel link returns to the shop and leaves the session open', async () => {
    const created = await session();
    await page.goto(created.url!);
    await page.getByRole('link', { name: /Cancel and return to the shop/ }).click();
    await page.waitForURL(`${shop.url}/cancel`);
    await shot('06-cancel-url');
    expect((await ok(v2.getCheckoutSession({ client, path: { checkout_session_id: created.id } }))).status).toBe('open');
    expect(await eventTypes(created.id)).toEqual([]);
  });

  it('the configuration hides PayPay when off and shows it at none in test mode; the simulated PayPay wallet pays', async () => {
    const configurations = await ok(v2.getAllPaymentMethodConfigurations({ client }));
    const id = configurations.data[0]!.id;
    await ok(v2.updatePaymentMethodConfiguration({ client, path: { payment_method_configuration_id: id }, body: { paypay: { display_preference: { preference: 'off' } } } }));
    const created = await session({ types: ['card', 'paypay'] });
    await page.goto(created.url!);
    expect(await page.locator('#pay-paypay').count()).toBe(0);
    expect(await page.locator('#card-form').count()).toBe(1);
    await shot('07-paypay-off');

    await ok(v2.updatePaymentMethodConfiguration({ client, path: { payment_method_configuration_id: id }, body: { paypay: { display_preference: { preference: 'none' } } } }));
    await page.reload();
    const paypay = page.getByRole('button', { name: /Pay with PayPay/ });
    expect(await paypay.isVisible()).toBe(true);
    await shot('08-paypay-none');
    // Keyboard only: focus the wallet button and press Enter.
    await paypay.focus();
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/v2\/js\/wallet\?/);
    expect(await page.locator('#wallet').getAttribute('data-method')).toBe('paypay');
    await shot('09-paypay-wallet');
    await page.getByRole('button', { name: /Approve/ }).click();
    await page.waitForURL(`${shop.url}/success?session_id=${created.id}`);
    const flowId = await flowOf(created.id);
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flowId } }))).toMatchObject({ status: 'succeeded', payment_method_details: { type: 'paypay' } });
    expect(await eventTypes(flowId)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.succeeded']);
    expect(await eventTypes(created.id)).toEqual(['checkout.session.completed']);
    expect(problems).toEqual([]);
  });

  it('a canceled 3-D Secure challenge comes back to the page, which offers to continue it', async () => {
    const created = await challengeOfNewSession();
    await page.getByRole('button', { name: /Cancel/ }).click();
    await page.waitForURL(`${created.url}?notice=canceled`);
    expect(await page.locator('#message').innerText()).toContain('canceled');
    await shot('13-three-d-secure-canceled');
    await page.getByRole('link', { name: /Continue 3-D Secure/ }).click();
    await page.getByRole('button', { name: /Authenticate/ }).click();
    await page.waitForURL(`${shop.url}/success?session_id=${created.id}`);
    const flowId = await flowOf(created.id);
    expect(await eventTypes(flowId)).toEqual(['payment_flow.created', 'payment_flow.requires_action', 'payment_flow.processing', 'payment_flow.succeeded']);
    expect(problems).toEqual([]);
  });

  it('Apple Pay is a simulated wallet in test mode: declined, the page says so; approved, the checkout completes', async () => {
    const created = await session({ types: ['card', 'apple_pay'] });
    await page.goto(created.url!);
    await page.getByRole('button', { name: /Pay with Apple Pay/ }).click();
    await page.waitForURL(/\/v2\/js\/wallet\?/);
    expect(await page.locator('#wallet').getAttribute('data-method')).toBe('apple_pay');
    await page.getByRole('button', { name: /Decline/ }).click();
    await page.waitForURL(`${created.url}?notice=failed`);
    expect(await page.locator('#message').innerText()).toContain('not approved');
    await page.getByRole('button', { name: /Pay with Apple Pay/ }).click();
    await page.waitForURL(/\/v2\/js\/wallet\?/);
    await shot('14-apple-pay-wallet');
    await page.getByRole('button', { name: /Approve/ }).click();
    await page.waitForURL(`${shop.url}/success?session_id=${created.id}`);
    const flowId = await flowOf(created.id);
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flowId } }))).toMatchObject({ status: 'succeeded', payment_method_details: { type: 'apple_pay', card: { last4: '4242' } } });
    expect(await eventTypes(flowId)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.succeeded']);
    expect(await eventTypes(created.id)).toEqual(['checkout.session.completed']);
    expect(problems).toEqual([]);
  });

  describe('a merchant page using the browser script (v2 §4.8)', () => {
    const flowWith = (types: string[]) => ok(v2.createPaymentFlow({ client, body: { amount: 1500, currency: 'jpy', payment_method_types: types as never } }));

    /** Runs `confirmPaymentFlow` on the shop's page as its own script would. */
    function confirmOnShop(clientSecret: string, params: Record<string, unknown>): Promise<{ error?: { status: number; message: string } }> {
      return page.evaluate(
        async ([key, secret, body]) => {
          const kessai = (globalThis as unknown as { Kessai: (key: string) => { confirmPaymentFlow(secret: string, params: unknown): Promise<{ error?: { status: number; message: string } }> } }).Kessai(key);
          const result = await kessai.confirmPaymentFlow(secret, body);
          return result.error ? { error: { status: result.error.status, message: result.error.message } } : {};
        },
        [server.keys.a.test.public, clientSecret, params] as const,
      );
    }

    it('confirms with a test card and lands on return_url with payment_flow_id and payment_flow_client_secret', async () => {
      const flow = await flowWith(['card']);
      await page.goto(`${shop.url}/merchant`);
      // The page leaves for return_url while the call is pending: its context is destroyed, which
      // ends the evaluation either way (caught, not left unhandled).
      void confirmOnShop(flow.client_secret, { card: { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: 2032, cvc: '123' }, return_url: `${shop.url}/return` }).catch(() => undefined);
      await page.waitForURL(/\/return\?/);
      const query = new URL(page.url()).searchParams;
      expect([query.get('payment_flow_id'), query.get('payment_flow_client_secret')]).toEqual([flow.id, flow.client_secret]);
      await shot('10-merchant-return');
      // Back on return_url, the shop's page reads the result with the client secret in the query (step 5).
      const read = await page.evaluate(async (key) => {
        const kessai = (globalThis as unknown as { Kessai: (key: string) => { returnedFlow(): { clientSecret: string }; retrievePaymentFlow(secret: string): Promise<{ status: string }> } }).Kessai(key);
        return (await kessai.retrievePaymentFlow(kessai.returnedFlow().clientSecret)).status;
      }, server.keys.a.test.public);
      expect(read).toBe('succeeded');
      expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flow.id } }))).toMatchObject({ status: 'succeeded', amount_received: 1500 });
      expect(await eventTypes(flow.id)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.succeeded']);
    });

    it('PayPay redirects to the wallet and back to return_url with both query parameters', async () => {
      const flow = await flowWith(['card', 'paypay']);
      await page.goto(`${shop.url}/merchant`);
      void confirmOnShop(flow.client_secret, { payment_method_type: 'paypay', return_url: `${shop.url}/return?order=42` }).catch(() => undefined);
      await page.waitForURL(/\/v2\/js\/wallet\?/);
      await page.getByRole('button', { name: /Approve/ }).click();
      await page.waitForURL(/\/return\?/);
      const query = new URL(page.url()).searchParams;
      expect(Object.fromEntries(query)).toEqual({ order: '42', payment_flow_id: flow.id, payment_flow_client_secret: flow.client_secret, redirect_status: 'succeeded' });
      expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flow.id } }))).toMatchObject({ status: 'succeeded', payment_method_details: { type: 'paypay' } });
      expect(await eventTypes(flow.id)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.succeeded']);
    });

    it('a wrong client secret is refused and changes nothing; a public key alone reaches no flow', async () => {
      const flow = await flowWith(['card']);
      const other = await flowWith(['card']);
      await page.goto(`${shop.url}/merchant`);
      const card = { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: 2032, cvc: '123' };
      // Another flow's secret, and a made-up one: both read as an unknown flow.
      for (const secret of [`${flow.id}_secret_${other.client_secret.split('_secret_')[1]}`, `${flow.id}_secret_000000000000000000000000`]) {
        const refused = await confirmOnShop(secret, { card, return_url: `${shop.url}/return` });
        expect(refused.error).toMatchObject({ status: 404 });
      }
      expect(page.url()).toBe(`${shop.url}/merchant`);
      expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flow.id } }))).toMatchObject({ status: 'requires_payment_method', payment_method: null });
      expect(await eventTypes(flow.id)).toEqual(['payment_flow.created']);
      // The public key alone: no flow without its secret; the secret key's routes (lists, other
      // resources) answer no CORS, so the page cannot even read their refusal.
      const status = await page.evaluate(
        async ([base, key, id]) => {
          const get = (path: string) =>
            fetch(`${base}${path}`, { headers: { Authorization: `Bearer ${key}` } }).then(
              (r) => r.status,
              () => 'blocked',
            );
          return [await get(`/v2/payment_flows/${id}`), await get('/v2/payment_flows'), await get('/v2/checkout/sessions'), await get('/v2/events')];
        },
        [server.baseUrl, server.keys.a.test.public, flow.id] as const,
      );
      expect(status).toEqual([404, 'blocked', 'blocked', 'blocked']);
      // The wallet page refuses the wrong secret as a page, and sends nobody anywhere.
      await page.goto(`${server.baseUrl}/v2/js/wallet?${new URLSearchParams({ key: server.keys.a.test.public, payment_flow_id: flow.id, client_secret: `${flow.id}_secret_x`, return_url: `${shop.url}/return`, method: 'paypay' })}`);
      expect(await page.locator('#refused').count()).toBe(1);
      await shot('11-wrong-client-secret');
      expect(problems.filter((problem) => !/status of 40[14]|CORS policy|Failed to load resource: net::ERR_FAILED/.test(problem))).toEqual([]);
    });
  });

  it('an expired session shows the expired page with the way back to the shop', async () => {
    const created = await session();
    // Service rules §3: 24 hours after creation, before the expiry job has marked it.
    server.ctx.clock.advance(24 * 60 * 60 * 1000 + 1000);
    const response = await page.goto(created.url!);
    expect(response!.status()).toBe(410);
    expect(await page.locator('#state').getAttribute('data-state')).toBe('expired');
    expect(await page.locator('#back').getAttribute('href')).toBe(`${shop.url}/cancel`);
    await shot('12-expired-session');
    // The visit changes nothing: no flow is made for an expired session, no event is written.
    expect(await eventTypes(created.id)).toEqual([]);
    expect(problems.filter((problem) => !/status of 410/.test(problem))).toEqual([]);
  });
});
