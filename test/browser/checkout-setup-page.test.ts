/**
 * The hosted page of a setup session in a real browser: a session in mode setup
 * made with the official `@payjp/payjpv2` SDK, its `url` opened in Debian's Chromium (playwright-core)
 * against the real server (startTestServer). The page takes no payment: it saves a card to the
 * session's customer by confirming the session's setup flow through /v2/js/kessai.js with the
 * public key and the flow's client secret. Asserted by where the browser lands, by what the page
 * says, by the customer's payment methods and the events, read through the v2 API. No request may
 * leave for a third party; screenshots under test-output/checkout-setup-page/.
 */
import { fileURLToPath } from 'node:url';
import * as v2 from '@payjp/payjpv2';
import type { Client } from '@payjp/payjpv2';
import type { Page } from 'playwright-core';
import { beforeEach, describe, expect, it } from 'vitest';
import type { TestCardName } from '../../src/processor/test-cards';
import { checkoutBrowserSuite, fillCard, type Shop } from '../support/checkout-browser';
import type { TestServer } from '../support/http-server';
import { ok, v2EventTypes } from '../support/v2-sdk';

const OUTPUT = fileURLToPath(new URL('../../test-output/checkout-setup-page/', import.meta.url));

describe('hosted page of a setup session in Chromium', () => {
  const suite = checkoutBrowserSuite({ output: OUTPUT, viewport: { width: 900, height: 900 } });
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

  let customers = 0;
  /** A customer and a setup session for them, as a merchant makes it. */
  async function setupSession() {
    customers += 1;
    const customer = await ok(v2.createCustomer({ client, body: { id: `cus_setup_page_${customers}` } }));
    const created = await ok(
      v2.createCheckoutSession({ client, body: { mode: 'setup', customer_id: customer.id, success_url: `${shop.url}/saved?session_id={CHECKOUT_SESSION_ID}`, cancel_url: `${shop.url}/cancel` } }),
    );
    return { created, customerId: customer.id };
  }

  /** Fills the card form by its labels and submits it from the keyboard. */
  async function saveCard(card: TestCardName): Promise<void> {
    await fillCard(page, card);
    await page.getByLabel('セキュリティコード / Security code').press('Enter');
  }

  const sessionOf = (id: string) => ok(v2.getCheckoutSession({ client, path: { checkout_session_id: id } }));

  it('a Visa card is saved: no payment shown, success_url with the session id, the session complete once, the card listed under the customer', async () => {
    const { created, customerId } = await setupSession();
    expect(created.url).toBe(`${server.baseUrl}/checkout/pay/${created.id}`);
    const response = await page.goto(created.url!);
    expect(response!.status()).toBe(200);
    expect(response!.headers()['content-security-policy']).toContain("script-src 'self'");
    await expect.poll(() => page.getByRole('heading', { level: 1 }).innerText()).toContain('Save your card');
    expect(await page.locator('#no-charge').innerText()).toContain('No payment is taken now');
    expect(await page.locator('#line-items').count()).toBe(0);
    expect(await page.locator('#total').count()).toBe(0);
    expect(await page.getByRole('button', { name: /Save card/ }).count()).toBe(1);
    await shot('01-setup-page');
    // Opening the page made the session's setup flow, for the session's customer.
    const opened = await sessionOf(created.id);
    const flowId = opened.setup_flow_id as string;
    expect(await ok(v2.getSetupFlow({ client, path: { setup_flow_id: flowId } }))).toMatchObject({ status: 'requires_payment_method', customer_id: customerId, checkout_session_id: created.id });

    await saveCard('visa');
    await page.waitForURL(`${shop.url}/saved?session_id=${created.id}`);
    await shot('02-success-url');
    expect(await sessionOf(created.id)).toMatchObject({ status: 'complete', setup_flow_id: flowId, redirect_url: `${shop.url}/saved?session_id=${created.id}` });
    const flow = await ok(v2.getSetupFlow({ client, path: { setup_flow_id: flowId } }));
    expect(flow).toMatchObject({ status: 'succeeded', customer_id: customerId });
    const methods = await ok(v2.getCustomerPaymentMethods({ client, path: { customer_id: customerId } }));
    expect(methods.data).toEqual([expect.objectContaining({ id: flow.payment_method_id })]);
    expect(await eventTypes(created.id)).toEqual(['checkout.session.completed']);
    expect((await eventTypes(flowId)).filter((type) => type.startsWith('setup_flow.'))).toEqual(['setup_flow.created', 'setup_flow.succeeded']);

    // Back on the page: it says the session is complete; nothing completes it twice.
    await page.goto(created.url!);
    expect(await page.locator('#state').getAttribute('data-state')).toBe('complete');
    await page.goto(`${created.url}/return?setup_flow_id=${flowId}&setup_flow_client_secret=${encodeURIComponent(flow.client_secret)}&redirect_status=succeeded`);
    await page.waitForURL(`${shop.url}/saved?session_id=${created.id}`);
    expect(await eventTypes(created.id)).toEqual(['checkout.session.completed']);
    expect(problems).toEqual([]);
  });

  it('a declined card is told on the page and saves nothing; a 3-D Secure card then passes its challenge and is saved', async () => {
    const { created, customerId } = await setupSession();
    await page.goto(created.url!);
    await saveCard('declinesOnCharge');
    const message = page.locator('#message');
    await expect.poll(() => message.innerText()).not.toBe('');
    expect(await message.getAttribute('role')).toBe('alert');
    expect(page.url()).toBe(created.url);
    // The form is usable again, focus back on the card number.
    expect(await page.getByRole('button', { name: /Save card/ }).isEnabled()).toBe(true);
    expect(await page.locator('#card-number:focus').count()).toBe(1);
    await shot('03-declined-card');
    const open = await sessionOf(created.id);
    expect(open.status).toBe('open');
    expect((await ok(v2.getCustomerPaymentMethods({ client, path: { customer_id: customerId } }))).data).toEqual([]);
    // Reloaded, the page still tells why the last card was refused.
    await page.reload();
    expect(await message.innerText()).not.toBe('');

    await saveCard('threeDSecureRequired');
    await page.waitForURL(/\/v2\/js\/three_d_secure\?/);
    expect(await page.locator('#save-card').innerText()).toContain('nothing is charged');
    expect(await page.locator('#amount').count()).toBe(0);
    await shot('04-three-d-secure-challenge');
    await page.getByRole('button', { name: /Authenticate/ }).click();
    await page.waitForURL(`${shop.url}/saved?session_id=${created.id}`);
    const flowId = open.setup_flow_id as string;
    const flow = await ok(v2.getSetupFlow({ client, path: { setup_flow_id: flowId } }));
    expect(flow).toMatchObject({ status: 'succeeded' });
    expect((await ok(v2.getCustomerPaymentMethods({ client, path: { customer_id: customerId } }))).data).toEqual([expect.objectContaining({ id: flow.payment_method_id })]);
    expect(await sessionOf(created.id)).toMatchObject({ status: 'complete' });
    expect(await eventTypes(created.id)).toEqual(['checkout.session.completed']);
    expect((await eventTypes(flowId)).filter((type) => type.startsWith('setup_flow.'))).toEqual(['setup_flow.created', 'setup_flow.setup_failed', 'setup_flow.requires_action', 'setup_flow.succeeded']);
    // The decline is a 402 of the confirm call, which Chromium logs; nothing else.
    expect(problems.filter((problem) => !/status of 402/.test(problem))).toEqual([]);
  });

  it('a canceled challenge brings the buyer back to the page with the reason; the session stays open', async () => {
    const { created } = await setupSession();
    await page.goto(created.url!);
    await saveCard('threeDSecureRequired');
    await page.waitForURL(/\/v2\/js\/three_d_secure\?/);
    await page.getByRole('button', { name: /Cancel/ }).click();
    await page.waitForURL(`${created.url}?notice=canceled`);
    expect(await page.locator('#message').innerText()).toContain('save another card');
    // The challenge left open can be resumed from the page.
    expect(await page.locator('#resume-action').count()).toBe(1);
    expect((await sessionOf(created.id)).status).toBe('open');
    expect(problems).toEqual([]);
  });
});
