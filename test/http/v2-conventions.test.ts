/**
 * The v2 conventions (official-sdks.md §1, §3; v2 §2.6) through the official
 * `@payjp/payjpv2` SDK against the real server: authentication, JSON answers, every named 400
 * title an operation produces, 402, 404, 422 with the field, metadata rules 1–6 and limits, cursor
 * paging both ways, the `customer` / `customer_id` aliases, Idempotency-Key and rate limits.
 */
import * as v2 from '@payjp/payjpv2';
import type { Client } from '@payjp/payjpv2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { startTestServer, type TestServer } from '../support/http-server';
import { ok, problem, v2Client } from '../support/v2-sdk';

type Json = Record<string, unknown> & { id: string };
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

describe('v2 conventions through @payjp/payjpv2', () => {
  let server: TestServer;
  let client: Client;

  async function cardMethod(number: string = TEST_CARDS.visa.number, extra: { customer_id?: string } = {}): Promise<Json> {
    return ok(v2.createPaymentMethod({ client, body: { type: 'card', card: { number, exp_month: 12, exp_year: 2035, cvc: '123' }, billing_details: { email: 'buyer@example.com' }, ...extra } })) as Promise<Json>;
  }
  async function capturedFlow(amount: number): Promise<Json> {
    const pm = await cardMethod();
    return ok(v2.createPaymentFlow({ client, body: { amount, currency: 'jpy', payment_method_id: pm.id, confirm: true } })) as Promise<Json>;
  }
  async function raw(method: string, path: string, options: { key?: string; body?: string; contentType?: string; scheme?: 'Bearer' | 'Basic'; headers?: Record<string, string> } = {}) {
    const headers: Record<string, string> = { ...options.headers };
    if (options.key !== undefined) headers.authorization = options.scheme === 'Basic' ? `Basic ${Buffer.from(`${options.key}:`).toString('base64')}` : `Bearer ${options.key}`;
    if (options.body !== undefined) headers['content-type'] = options.contentType ?? 'application/json';
    const response = await fetch(`${server.baseUrl}${path}`, { method, headers, ...(options.body === undefined ? {} : { body: options.body }) });
    return { status: response.status, contentType: response.headers.get('content-type'), headers: response.headers, body: (await response.json()) as Record<string, unknown> };
  }

  beforeAll(async () => {
    server = await startTestServer('harness');
    client = v2Client(server, server.keys.a.test.secret);
  });
  afterAll(async () => server?.close());

  it('401 for a missing or wrong key, as a problem document; Bearer and Basic both accepted; JSON answers with 200 on creates', async () => {
    const missing = await raw('GET', '/v2/payment_flows');
    expect(missing).toMatchObject({ status: 401, contentType: 'application/problem+json; charset=utf-8', body: { status: 401, title: 'Unauthorized', type: expect.stringContaining('unauthorized') } });
    expect(await problem(v2.getAllPaymentFlows({ client: v2Client(server, 'sk_test_wrong') }))).toMatchObject({ status: 401, title: 'Unauthorized', contentType: 'application/problem+json; charset=utf-8' });
    expect(await raw('GET', '/v2/products', { key: server.keys.a.test.secret, scheme: 'Basic' })).toMatchObject({ status: 200, contentType: 'application/json; charset=utf-8', body: { object: 'list' } });
    const created = await raw('POST', '/v2/products', { key: server.keys.a.test.secret, body: JSON.stringify({ name: 'Mug' }) });
    expect(created).toMatchObject({ status: 200, contentType: 'application/json; charset=utf-8', body: { object: 'product', name: 'Mug' } });
    // Another account's object is the same 404 as none.
    expect(await problem(v2.getProduct({ client: v2Client(server, server.keys.b.test.secret), path: { product_id: created.body.id as string } }))).toMatchObject({ status: 404 });
  });

  it('unknown URLs are 404, a wrong method 405, a form or malformed JSON body 422 — all problem documents', async () => {
    const key = server.keys.a.test.secret;
    expect(await raw('GET', '/v2/nothing', { key })).toMatchObject({ status: 404, contentType: 'application/problem+json; charset=utf-8', body: { title: 'Not Found' } });
    expect(await raw('DELETE', '/v2/payment_flows', { key })).toMatchObject({ status: 405, body: { status: 405 } });
    expect(await raw('POST', '/v2/products', { key, body: 'name=Mug', contentType: 'application/x-www-form-urlencoded' })).toMatchObject({ status: 422, body: { title: 'Validation Error' } });
    expect(await raw('POST', '/v2/products', { key, body: '{"name":' })).toMatchObject({ status: 422, body: { title: 'Validation Error', detail: expect.stringContaining('JSON') } });
    expect(await raw('POST', '/v2/products', { key, body: '["Mug"]' })).toMatchObject({ status: 422 });
    // Bodies are bounded (64 KiB by default), as on v1: 413, a problem document.
    expect(await raw('POST', '/v2/products', { key, body: JSON.stringify({ name: 'x'.repeat(70_000) }) })).toMatchObject({ status: 413, contentType: 'application/problem+json; charset=utf-8', body: { status: 413, title: 'Payload Too Large', code: 'payload_too_large', detail: expect.stringContaining('too large') } });
  });

  it('422 Validation Error names each field as the SDK sends it; 404 Not Found names the path parameter', async () => {
    expect(await problem(v2.createPaymentFlow({ client, body: { amount: 10, currency: 'jpy' } }))).toMatchObject({ status: 422, title: 'Validation Error', code: 'validation_error', errors: [{ field: 'amount' }] });
    expect(await problem(v2.createPaymentFlow({ client, body: { currency: 'jpy' } as never }))).toMatchObject({ status: 422, errors: [{ field: 'amount' }] });
    expect(await problem(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'usd' as never } }))).toMatchObject({ status: 422, errors: [{ field: 'currency' }] });
    expect(await problem(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy', customer_id: 'cus_nobody' } }))).toMatchObject({ status: 404, errors: [{ field: 'customer_id' }] });
    expect(await problem(v2.createCheckoutSession({ client, body: { mode: 'payment', line_items: [{ price_id: 'price_nothing', quantity: 1 }], success_url: 'https://shop.example/ok' } }))).toMatchObject({ status: 404, errors: [{ field: 'line_items.0.price_id' }] });
    expect(await problem(v2.getPaymentRefund({ client, path: { payment_refund_id: 'pyr_none' } }))).toMatchObject({ status: 404, title: 'Not Found', errors: [{ field: 'payment_refund_id' }] });
  });

  it('payment flows: Invalid Status (capture before confirmation, cancel twice, amount after confirmation, confirm twice), Missing Payment Method, 402 Payment Failed with last_payment_error', async () => {
    const open = await ok(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy', capture_method: 'manual' } }));
    expect(await problem(v2.capturePaymentFlow({ client, path: { payment_flow_id: open.id } }))).toMatchObject({ status: 400, title: 'Invalid Status', code: 'invalid_status' });
    expect(await problem(v2.confirmPaymentFlow({ client, path: { payment_flow_id: open.id } }))).toMatchObject({ status: 400, title: 'Missing Payment Method', errors: [{ field: 'payment_method_id' }] });
    expect(await problem(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy', confirm: true } }))).toMatchObject({ status: 400, title: 'Missing Payment Method' });
    await ok(v2.cancelPaymentFlow({ client, path: { payment_flow_id: open.id } }));
    expect(await problem(v2.cancelPaymentFlow({ client, path: { payment_flow_id: open.id }, body: { cancellation_reason: 'duplicate' } }))).toMatchObject({ status: 400, title: 'Invalid Status' });
    const done = await capturedFlow(1000);
    expect(await problem(v2.updatePaymentFlow({ client, path: { payment_flow_id: done.id }, body: { amount: 2000 } }))).toMatchObject({ status: 400, title: 'Invalid Status', errors: [{ field: 'amount' }] });
    expect(await problem(v2.confirmPaymentFlow({ client, path: { payment_flow_id: done.id }, body: { payment_method_id: (await cardMethod()).id } }))).toMatchObject({ status: 400, title: 'Invalid Status' });
    const declined = await cardMethod(TEST_CARDS.declinesOnCharge.number);
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy' } }));
    expect(await problem(v2.confirmPaymentFlow({ client, path: { payment_flow_id: flow.id }, body: { payment_method_id: declined.id } }))).toMatchObject({ status: 402, title: 'Payment Failed', code: 'card_declined' });
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flow.id } }))).toMatchObject({ status: 'requires_payment_method', last_payment_error: { code: 'card_declined', message: expect.any(String) } });
    expect(await problem(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy', payment_method_id: declined.id, confirm: true } }))).toMatchObject({ status: 402, title: 'Payment Failed' });
    const events = await ok(v2.getAllEvents({ client, query: { resource_id: flow.id } }));
    expect(events.data.map((e) => e.type)).toEqual(['payment_flow.payment_failed', 'payment_flow.processing', 'payment_flow.created']);
  });

  it('payment flows: Extended Authorization Not Available, Payment Method Type Not Allowed, Detached Payment Method Not Usable, Payment Method Not Owned By Customer, Customer Required For Payment Method', async () => {
    const overseas = await cardMethod(TEST_CARDS.overseas.number);
    // Every payment flow of the account, to show at the end that the refusals created none.
    const allFlows = async () => {
      const page = await ok(v2.getAllPaymentFlows({ client, query: { limit: 100 } }));
      expect(page.has_more).toBe(false);
      return page.data.map((flow) => flow.id).sort();
    };
    const before = await allFlows();
    const mustExtend = { card: { request_extended_authorization: 'must_extend' } } as never;
    expect(await problem(v2.createPaymentFlow({ client, body: { amount: 3000, currency: 'jpy', capture_method: 'manual', payment_method_id: overseas.id, payment_method_options: mustExtend, confirm: true } }))).toMatchObject({
      status: 400,
      title: 'Extended Authorization Not Available',
      errors: [{ field: 'payment_method_options.card.request_extended_authorization' }],
    });
    const never = await ok(v2.createPaymentFlow({ client, body: { amount: 3000, currency: 'jpy', capture_method: 'manual', payment_method_id: overseas.id, payment_method_options: { card: { request_extended_authorization: 'never' } }, confirm: true } }));
    expect(never).toMatchObject({ status: 'requires_capture', extended_authorization: false });
    expect(await problem(v2.createPaymentFlow({ client, body: { amount: 3000, currency: 'jpy', payment_method_options: { card: { request_three_d_secure: 'any' } } } }))).toMatchObject({
      status: 422,
      errors: [{ field: 'payment_method_options.card.request_three_d_secure' }],
    });
    const paypayOnly = await ok(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy', payment_method_types: ['paypay'] } }));
    expect(await problem(v2.confirmPaymentFlow({ client, path: { payment_flow_id: paypayOnly.id }, body: { payment_method_id: (await cardMethod()).id } }))).toMatchObject({ status: 400, title: 'Payment Method Type Not Allowed' });
    await ok(v2.createCustomer({ client, body: { id: 'cus_conv_owner' } }));
    await ok(v2.createCustomer({ client, body: { id: 'cus_conv_other' } }));
    const owned = await cardMethod(TEST_CARDS.visa.number, { customer_id: 'cus_conv_owner' });
    expect(await problem(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy', customer_id: 'cus_conv_other', payment_method_id: owned.id } }))).toMatchObject({ status: 400, title: 'Payment Method Not Owned By Customer', errors: [{ field: 'payment_method_id' }] });
    await ok(v2.detachPaymentMethod({ client, path: { payment_method_id: owned.id } }));
    expect(await problem(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy', payment_method_id: owned.id } }))).toMatchObject({ status: 400, title: 'Detached Payment Method Not Usable' });
    // A v1 card id names a customer's card: without the flow's customer it cannot pay.
    const payjp = server.sdk(server.keys.a.test.secret);
    const tok = await payjp.tokens.create({ card: { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: 2035, cvc: '123' } } as never, { 'X-Payjp-Direct-Token-Generate': 'true' });
    const v1Customer = await payjp.customers.create({ card: tok.id } as never);
    expect(await problem(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy', payment_method_id: v1Customer.default_card as string } }))).toMatchObject({ status: 400, title: 'Customer Required For Payment Method', errors: [{ field: 'customer_id' }] });
    // Nothing was created by the refusals: the account's flows are those before and the two made above.
    expect(await allFlows()).toEqual([...before, never.id, paypayOnly.id].sort());
  });

  it('capture: above the hold is 422 on amount_to_capture; after the hold lapsed 400 Payment Flow Expired', async () => {
    const pm = await cardMethod();
    const held = await ok(v2.createPaymentFlow({ client, body: { amount: 5000, currency: 'jpy', capture_method: 'manual', payment_method_id: pm.id, confirm: true } }));
    expect(await problem(v2.capturePaymentFlow({ client, path: { payment_flow_id: held.id }, body: { amount_to_capture: 5001 } }))).toMatchObject({ status: 422, errors: [{ field: 'amount_to_capture' }] });
    const before = server.ctx.clock.now();
    try {
      server.ctx.clock.set(new Date(Date.parse((held as unknown as { capture_before: string }).capture_before) + 1000));
      expect(await problem(v2.capturePaymentFlow({ client, path: { payment_flow_id: held.id } }))).toMatchObject({ status: 400, title: 'Payment Flow Expired' });
    } finally {
      server.ctx.clock.set(before);
    }
  });

  it('refunds: Invalid Status (nothing captured), Refund Exceeds Payment, Already Refunded', async () => {
    const open = await ok(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy' } }));
    expect(await problem(v2.createPaymentRefund({ client, body: { payment_flow_id: open.id } }))).toMatchObject({ status: 400, title: 'Invalid Status', errors: [{ field: 'payment_flow_id' }] });
    const flow = await capturedFlow(1000);
    expect(await problem(v2.createPaymentRefund({ client, body: { payment_flow_id: flow.id, amount: 1001 } }))).toMatchObject({ status: 400, title: 'Refund Exceeds Payment', errors: [{ field: 'amount' }] });
    await ok(v2.createPaymentRefund({ client, body: { payment_flow_id: flow.id } }));
    expect(await problem(v2.createPaymentRefund({ client, body: { payment_flow_id: flow.id } }))).toMatchObject({ status: 400, title: 'Already Refunded' });
  });

  it('customers, payment methods, products: Already Exists ID, the attach/detach titles, Product Has Prices, Invalid Default Price', async () => {
    await ok(v2.createCustomer({ client, body: { id: 'cus_conv_a' } }));
    await ok(v2.createCustomer({ client, body: { id: 'cus_conv_b' } }));
    expect(await problem(v2.createCustomer({ client, body: { id: 'cus_conv_a' } }))).toMatchObject({ status: 400, title: 'Already Exists ID' });
    const pm = await cardMethod();
    expect(await problem(v2.detachPaymentMethod({ client, path: { payment_method_id: pm.id } }))).toMatchObject({ status: 400, title: 'Payment Method Unattached' });
    await ok(v2.attachPaymentMethod({ client, path: { payment_method_id: pm.id }, body: { customer_id: 'cus_conv_a' } }));
    expect(await problem(v2.attachPaymentMethod({ client, path: { payment_method_id: pm.id }, body: { customer_id: 'cus_conv_a' } }))).toMatchObject({ status: 400, title: 'Payment Method Already Attached' });
    expect(await problem(v2.attachPaymentMethod({ client, path: { payment_method_id: pm.id }, body: { customer_id: 'cus_conv_b' } }))).toMatchObject({ status: 400, title: 'Payment Method Customer Mismatch' });
    expect(await problem(v2.createCustomer({ client, body: { id: 'cus_conv_c', payment_method_id: pm.id } }))).toMatchObject({ status: 400, title: 'Payment Method Customer Mismatch' });
    // The refused create changed nothing: the id is still free.
    expect(await problem(v2.getCustomer({ client, path: { customer_id: 'cus_conv_c' } }))).toMatchObject({ status: 404 });
    await ok(v2.detachPaymentMethod({ client, path: { payment_method_id: pm.id } }));
    expect(await problem(v2.detachPaymentMethod({ client, path: { payment_method_id: pm.id } }))).toMatchObject({ status: 400, title: 'Payment Method Already Detached' });
    const product = await ok(v2.createProduct({ client, body: { name: 'Cap', id: 'prod_conv_cap' } }));
    expect(await problem(v2.createProduct({ client, body: { name: 'Cap', id: 'prod_conv_cap' } }))).toMatchObject({ status: 400, title: 'Already Exists ID' });
    await ok(v2.createPrice({ client, body: { product_id: product.id, unit_amount: 900, currency: 'jpy' } }));
    expect(await problem(v2.deleteProduct({ client, path: { product_id: product.id } }))).toMatchObject({ status: 400, title: 'Product Has Prices' });
    const elsewhere = await ok(v2.createPrice({ client, body: { unit_amount: 100, currency: 'jpy' } as never }));
    expect(await problem(v2.updateProduct({ client, path: { product_id: product.id }, body: { default_price_id: elsewhere.id } as never }))).toMatchObject({ status: 400, title: 'Invalid Default Price' });
  });

  it('metadata rules 1–5 (v2 §2.6): set on create, read back, merge on update, "" deletes a key, {} deletes all; strings, integers and booleans', async () => {
    const created = await ok(v2.createCustomer({ client, body: { id: 'cus_meta', metadata: { plan: 'gold', seats: 3, vip: true } } }));
    expect(created.metadata).toEqual({ plan: 'gold', seats: 3, vip: true });
    expect((await ok(v2.getCustomer({ client, path: { customer_id: 'cus_meta' } }))).metadata).toEqual({ plan: 'gold', seats: 3, vip: true });
    expect((await ok(v2.updateCustomer({ client, path: { customer_id: 'cus_meta' }, body: { metadata: { seats: 5, region: 'kanto' } } }))).metadata).toEqual({ plan: 'gold', seats: 5, vip: true, region: 'kanto' });
    expect((await ok(v2.updateCustomer({ client, path: { customer_id: 'cus_meta' }, body: { metadata: { vip: '' } } }))).metadata).toEqual({ plan: 'gold', seats: 5, region: 'kanto' });
    expect((await ok(v2.updateCustomer({ client, path: { customer_id: 'cus_meta' }, body: { metadata: {} } }))).metadata).toEqual({});
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy', metadata: { order: 'o-1' } } }));
    expect((await ok(v2.updatePaymentFlow({ client, path: { payment_flow_id: flow.id }, body: { metadata: { note: 'gift' } } }))).metadata).toEqual({ order: 'o-1', note: 'gift' });
  });

  it('metadata limits: 20 keys (21 is 400 Metadata Limit Exceeded), keys of 40 characters, string values of 500, no nested values (422 naming the key); a refusal changes nothing', async () => {
    const twenty = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, i]));
    await ok(v2.createCustomer({ client, body: { id: 'cus_limits', metadata: twenty } }));
    expect(await problem(v2.updateCustomer({ client, path: { customer_id: 'cus_limits' }, body: { metadata: { k20: 'one more' } } }))).toMatchObject({ status: 400, title: 'Metadata Limit Exceeded', errors: [{ field: 'metadata' }] });
    expect(await problem(v2.createProduct({ client, body: { name: 'x', metadata: { ...twenty, k20: 1 } } as never }))).toMatchObject({ status: 400, title: 'Metadata Limit Exceeded' });
    expect((await ok(v2.updateCustomer({ client, path: { customer_id: 'cus_limits' }, body: { metadata: { k0: 'replaced' } } }))).metadata).toMatchObject({ k0: 'replaced' });
    const longKey = 'k'.repeat(41);
    expect(await problem(v2.updateCustomer({ client, path: { customer_id: 'cus_limits' }, body: { metadata: { [longKey]: 'v' } } }))).toMatchObject({ status: 422, errors: [{ field: `metadata.${longKey}` }] });
    expect(await problem(v2.updateCustomer({ client, path: { customer_id: 'cus_limits' }, body: { metadata: { k1: 'v'.repeat(501) } } }))).toMatchObject({ status: 422, errors: [{ field: 'metadata.k1' }] });
    expect(await problem(v2.updateCustomer({ client, path: { customer_id: 'cus_limits' }, body: { metadata: { k1: { nested: true } } as never } }))).toMatchObject({ status: 422, errors: [{ field: 'metadata.k1' }] });
    expect(await ok(v2.updateCustomer({ client, path: { customer_id: 'cus_limits' }, body: { metadata: { ['k'.repeat(40)]: 'v'.repeat(500), k1: '' } } }))).toMatchObject({ metadata: { ['k'.repeat(40)]: 'v'.repeat(500) } });
    expect(Object.keys((await ok(v2.getCustomer({ client, path: { customer_id: 'cus_limits' } }))).metadata ?? {})).toHaveLength(20);
  });

  it('cursor lists: limit 1–100 (default 10), starting_after and ending_before both ways, has_more; an unknown cursor is 400 Resource Missing on every list', async () => {
    const made: string[] = [];
    for (let i = 0; i < 12; i += 1) made.push((await ok(v2.createTaxRate({ client, body: { display_name: `Rate ${i}`, percentage: 8, inclusive: true } }))).id);
    const all = await ok(v2.getAllTaxRates({ client, query: { limit: 100 } }));
    const ids = all.data.map((r) => r.id);
    expect(ids).toEqual(expect.arrayContaining(made));
    const first = await ok(v2.getAllTaxRates({ client }));
    expect(first.data).toHaveLength(10);
    expect(first.has_more).toBe(true);
    const page1 = await ok(v2.getAllTaxRates({ client, query: { limit: 5 } }));
    expect(page1.data.map((r) => r.id)).toEqual(ids.slice(0, 5));
    const page2 = await ok(v2.getAllTaxRates({ client, query: { limit: 5, starting_after: ids[4]! } }));
    expect(page2.data.map((r) => r.id)).toEqual(ids.slice(5, 10));
    const back = await ok(v2.getAllTaxRates({ client, query: { limit: 5, ending_before: ids[5]! } }));
    expect(back.data.map((r) => r.id)).toEqual(ids.slice(0, 5));
    expect(back.has_more).toBe(false);
    const last = await ok(v2.getAllTaxRates({ client, query: { limit: 100, starting_after: ids.at(-2)! } }));
    expect(last).toMatchObject({ has_more: false, data: [{ id: ids.at(-1) }] });
    expect(await problem(v2.getAllTaxRates({ client, query: { limit: 0 } }))).toMatchObject({ status: 422, errors: [{ field: 'limit' }] });
    expect(await problem(v2.getAllTaxRates({ client, query: { limit: 101 } }))).toMatchObject({ status: 422, errors: [{ field: 'limit' }] });
    const missing = { starting_after: 'xyz_unknown' };
    const lists = [
      v2.getAllTaxRates({ client, query: missing }),
      v2.getAllProducts({ client, query: missing }),
      v2.getAllPrices({ client, query: missing }),
      v2.getAllCustomers({ client, query: missing }),
      v2.getAllPaymentFlows({ client, query: missing }),
      v2.getAllPaymentRefunds({ client, query: missing }),
      v2.getAllPaymentDisputes({ client, query: missing }),
      v2.getAllPaymentMethods({ client, query: missing }),
      v2.getAllCheckoutSessions({ client, query: missing }),
      v2.getAllEvents({ client, query: { ending_before: 'evt_unknown' } }),
      v2.getAllStatements({ client, query: missing }),
      v2.getAllBalances({ client, query: missing }),
      v2.getAllTerms({ client, query: missing }),
    ];
    for (const refused of await Promise.all(lists.map((call) => problem(call)))) {
      expect(refused).toMatchObject({ status: 400, title: 'Resource Missing', errors: [{ field: expect.stringMatching(/^(starting_after|ending_before)$/) }] });
    }
  });

  it('customer_id and the seed’s customer are one field: either is read, both are answered, two different values are refused', async () => {
    await ok(v2.createCustomer({ client, body: { id: 'cus_alias' } }));
    const bySdk = await ok(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy', customer_id: 'cus_alias' } }));
    const bySeed = await ok(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy', customer: 'cus_alias' } as never }));
    expect(bySdk).toMatchObject({ customer_id: 'cus_alias', customer: 'cus_alias' });
    expect(bySeed).toMatchObject({ customer_id: 'cus_alias', customer: 'cus_alias' });
    expect(await ok(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy', customer_id: 'cus_alias', customer: 'cus_alias' } as never }))).toMatchObject({ customer_id: 'cus_alias' });
    expect(await problem(v2.createPaymentFlow({ client, body: { amount: 1000, currency: 'jpy', customer_id: 'cus_alias', customer: 'cus_other' } as never }))).toMatchObject({ status: 422, errors: [{ field: 'customer_id' }] });
    const listed = await ok(v2.getAllPaymentFlows({ client, query: { customer: 'cus_alias' } as never }));
    expect(listed.data.map((f) => f.id).sort()).toEqual((await ok(v2.getAllPaymentFlows({ client, query: { customer_id: 'cus_alias' } }))).data.map((f) => f.id).sort());
    expect(listed.data).toHaveLength(3);
    const price = await ok(v2.createPrice({ client, body: { unit_amount: 500, currency: 'jpy' } as never }));
    const session = await ok(v2.createCheckoutSession({ client, body: { mode: 'payment', customer: 'cus_alias', line_items: [{ price_id: price.id, quantity: 1 }], success_url: 'https://shop.example/ok' } as never }));
    expect(session).toMatchObject({ customer_id: 'cus_alias', customer: 'cus_alias' });
    // The SDK's fields whose one value kessai has: accepted as that value, refused otherwise.
    const hosted = await ok(v2.createCheckoutSession({ client, body: { mode: 'payment', currency: 'jpy', ui_mode: 'hosted', locale: 'ja', line_items: [{ price_id: price.id, quantity: 1 }], success_url: 'https://shop.example/ok' } }));
    expect(hosted).toMatchObject({ currency: 'jpy', status: 'open' });
    expect(await problem(v2.createCheckoutSession({ client, body: { mode: 'payment', locale: 'en' as never, line_items: [{ price_id: price.id, quantity: 1 }], success_url: 'https://shop.example/ok' } }))).toMatchObject({ status: 422, errors: [{ field: 'locale' }] });
    expect(session.created_at).toMatch(ISO);
  });

  it('Idempotency-Key: a retry gets the stored answer without a second payment; the key with another body is 400 as a problem document', async () => {
    const pm = await cardMethod();
    const body = { amount: 1234, currency: 'jpy' as const, payment_method_id: pm.id, confirm: true };
    const headers = { 'Idempotency-Key': 'v2-idem-1' };
    const first = await v2.createPaymentFlow({ client, body, headers });
    const second = await v2.createPaymentFlow({ client, body, headers });
    expect(second.data).toEqual(first.data);
    expect(second.response.headers.get('idempotent-replayed')).toBe('true');
    expect(second.response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const flows = await ok(v2.getAllPaymentFlows({ client, query: { limit: 100 } }));
    expect(flows.data.filter((f) => f.amount === 1234)).toHaveLength(1);
    expect(await problem(v2.createPaymentFlow({ client, body: { ...body, amount: 1235 }, headers }))).toMatchObject({ status: 400, title: 'Already Exists ID', contentType: 'application/problem+json; charset=utf-8', errors: [{ field: 'Idempotency-Key' }] });
  });
});

describe('v2 rate limits', () => {
  it('over the limit: 429 as a problem document with Retry-After', async () => {
    const server = await startTestServer('pglite', { rateLimits: { limits: { test: { sk: 1, pk: 1, payment: 1 } } } });
    try {
      const client = v2Client(server, server.keys.a.test.secret);
      const answers = await Promise.all([0, 1, 2].map(() => v2.getAllProducts({ client })));
      const refused = answers.find((a) => a.response.status === 429);
      expect(refused).toBeDefined();
      expect(refused!.response.headers.get('content-type')).toBe('application/problem+json; charset=utf-8');
      expect(refused!.response.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(refused!.error).toMatchObject({ status: 429, title: 'Too Many Requests' });
    } finally {
      await server.close();
    }
  });
});
