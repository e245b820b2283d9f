/**
 * Every v2 operation kessai serves (official-sdks.md §2), called through the official
 * `@payjp/payjpv2` SDK unmodified (`createClient({ apiKey, baseUrl })`) against the real server.
 */
import * as v2 from '@payjp/payjpv2';
import type { Client } from '@payjp/payjpv2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticate } from '../../src/accounts/accounts';
import { runOperation } from '../../src/api/operations';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { startTestServer, type TestServer } from '../support/http-server';
import { ok, problem, v2Client } from '../support/v2-sdk';

type Json = Record<string, unknown> & { id: string };

describe('v2 resources through @payjp/payjpv2', () => {
  let server: TestServer;
  let client: Client;

  /** A test-mode card payment method (POST /v2/payment_methods, test mode only). */
  async function cardMethod(number: string = TEST_CARDS.visa.number, extra: { customer_id?: string } = {}): Promise<Json> {
    return ok(v2.createPaymentMethod({ client, body: { type: 'card', card: { number, exp_month: 12, exp_year: 2035, cvc: '123' }, billing_details: { email: 'buyer@example.com' }, ...extra } })) as Promise<Json>;
  }

  beforeAll(async () => {
    server = await startTestServer('harness');
    client = v2Client(server, server.keys.a.test.secret);
  });
  afterAll(async () => server?.close());

  it('payment methods: create (test mode), retrieve, update, list, attach, detach, by v1 card id', async () => {
    const pm = await cardMethod();
    expect(pm).toMatchObject({ object: 'payment_method', type: 'card', customer_id: null, card: { last4: '4242', brand: 'Visa' }, livemode: false });
    expect(await ok(v2.getPaymentMethod({ client, path: { payment_method_id: pm.id } }))).toEqual(pm);
    expect(await ok(v2.updatePaymentMethod({ client, path: { payment_method_id: pm.id }, body: { type: 'card', metadata: { tier: 'gold', n: 2, vip: true } } }))).toMatchObject({ metadata: { tier: 'gold', n: 2, vip: true } });
    await ok(v2.createCustomer({ client, body: { id: 'cus_v2_pm' } }));
    expect(await ok(v2.attachPaymentMethod({ client, path: { payment_method_id: pm.id }, body: { customer_id: 'cus_v2_pm' } }))).toMatchObject({ customer_id: 'cus_v2_pm' });
    const listed = await ok(v2.getAllPaymentMethods({ client, query: { limit: 100 } }));
    expect(listed).toMatchObject({ object: 'list', url: '/v2/payment_methods', has_more: false });
    expect(listed.data.map((m) => m.id)).toContain(pm.id);
    expect((await ok(v2.getCustomerPaymentMethods({ client, path: { customer_id: 'cus_v2_pm' } }))).data.map((m) => m.id)).toEqual([pm.id]);
    const detached = await ok(v2.detachPaymentMethod({ client, path: { payment_method_id: pm.id } }));
    expect(detached).toMatchObject({ customer_id: null });
    expect(typeof detached.detached_at).toBe('string');
    // A v1 card (made with the v1 SDK) has a payment method too, the same on every lookup.
    const payjp = server.sdk(server.keys.a.test.secret);
    const tok = await payjp.tokens.create({ card: { number: TEST_CARDS.mastercard.number, exp_month: 12, exp_year: 2035, cvc: '123' } } as never, { 'X-Payjp-Direct-Token-Generate': 'true' });
    const customer = await payjp.customers.create({ card: tok.id } as never);
    const byCard = await ok(v2.getPaymentMethodByCard({ client, path: { card_id: customer.default_card as string } }));
    expect(byCard).toMatchObject({ type: 'card', customer_id: customer.id, card: { last4: '4444' } });
    expect((await ok(v2.getPaymentMethodByCard({ client, path: { card_id: customer.default_card as string } }))).id).toBe(byCard.id);
  });

  it('customers: create with an own id and a payment method (made the default), retrieve, update, list, delete', async () => {
    const pm = await cardMethod();
    const created = await ok(v2.createCustomer({ client, body: { id: 'cus_v2_own', email: 'own@example.com', payment_method_id: pm.id, metadata: { plan: 'gold', seats: 3 } } }));
    expect(created).toMatchObject({ id: 'cus_v2_own', object: 'customer', email: 'own@example.com', default_payment_method_id: pm.id, metadata: { plan: 'gold', seats: 3 } });
    expect(created.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(await ok(v2.getCustomer({ client, path: { customer_id: 'cus_v2_own' } }))).toEqual(created);
    expect(await ok(v2.updateCustomer({ client, path: { customer_id: 'cus_v2_own' }, body: { description: 'regular', metadata: { seats: 4 } } }))).toMatchObject({ description: 'regular', metadata: { plan: 'gold', seats: 4 } });
    expect((await ok(v2.getAllCustomers({ client, query: { limit: 100 } }))).data.map((c) => c.id)).toContain('cus_v2_own');
    const deleted = await ok(v2.deleteCustomer({ client, path: { customer_id: 'cus_v2_own' } }));
    expect(deleted).toMatchObject({ id: 'cus_v2_own', object: 'customer' });
    expect(await problem(v2.getCustomer({ client, path: { customer_id: 'cus_v2_own' } }))).toMatchObject({ status: 404, title: 'Not Found', errors: [{ field: 'customer_id' }] });
    // Its v2 events (v2 §6.1), written with each change: created, updated, deleted.
    const events = await ok(v2.getAllEvents({ client, query: { resource_id: 'cus_v2_own' } }));
    expect(events.data.map((e) => e.type)).toEqual(['customer.deleted', 'customer.updated', 'customer.created']);
    expect(events.data[0]!.data).toMatchObject({ id: 'cus_v2_own', object: 'customer', default_payment_method_id: pm.id, created_at: created.created_at });
    expect(events.data[2]!.data).toMatchObject({ default_payment_method_id: pm.id });
    expect(await problem(v2.createCustomer({ client, body: { id: 'cus_v2_own' } }))).toMatchObject({ status: 400, title: 'Already Exists ID', errors: [{ field: 'id' }] });
  });

  it('payment flows: create, retrieve, update, confirm with a pm_ method (manual → requires_capture), one partial capture then the remainder, list by customer, the flow’s refunds', async () => {
    await ok(v2.createCustomer({ client, body: { id: 'cus_v2_flow' } }));
    const pm = await cardMethod(TEST_CARDS.visa.number, { customer_id: 'cus_v2_flow' });
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 5000, currency: 'jpy', capture_method: 'manual', customer_id: 'cus_v2_flow', metadata: { order: 'A-1' } } }));
    expect(flow).toMatchObject({ object: 'payment_flow', status: 'requires_payment_method', amount: 5000, customer_id: 'cus_v2_flow', customer: 'cus_v2_flow', metadata: { order: 'A-1' } });
    expect(typeof flow.client_secret).toBe('string');
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flow.id } }))).toEqual(flow);
    expect(await ok(v2.updatePaymentFlow({ client, path: { payment_flow_id: flow.id }, body: { amount: 6000, description: 'two items' } }))).toMatchObject({ amount: 6000, description: 'two items' });
    const held = await ok(v2.confirmPaymentFlow({ client, path: { payment_flow_id: flow.id }, body: { payment_method_id: pm.id } }));
    expect(held).toMatchObject({ status: 'requires_capture', amount_capturable: 6000, payment_method_id: pm.id });
    const partial = await ok(v2.capturePaymentFlow({ client, path: { payment_flow_id: flow.id }, body: { amount_to_capture: 2000 } }));
    expect(partial).toMatchObject({ status: 'requires_capture', amount_received: 2000, amount_capturable: 4000 });
    expect(await ok(v2.capturePaymentFlow({ client, path: { payment_flow_id: flow.id } }))).toMatchObject({ status: 'succeeded', amount_received: 6000, amount_capturable: 0 });
    const other = await ok(v2.createPaymentFlow({ client, body: { amount: 800, currency: 'jpy' } }));
    const byCustomer = await ok(v2.getAllPaymentFlows({ client, query: { customer_id: 'cus_v2_flow' } }));
    expect(byCustomer.data.map((f) => f.id)).toEqual([flow.id]);
    expect((await ok(v2.getAllPaymentFlows({ client, query: { limit: 100 } }))).data.map((f) => f.id)).toEqual(expect.arrayContaining([flow.id, other.id]));
    const refund = await ok(v2.createPaymentRefund({ client, body: { payment_flow_id: flow.id, amount: 1000 } }));
    expect(await ok(v2.getPaymentFlowRefunds({ client, path: { payment_flow_id: flow.id } }))).toMatchObject({ object: 'list', data: [{ id: refund.id, amount: 1000 }] });
  });

  it('payment flows: create with confirm=true (automatic capture), the customer’s default method, a 3-D Secure card → requires_action with next_action, cancel with cancellation_reason', async () => {
    const pm = await cardMethod();
    expect(await ok(v2.createPaymentFlow({ client, body: { amount: 1200, currency: 'jpy', payment_method_id: pm.id, confirm: true } }))).toMatchObject({ status: 'succeeded', amount_received: 1200 });
    const defaultPm = await cardMethod();
    await ok(v2.createCustomer({ client, body: { id: 'cus_v2_default', payment_method_id: defaultPm.id } }));
    expect(await ok(v2.createPaymentFlow({ client, body: { amount: 700, currency: 'jpy', customer_id: 'cus_v2_default', confirm: true } }))).toMatchObject({ status: 'succeeded', payment_method_id: defaultPm.id });
    const tds = await cardMethod(TEST_CARDS.threeDSecureRequired.number);
    const action = await ok(v2.createPaymentFlow({ client, body: { amount: 900, currency: 'jpy', payment_method_id: tds.id, confirm: true, return_url: 'https://shop.example/return' } }));
    expect(action).toMatchObject({ status: 'requires_action', next_action: { type: 'three_d_secure' } });
    // Update attaches the customer and a method (the SDK's customer_id, payment_method_id); confirm then needs no body.
    await ok(v2.createCustomer({ client, body: { id: 'cus_v2_update' } }));
    const owned = await cardMethod(TEST_CARDS.visa.number, { customer_id: 'cus_v2_update' });
    const bare = await ok(v2.createPaymentFlow({ client, body: { amount: 1300, currency: 'jpy' } }));
    expect(await problem(v2.updatePaymentFlow({ client, path: { payment_flow_id: bare.id }, body: { payment_method_id: owned.id } }))).toMatchObject({ status: 400, title: 'Payment Method Not Owned By Customer' });
    const ready = await ok(v2.updatePaymentFlow({ client, path: { payment_flow_id: bare.id }, body: { customer_id: 'cus_v2_update', payment_method_id: owned.id } }));
    expect(ready).toMatchObject({ status: 'requires_confirmation', customer_id: 'cus_v2_update', payment_method_id: owned.id });
    expect(await ok(v2.confirmPaymentFlow({ client, path: { payment_flow_id: bare.id } }))).toMatchObject({ status: 'succeeded', amount_received: 1300 });
    // The SDK's confirm body may also set capture_method, description and the card options.
    const later = await ok(v2.createPaymentFlow({ client, body: { amount: 1100, currency: 'jpy' } }));
    const confirmed = await ok(
      v2.confirmPaymentFlow({ client, path: { payment_flow_id: later.id }, body: { payment_method_id: (await cardMethod()).id, capture_method: 'manual', description: 'held at confirmation', payment_method_options: { card: { request_three_d_secure: 'automatic' } } } }),
    );
    expect(confirmed).toMatchObject({ status: 'requires_capture', capture_method: 'manual', description: 'held at confirmation' });
    const canceled = await ok(v2.cancelPaymentFlow({ client, path: { payment_flow_id: action.id }, body: { cancellation_reason: 'requested_by_customer' } }));
    expect(canceled).toMatchObject({ status: 'canceled', cancellation_reason: 'requested_by_customer' });
    expect(typeof canceled.canceled_at).toBe('string');
  });

  it('the public key with a flow’s client_secret reads and confirms only that flow; alone it reaches nothing', async () => {
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 1500, currency: 'jpy' } }));
    const browser = v2Client(server, server.keys.a.test.public);
    const pm = await cardMethod();
    expect(await ok(v2.getPaymentFlow({ client: browser, path: { payment_flow_id: flow.id }, query: { client_secret: flow.client_secret } } as never))).toMatchObject({ id: flow.id });
    expect(await problem(v2.getPaymentFlow({ client: browser, path: { payment_flow_id: flow.id } }))).toMatchObject({ status: 404 });
    expect(await problem(v2.getPaymentFlow({ client: browser, path: { payment_flow_id: flow.id }, query: { client_secret: `${flow.client_secret}x` } } as never))).toMatchObject({ status: 404 });
    expect(await problem(v2.createPaymentFlow({ client: browser, body: { amount: 1500, currency: 'jpy' } }))).toMatchObject({ status: 401, title: 'Unauthorized' });
    expect(await problem(v2.getAllPaymentFlows({ client: browser }))).toMatchObject({ status: 401 });
    const confirmed = await ok(v2.confirmPaymentFlow({ client: browser, path: { payment_flow_id: flow.id }, body: { payment_method_id: pm.id, client_secret: flow.client_secret } as never }));
    expect(confirmed).toMatchObject({ status: 'succeeded' });
  });

  it('payment refunds: create (partial), retrieve, update metadata, list', async () => {
    const pm = await cardMethod();
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 3000, currency: 'jpy', payment_method_id: pm.id, confirm: true } }));
    const refund = await ok(v2.createPaymentRefund({ client, body: { payment_flow_id: flow.id, amount: 1000, reason: 'requested_by_customer', metadata: { ticket: 7 } } }));
    expect(refund).toMatchObject({ object: 'payment_refund', payment_flow_id: flow.id, amount: 1000, status: 'succeeded', reason: 'requested_by_customer', metadata: { ticket: 7 } });
    expect(await ok(v2.getPaymentRefund({ client, path: { payment_refund_id: refund.id } }))).toEqual(refund);
    expect(await ok(v2.updatePaymentRefund({ client, path: { payment_refund_id: refund.id }, body: { metadata: { ticket: '' , note: 'ok' } } }))).toMatchObject({ metadata: { note: 'ok' } });
    expect((await ok(v2.getAllPaymentRefunds({ client, query: { limit: 100 } }))).data.map((r) => r.id)).toContain(refund.id);
    expect(await ok(v2.createPaymentRefund({ client, body: { payment_flow_id: flow.id } }))).toMatchObject({ amount: 2000 });
  });

  it('products, prices, tax rates: create, retrieve, update, list; a product without prices is deleted', async () => {
    const product = await ok(v2.createProduct({ client, body: { name: 'T-shirt', id: 'prod_v2_shirt', unit_label: 'piece' } }));
    expect(product).toMatchObject({ id: 'prod_v2_shirt', object: 'product', name: 'T-shirt', active: true });
    expect(await ok(v2.getProduct({ client, path: { product_id: product.id } }))).toEqual(product);
    expect(await ok(v2.updateProduct({ client, path: { product_id: product.id }, body: { description: 'cotton' } }))).toMatchObject({ description: 'cotton' });
    const price = await ok(v2.createPrice({ client, body: { product_id: product.id, unit_amount: 2500, currency: 'jpy', nickname: 'standard' } }));
    expect(price).toMatchObject({ object: 'price', product_id: product.id, unit_amount: 2500, currency: 'jpy' });
    expect(await ok(v2.getPrice({ client, path: { price_id: price.id } }))).toEqual(price);
    expect(await ok(v2.updatePrice({ client, path: { price_id: price.id }, body: { nickname: 'regular' } }))).toMatchObject({ nickname: 'regular' });
    expect((await ok(v2.getAllPrices({ client, query: { product_id: product.id } as never }))).data.map((p) => p.id)).toEqual([price.id]);
    expect((await ok(v2.getAllProducts({ client, query: { limit: 100 } }))).data.map((p) => p.id)).toContain(product.id);
    const rate = await ok(v2.createTaxRate({ client, body: { display_name: 'VAT', percentage: 10, inclusive: false } }));
    expect(rate).toMatchObject({ object: 'tax_rate', display_name: 'VAT', inclusive: false });
    expect(await ok(v2.getTaxRate({ client, path: { tax_rate_id: rate.id } }))).toEqual(rate);
    expect(await ok(v2.updateTaxRate({ client, path: { tax_rate_id: rate.id }, body: { description: 'standard rate' } }))).toMatchObject({ description: 'standard rate' });
    expect((await ok(v2.getAllTaxRates({ client, query: { limit: 100 } }))).data.map((r) => r.id)).toContain(rate.id);
    const bare = await ok(v2.createProduct({ client, body: { name: 'Sticker' } }));
    expect(await ok(v2.deleteProduct({ client, path: { product_id: bare.id } }))).toMatchObject({ id: bare.id, deleted: true });
  });

  it('checkout sessions: create by price_id (and the seed’s price), retrieve, update, list, line items, expire; payment_flow_data.metadata becomes the flow’s metadata (v2 §2.6 rule 6)', async () => {
    const price = await ok(v2.createPrice({ client, body: { unit_amount: 1000, currency: 'jpy' } as never }));
    const session = await ok(
      v2.createCheckoutSession({
        client,
        body: { mode: 'payment', line_items: [{ price_id: price.id, quantity: 2 }], success_url: 'https://shop.example/ok?session={CHECKOUT_SESSION_ID}', cancel_url: 'https://shop.example/cancel', metadata: { cart: 'c1' }, payment_flow_data: { metadata: { order: 'o-9' } } },
      }),
    );
    expect(session).toMatchObject({ object: 'checkout.session', status: 'open', amount_total: 2000, metadata: { cart: 'c1' } });
    expect(typeof session.url).toBe('string');
    expect(await ok(v2.getCheckoutSession({ client, path: { checkout_session_id: session.id } }))).toEqual(session);
    expect(await ok(v2.updateCheckoutSession({ client, path: { checkout_session_id: session.id }, body: { metadata: { gift: true } } }))).toMatchObject({ metadata: { cart: 'c1', gift: true } });
    expect((await ok(v2.getAllCheckoutSessions({ client, query: { limit: 100 } }))).data.map((s) => s.id)).toContain(session.id);
    expect(await ok(v2.getAllCheckoutSessionLineItems({ client, path: { checkout_session_id: session.id } }))).toMatchObject({ object: 'list', data: [{ price_id: price.id, quantity: 2 }] });
    // The buyer pays on the hosted page (test/browser/checkout-page.test.ts); here its operation completes the session.
    const tok = await server.sdk(server.keys.a.test.secret).tokens.create({ card: { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: 2035, cvc: '123' } } as never, { 'X-Payjp-Direct-Token-Generate': 'true' });
    const completed = (await runOperation(server.ctx, await authenticate(server.ctx, server.keys.a.test.secret), 'checkout.sessions.complete', { id: session.id, payment_method: tok.id })) as Json;
    const flowId = completed.payment_flow as string;
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flowId } }))).toMatchObject({ status: 'succeeded', metadata: { order: 'o-9' } });
    expect(await ok(v2.getCheckoutSession({ client, path: { checkout_session_id: session.id } }))).toMatchObject({ status: 'complete', payment_flow_id: flowId });
    const seedNames = await ok(v2.createCheckoutSession({ client, body: { mode: 'payment', line_items: [{ price: price.id, quantity: 1 }], success_url: 'https://shop.example/ok' } as never }));
    expect(seedNames).toMatchObject({ amount_total: 1000 });
    // expireCheckoutSession is newer than the SDK's 1.0.5 (official-sdks.md §2): its request through the SDK's client.
    const expire = () => client.post({ url: '/v2/checkout/sessions/{checkout_session_id}/expire', path: { checkout_session_id: seedNames.id } }) as Promise<{ data?: Json; error?: unknown; response: Response }>;
    const expired = await ok(expire());
    expect(expired).toMatchObject({ status: 'expired', url: null });
    expect(await problem(expire())).toMatchObject({ status: 400, title: 'Invalid Status' });
  });

  it('payment method configurations: list, retrieve, update the display preference (test mode shows all but off)', async () => {
    const list = await ok(v2.getAllPaymentMethodConfigurations({ client }));
    expect(list).toMatchObject({ object: 'list', url: '/v2/payment_method_configurations' });
    const config = list.data[0]!;
    expect(await ok(v2.getPaymentMethodConfiguration({ client, path: { payment_method_configuration_id: config.id } }))).toEqual(config);
    const off = await ok(v2.updatePaymentMethodConfiguration({ client, path: { payment_method_configuration_id: config.id }, body: { paypay: { display_preference: { preference: 'off' } } } }));
    expect(off.paypay).toMatchObject({ available: false, display_preference: { preference: 'off', value: 'off' } });
    const none = await ok(v2.updatePaymentMethodConfiguration({ client, path: { payment_method_configuration_id: config.id }, body: { paypay: { display_preference: { preference: 'none' } } } }));
    expect(none.paypay).toMatchObject({ available: true, display_preference: { preference: 'none', value: 'on' } });
    expect(await ok(v2.updatePaymentMethodConfiguration({ client, path: { payment_method_configuration_id: config.id }, body: { name: 'Shop front', active: true } }))).toMatchObject({ name: 'Shop front', active: true });
    // Test and live configurations are apart (v2 §4.5 rule 6).
    const live = await ok(v2.getAllPaymentMethodConfigurations({ client: v2Client(server, server.keys.a.live.secret) }));
    expect(live.data[0]).toMatchObject({ livemode: true, name: expect.not.stringMatching('Shop front') });
    expect(live.data[0]!.id).not.toBe(config.id);
  });

  it('events: list filtered by resource_id, object and type with cursors both ways, retrieve with pending_webhooks', async () => {
    const pm = await cardMethod();
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 2200, currency: 'jpy', payment_method_id: pm.id, confirm: true } }));
    const events = await ok(v2.getAllEvents({ client, query: { resource_id: flow.id } }));
    expect(events.data.map((e) => e.type)).toEqual(['payment_flow.succeeded', 'payment_flow.processing', 'payment_flow.created']);
    expect(events).toMatchObject({ object: 'list', url: '/v2/events', has_more: false });
    const [newest, middle, oldest] = events.data;
    expect(newest).toMatchObject({ object: 'event', pending_webhooks: 0, data: { id: flow.id, object: 'payment_flow' } });
    expect(newest!.created_at).toMatch(/Z$/);
    expect((await ok(v2.getAllEvents({ client, query: { resource_id: flow.id, limit: 1 } }))).has_more).toBe(true);
    expect((await ok(v2.getAllEvents({ client, query: { resource_id: flow.id, starting_after: newest!.id } }))).data.map((e) => e.id)).toEqual([middle!.id, oldest!.id]);
    expect((await ok(v2.getAllEvents({ client, query: { resource_id: flow.id, ending_before: oldest!.id } }))).data.map((e) => e.id)).toEqual([newest!.id, middle!.id]);
    expect((await ok(v2.getAllEvents({ client, query: { object: 'payment_flow', type: 'payment_flow.succeeded', limit: 100 } }))).data.every((e) => e.type === 'payment_flow.succeeded')).toBe(true);
    expect(await ok(v2.getEvent({ client, path: { event_id: newest!.id } }))).toEqual(newest);
  });

  it('terms, statements and balances: read-only views with ISO instants', async () => {
    const terms = await ok(v2.getAllTerms({ client }));
    expect(terms).toMatchObject({ object: 'list', url: '/v2/terms' });
    const term = terms.data[0]!;
    expect(term.start_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(await ok(v2.getTerm({ client, path: { term_id: term.id } }))).toEqual(term);
    expect(await ok(v2.getAllStatements({ client }))).toMatchObject({ object: 'list', url: '/v2/statements', data: [] });
    expect(await ok(v2.getAllBalances({ client }))).toMatchObject({ object: 'list', url: '/v2/balances', data: [] });
    expect(await problem(v2.getStatement({ client, path: { statement_id: 'st_none' } }))).toMatchObject({ status: 404, errors: [{ field: 'statement_id' }] });
    expect(await problem(v2.createStatementUrl({ client, path: { statement_id: 'st_none' } }))).toMatchObject({ status: 404 });
    expect(await problem(v2.getBalance({ client, path: { balance_id: 'ba_none' } }))).toMatchObject({ status: 404, title: 'Not Found' });
  });
});
