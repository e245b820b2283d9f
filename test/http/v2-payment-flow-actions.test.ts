/**
 * The 3-D Secure action of a payment flow over v2 HTTP with the official `@payjp/payjpv2` SDK:
 * a confirmation with a 3-D Secure card stops at `requires_action` with `next_action`; the
 * browser's return (`POST /v2/payment_flows/{id}/complete_action`, public key + client secret,
 * not an SDK 1.0.5 function, so sent through the SDK client's `post`) authenticates and
 * authorizes, or fails the payment; events read back through the events API.
 */
import * as v2 from '@payjp/payjpv2';
import type { Client } from '@payjp/payjpv2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { startTestServer, type TestServer } from '../support/http-server';
import { ok, problem, v2CardMethod, v2Client, v2EventTypes } from '../support/v2-sdk';

type Json = Record<string, unknown> & { id: string };
type SdkCall = Promise<{ data?: Json; error?: unknown; response: Response }>;

describe.each(['harness', 'pglite'] as const)('v2 payment flow complete_action through @payjp/payjpv2 (%s)', (backend) => {
  let server: TestServer;
  let client: Client;
  let browser: Client;

  /** The browser's return from the challenge, with the public key (or any client) and the flow's client secret. */
  function completeAction(by: Client, id: string, body: Record<string, unknown> = {}, resource = 'payment_flows'): SdkCall {
    const param = resource === 'payment_flows' ? 'payment_flow_id' : 'setup_flow_id';
    return by.post({ url: `/v2/${resource}/{${param}}/complete_action`, path: { [param]: id }, body, headers: { 'Content-Type': 'application/json' } }) as SdkCall;
  }

  const cardMethod = (number: string) => v2CardMethod(client, number);
  const eventTypes = (resourceId: string) => v2EventTypes(client, resourceId);

  beforeAll(async () => {
    server = await startTestServer(backend);
    client = v2Client(server, server.keys.a.test.secret);
    browser = v2Client(server, server.keys.a.test.public);
  });
  afterAll(async () => server?.close());

  it('a 3-D Secure card: confirm stops at requires_action; the browser completes the action and the hold is taken, then captured', async () => {
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 4_000, currency: 'jpy', capture_method: 'manual', metadata: { order: 'A-1' } } }));
    const pm = await cardMethod(TEST_CARDS.threeDSecureRequired.number);
    const pending = await ok(v2.confirmPaymentFlow({ client, path: { payment_flow_id: flow.id }, body: { payment_method_id: pm.id } }));
    expect(pending).toMatchObject({ status: 'requires_action', next_action: { type: 'three_d_secure' }, amount_capturable: 0, payment_method_id: pm.id });
    const done = await ok(completeAction(browser, flow.id, { client_secret: flow.client_secret }));
    expect(done).toMatchObject({ id: flow.id, status: 'requires_capture', next_action: null, amount_capturable: 4_000, three_d_secure_status: 'verified', metadata: { order: 'A-1' } });
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flow.id } }))).toMatchObject({ status: 'requires_capture', amount_capturable: 4_000 });
    expect(await ok(v2.capturePaymentFlow({ client, path: { payment_flow_id: flow.id }, body: {} }))).toMatchObject({ status: 'succeeded', amount_received: 4_000 });
    expect(await eventTypes(flow.id)).toEqual(['payment_flow.created', 'payment_flow.requires_action', 'payment_flow.processing', 'payment_flow.amount_capturable_updated', 'payment_flow.succeeded']);
    // Done once: nothing is left to complete.
    expect(await problem(completeAction(client, flow.id))).toMatchObject({ status: 400, title: 'Invalid Status' });
  });

  it('a failed authentication: 402 Payment Failed, the flow back to requires_payment_method; the buyer pays with another card', async () => {
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 2_500, currency: 'jpy' } }));
    await ok(v2.confirmPaymentFlow({ client: browser, path: { payment_flow_id: flow.id }, body: { payment_method_id: (await cardMethod(TEST_CARDS.threeDSecureFailed.number)).id, client_secret: flow.client_secret } as never }));
    expect(await problem(completeAction(browser, flow.id, { client_secret: flow.client_secret }))).toMatchObject({ status: 402, title: 'Payment Failed', code: 'three_d_secure_failed' });
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flow.id } }))).toMatchObject({
      status: 'requires_payment_method',
      payment_method_id: null,
      amount_received: 0,
      last_payment_error: { code: 'three_d_secure_failed' },
    });
    const paid = await ok(v2.confirmPaymentFlow({ client, path: { payment_flow_id: flow.id }, body: { payment_method_id: (await cardMethod(TEST_CARDS.visa.number)).id } }));
    expect(paid).toMatchObject({ status: 'succeeded', amount_received: 2_500, last_payment_error: null });
    expect(await eventTypes(flow.id)).toEqual(['payment_flow.created', 'payment_flow.requires_action', 'payment_flow.processing', 'payment_flow.payment_failed', 'payment_flow.processing', 'payment_flow.succeeded']);
  });

  it('reaches only its own flow in its own state: wrong or missing secret and another account are 404, a flow without an action 400', async () => {
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 1_200, currency: 'jpy' } }));
    await ok(v2.confirmPaymentFlow({ client, path: { payment_flow_id: flow.id }, body: { payment_method_id: (await cardMethod(TEST_CARDS.threeDSecureRequired.number)).id } }));
    expect(await problem(completeAction(browser, flow.id, { client_secret: `${flow.client_secret}x` }))).toMatchObject({ status: 404, title: 'Not Found' });
    expect(await problem(completeAction(browser, flow.id))).toMatchObject({ status: 404 });
    expect(await problem(completeAction(v2Client(server, server.keys.b.test.secret), flow.id))).toMatchObject({ status: 404 });
    expect(await problem(completeAction(client, flow.id, { unknown: 1 }))).toMatchObject({ status: 422, errors: [{ field: 'unknown' }] });
    // None of the refusals moved the flow.
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flow.id } }))).toMatchObject({ status: 'requires_action' });
    expect(await ok(completeAction(client, flow.id))).toMatchObject({ status: 'succeeded', amount_received: 1_200 });

    const plain = await ok(v2.createPaymentFlow({ client, body: { amount: 1_200, currency: 'jpy' } }));
    expect(await problem(completeAction(browser, plain.id, { client_secret: plain.client_secret }))).toMatchObject({ status: 400, title: 'Invalid Status' });
  });

  it('a setup flow’s action is completed the same way', async () => {
    const flow = (await ok(v2.createSetupFlow({ client, body: {} }))) as Json;
    const pm = await cardMethod(TEST_CARDS.threeDSecureRequired.number);
    const confirmed = await client.post({ url: '/v2/setup_flows/{setup_flow_id}/confirm', path: { setup_flow_id: flow.id }, body: { payment_method_id: pm.id }, headers: { 'Content-Type': 'application/json' } });
    expect(confirmed.data).toMatchObject({ status: 'requires_action' });
    expect(await ok(completeAction(browser, flow.id, { client_secret: flow.client_secret }, 'setup_flows'))).toMatchObject({ status: 'succeeded', next_action: null });
  });

  it('payment_flow.processing (v2 §6.1): written as a confirmation takes the flow into processing, its data the processing flow; a capture writes none', async () => {
    const pm = await cardMethod(TEST_CARDS.visa.number);
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 3_300, currency: 'jpy', capture_method: 'manual', payment_method_id: pm.id, confirm: true } }));
    expect(flow).toMatchObject({ status: 'requires_capture' });
    await ok(v2.capturePaymentFlow({ client, path: { payment_flow_id: flow.id }, body: {} }));
    expect(await eventTypes(flow.id)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.amount_capturable_updated', 'payment_flow.succeeded']);
    const processing = await ok(v2.getAllEvents({ client, query: { type: 'payment_flow.processing', resource_id: flow.id } }));
    expect(processing.data).toHaveLength(1);
    expect(processing.data[0]).toMatchObject({ type: 'payment_flow.processing', data: { id: flow.id, object: 'payment_flow', status: 'processing', amount: 3_300 } });
  });
});
