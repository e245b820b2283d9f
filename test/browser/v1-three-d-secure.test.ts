/**
 * v1 3-D Secure, the redirect workflow, end to end over HTTP (v1 §3.1, §4.3): the merchant creates
 * a charge (or a token, or a 3-D Secure request) with the official `payjp` SDK, sends the buyer's
 * browser (Debian's Chromium, playwright-core) to kessai's start address with the public key and
 * its return URL, the buyer authenticates or cancels on kessai's issuer page (the test card decides
 * the issuer's answer), comes back to the return URL exactly as the merchant wrote it, and the
 * merchant calls `tds_finish` through the SDK. No request may leave for a third party and no page
 * may log a console error (a CSP violation is one). Screenshots under test-output/v1-three-d-secure/.
 */
import { fileURLToPath } from 'node:url';
import type Payjp from 'payjp';
import type { Page } from 'playwright-core';
import { beforeEach, describe, expect, it } from 'vitest';
import { TEST_CARDS, type TestCardName } from '../../src/processor/test-cards';
import { checkoutBrowserSuite, type Shop } from '../support/checkout-browser';
import { sdkError, type TestServer } from '../support/http-server';

const OUTPUT = fileURLToPath(new URL('../../test-output/v1-three-d-secure/', import.meta.url));
const MINUTE = 60_000;

describe('v1 3-D Secure: the buyer authenticates on kessai in Chromium, the merchant finishes with the payjp SDK', () => {
  const suite = checkoutBrowserSuite({ output: OUTPUT, viewport: { width: 800, height: 900 } });
  const shot = suite.shot;
  let server: TestServer;
  let shop: Shop;
  let page: Page;
  let problems: string[];
  let payjp: Payjp.Payjp;
  let order = 0;

  beforeEach(() => {
    ({ server, shop, page, problems } = suite.current());
    payjp = server.sdk(server.keys.a.test.secret);
  });

  const card = (name: TestCardName) => ({ number: TEST_CARDS[name].number, exp_month: 12, exp_year: 2032, cvc: '123' });
  /** A token as the merchant's server makes it with the SDK (the direct-generation header). */
  const tokenOf = (name: TestCardName, threeDSecure = false) =>
    payjp.tokens.create({ card: card(name), ...(threeDSecure ? { three_d_secure: true } : {}) } as never, { 'X-Payjp-Direct-Token-Generate': 'true' });

  /** The start address the merchant redirects the buyer to, and the return URL it names (a query of its own). */
  function addresses(id: string, publicKey = server.keys.a.test.public) {
    order += 1;
    const back = `${shop.url}/orders/${order}/tds-return?step=finish`;
    return { back, start: `${server.baseUrl}/v1/tds/${id}/start?${new URLSearchParams({ publickey: publicKey, back_url: back })}` };
  }

  /** The buyer reaches kessai's issuer page, answers, and is back on the merchant's return URL exactly. */
  async function buyerAnswers(id: string, decision: 'authenticate' | 'cancel', screenshot: string): Promise<void> {
    const { start, back } = addresses(id);
    const response = await page.goto(start);
    expect(response!.status()).toBe(200);
    const csp = response!.headers()['content-security-policy']!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain(`form-action 'self' ${shop.url}`);
    expect(await page.locator('#return-host').innerText()).toContain(new URL(shop.url).host);
    await shot(screenshot);
    await page.getByRole('button', { name: decision === 'authenticate' ? /Authenticate/ : /Cancel/ }).click();
    await page.waitForURL((url) => url.origin === shop.url);
    // v1 §4.3: "the buyer returns to the merchant's return URL with no extra parameters added".
    expect(page.url()).toBe(back);
    expect(problems).toEqual([]);
  }

  it('charge, 4000000000003014: the buyer authenticates, tds_finish makes it paid and captured; the page then has nothing left to do', async () => {
    const charge = await payjp.charges.create({ amount: 1_500, currency: 'jpy', card: (await tokenOf('threeDSecureRequired')).id, three_d_secure: true } as never);
    expect(charge).toMatchObject({ paid: false, captured: false, three_d_secure_status: 'unverified' });
    const { start } = addresses(charge.id);
    await page.goto(start);
    expect(await page.locator('#amount').innerText()).toBe('¥1,500');
    expect(await page.locator('#last4').innerText()).toBe('3014');
    expect(await page.locator('#mode').count()).toBe(1);

    await buyerAnswers(charge.id, 'authenticate', '01-charge-challenge');
    expect(await payjp.charges.retrieve(charge.id)).toMatchObject({ paid: false, three_d_secure_status: 'verified' });
    expect(await payjp.charges.tds_finish(charge.id)).toMatchObject({ id: charge.id, paid: true, captured: true, three_d_secure_status: 'verified', failure_code: null });

    // Authenticated already: the start address sends the buyer straight back, unchanged.
    const again = addresses(charge.id);
    await page.goto(again.start);
    expect(page.url()).toBe(again.back);
  });

  it('charge with capture=false, 4000000000003022: attempted is enough for tds_finish, which holds it', async () => {
    const charge = await payjp.charges.create({ amount: 2_000, currency: 'jpy', card: (await tokenOf('threeDSecureAttempted')).id, three_d_secure: true, capture: false, expiry_days: 3 } as never);
    await buyerAnswers(charge.id, 'authenticate', '02-charge-hold-challenge');
    expect(await payjp.charges.retrieve(charge.id)).toMatchObject({ three_d_secure_status: 'attempted' });
    const held = await payjp.charges.tds_finish(charge.id);
    expect(held).toMatchObject({ paid: true, captured: false, captured_at: null, three_d_secure_status: 'attempted' });
    // The hold counts from tds_finish (service rules §2): 3 × 24 h.
    expect(held.expired_at).toBe(Math.floor(server.ctx.clock.now().getTime() / 1000) + 3 * 86_400);
  });

  it('charge, 4000000000003030: authentication fails on the page, tds_finish is three_d_secure_failed (402)', async () => {
    const charge = await payjp.charges.create({ amount: 1_000, currency: 'jpy', card: (await tokenOf('threeDSecureFailed')).id, three_d_secure: true } as never);
    await buyerAnswers(charge.id, 'authenticate', '03-charge-failing-card');
    expect(await payjp.charges.retrieve(charge.id)).toMatchObject({ paid: false, three_d_secure_status: 'failed' });
    expect(await sdkError(payjp.charges.tds_finish(charge.id))).toMatchObject({ status: 402, code: 'three_d_secure_failed' });
  });

  it('token with three_d_secure=true: authenticated on the page, tds_finish, then a charge with it is paid; a failing card is refused', async () => {
    const token = await tokenOf('threeDSecureRequired', true);
    expect(token).toMatchObject({ card: { three_d_secure_status: 'unverified' } });
    await page.goto(addresses(token.id).start);
    // Nothing is charged by a token's authentication.
    expect(await page.locator('#save-card').innerText()).toContain('nothing is charged');
    expect(await page.locator('#amount').count()).toBe(0);
    await buyerAnswers(token.id, 'authenticate', '04-token-challenge');
    expect(await payjp.tokens.tds_finish(token.id)).toMatchObject({ id: token.id, card: { three_d_secure_status: 'verified' } });
    expect(await payjp.charges.create({ amount: 800, currency: 'jpy', card: token.id })).toMatchObject({ paid: true, captured: true, three_d_secure_status: 'verified' });

    const failing = await tokenOf('threeDSecureFailed', true);
    await buyerAnswers(failing.id, 'authenticate', '05-token-failing-card');
    expect(await sdkError(payjp.tokens.tds_finish(failing.id))).toMatchObject({ status: 402, code: 'three_d_secure_failed' });

    const abandoned = await tokenOf('threeDSecureRequired', true);
    await buyerAnswers(abandoned.id, 'cancel', '06-token-cancel');
    expect(await sdkError(payjp.tokens.tds_finish(abandoned.id))).toMatchObject({ status: 400, code: 'three_d_secure_incompleted' });
  });

  it('3-D Secure request of a customer card: the page starts it, the buyer authenticates (verified) or fails; canceling leaves it in progress', async () => {
    const customer = await payjp.customers.create({ card: (await tokenOf('threeDSecureRequired')).id } as never);
    const request = await payjp.three_d_secure_requests.create({ resource_id: customer.default_card as string });
    expect(request).toMatchObject({ state: 'created', three_d_secure_status: 'unverified' });
    await buyerAnswers(request.id, 'authenticate', '07-request-challenge');
    expect(await payjp.three_d_secure_requests.retrieve(request.id)).toMatchObject({ state: 'finished', three_d_secure_status: 'verified' });
    expect(await payjp.customers.cards.retrieve(customer.id, customer.default_card as string)).toMatchObject({ three_d_secure_status: 'verified' });

    const failingCustomer = await payjp.customers.create({ card: (await tokenOf('threeDSecureFailed')).id } as never);
    const failing = await payjp.three_d_secure_requests.create({ resource_id: failingCustomer.default_card as string });
    await buyerAnswers(failing.id, 'authenticate', '08-request-failing-card');
    expect(await payjp.three_d_secure_requests.retrieve(failing.id)).toMatchObject({ state: 'finished', three_d_secure_status: 'failed' });

    const abandoned = await payjp.three_d_secure_requests.create({ resource_id: customer.default_card as string });
    await buyerAnswers(abandoned.id, 'cancel', '09-request-cancel');
    expect(await payjp.three_d_secure_requests.retrieve(abandoned.id)).toMatchObject({ state: 'in_progress', three_d_secure_status: 'unverified', finished_at: null });
  });

  it('refusals are pages: a secret key, another account’s key, an unknown id, a back_url that is not http(s)', async () => {
    const charge = await payjp.charges.create({ amount: 1_000, currency: 'jpy', card: (await tokenOf('threeDSecureRequired')).id, three_d_secure: true } as never);
    const refusedWith = async (start: string, status: number) => {
      const response = await page.goto(start);
      expect(response!.status()).toBe(status);
      expect(response!.headers()['content-type']).toContain('text/html');
      expect(await page.locator('#refused').count()).toBe(1);
      // No way onwards to an address the page could not check.
      expect(await page.locator('#back').count()).toBe(0);
    };
    await refusedWith(addresses(charge.id, server.keys.a.test.secret).start, 401);
    await refusedWith(addresses(charge.id, server.keys.b.test.public).start, 404);
    await refusedWith(addresses('ch_nope').start, 404);
    await refusedWith(`${server.baseUrl}/v1/tds/${charge.id}/start?${new URLSearchParams({ publickey: server.keys.a.test.public, back_url: 'javascript:alert(1)' })}`, 400);
    await shot('10-refused');
    // Nothing of the charge changed.
    expect(await payjp.charges.retrieve(charge.id)).toMatchObject({ paid: false, three_d_secure_status: 'unverified' });
  });

  it('abandoned charge: canceling returns unchanged (tds_finish: three_d_secure_incompleted); after the 30-minute window the page says so and tds_finish is three_d_secure_expired', async () => {
    const charge = await payjp.charges.create({ amount: 1_200, currency: 'jpy', card: (await tokenOf('threeDSecureRequired')).id, three_d_secure: true } as never);
    await buyerAnswers(charge.id, 'cancel', '11-charge-cancel');
    expect(await payjp.charges.retrieve(charge.id)).toMatchObject({ paid: false, three_d_secure_status: 'unverified' });
    expect(await sdkError(payjp.charges.tds_finish(charge.id))).toMatchObject({ status: 400, code: 'three_d_secure_incompleted' });

    server.ctx.clock.advance(31 * MINUTE);
    const { start, back } = addresses(charge.id);
    await page.goto(start);
    await page.getByRole('button', { name: /Authenticate/ }).click();
    await page.locator('#refused').waitFor();
    expect(await page.locator('[role=alert]').innerText()).toContain('3-D Secure window');
    expect(await page.locator('#back').getAttribute('href')).toBe(back);
    await shot('12-window-passed');
    expect(await sdkError(payjp.charges.tds_finish(charge.id))).toMatchObject({ status: 400, code: 'three_d_secure_expired' });
  });
});
