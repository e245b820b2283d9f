/**
 * v2 setup flows through the official `@payjp/payjpv2` SDK against the real server:
 * create, retrieve, update, list, cancel; confirm (not in the SDK: the browser's call, made here
 * over HTTP with the public key and the client secret, and by the server with the secret key);
 * 3-D Secure; a refused card; events through the events API; another account and a wrong secret.
 */
import * as v2 from '@payjp/payjpv2';
import type { Client } from '@payjp/payjpv2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticate } from '../../src/accounts/accounts';
import { runOperation } from '../../src/api/operations';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { NETWORK_CLAIM_LEASE_MS } from '../../src/domain/network-claims';
import { startTestServer, type TestServer } from '../support/http-server';
import { ok, problem, v2CardMethod, v2Client, v2EventTypes } from '../support/v2-sdk';

type Json = Record<string, unknown> & { id: string };

describe.each(['harness', 'pglite'] as const)('v2 setup flows through @payjp/payjpv2 (%s)', (backend) => {
  let server: TestServer;
  let client: Client;

  /** POST /v2/setup_flows/{id}/confirm as JSON with a Bearer key (the SDK has no confirm for setup flows). */
  async function confirm(id: string, key: string, body: Record<string, unknown>): Promise<{ status: number; body: Json }> {
    const response = await fetch(`${server.baseUrl}/v2/setup_flows/${id}/confirm`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as Json };
  }

  const cardMethod = (number: string) => v2CardMethod(client, number);
  const eventTypes = (resourceId: string) => v2EventTypes(client, resourceId);

  beforeAll(async () => {
    server = await startTestServer(backend);
    client = v2Client(server, server.keys.a.test.secret);
  });
  afterAll(async () => server?.close());

  it('create, retrieve, update, list; confirmed by the server with a pm_ method: succeeded and the method attached to the customer', async () => {
    await ok(v2.createCustomer({ client, body: { id: 'cus_setup_1' } }));
    const flow = (await ok(v2.createSetupFlow({ client, body: { customer_id: 'cus_setup_1', usage: 'off_session', metadata: { plan: 'gold' } } }))) as Json;
    expect(flow).toMatchObject({ object: 'setup_flow', status: 'requires_payment_method', customer_id: 'cus_setup_1', usage: 'off_session', payment_method_types: ['card'], payment_method_id: null, metadata: { plan: 'gold' }, livemode: false });
    expect(flow.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(await ok(v2.getSetupFlow({ client, path: { setup_flow_id: flow.id } }))).toEqual(flow);
    const updated = await ok(v2.updateSetupFlow({ client, path: { setup_flow_id: flow.id }, body: { description: 'save for renewals', metadata: { seats: 3 } } }));
    expect(updated).toMatchObject({ description: 'save for renewals', metadata: { plan: 'gold', seats: 3 } });
    expect((await ok(v2.getAllSetupFlows({ client, query: { limit: 100 } }))).data.map((f) => f.id)).toContain(flow.id);

    const pm = await cardMethod(TEST_CARDS.visa.number);
    const confirmed = await confirm(flow.id, server.keys.a.test.secret, { payment_method_id: pm.id });
    expect(confirmed.status).toBe(200);
    expect(confirmed.body).toMatchObject({ status: 'succeeded', payment_method_id: pm.id, last_setup_error: null });
    expect(await ok(v2.getPaymentMethod({ client, path: { payment_method_id: pm.id } }))).toMatchObject({ customer_id: 'cus_setup_1' });
    expect(await eventTypes(flow.id)).toEqual(['setup_flow.created', 'setup_flow.succeeded']);
    // Done once: a second confirmation is refused and changes nothing.
    expect((await confirm(flow.id, server.keys.a.test.secret, { payment_method_id: pm.id })).status).toBe(400);
    expect(await problem(v2.cancelSetupFlow({ client, path: { setup_flow_id: flow.id }, body: {} }))).toMatchObject({ status: 400, title: 'Invalid Status' });
    expect(await problem(v2.updateSetupFlow({ client, path: { setup_flow_id: flow.id }, body: { customer_id: 'cus_setup_1' } }))).toMatchObject({ status: 400, title: 'Invalid Status' });
  });

  it('the browser confirms with the public key, the client secret and a card token; a wrong secret or another account reaches nothing', async () => {
    const flow = (await ok(v2.createSetupFlow({ client, body: {} }))) as Json;
    const payjp = server.sdk(server.keys.a.test.secret);
    const token = await payjp.tokens.create({ card: { number: TEST_CARDS.mastercard.number, exp_month: 12, exp_year: 2035, cvc: '123' } } as never, { 'X-Payjp-Direct-Token-Generate': 'true' });
    const wrong = await confirm(flow.id, server.keys.a.test.public, { client_secret: `${flow.client_secret as string}x`, payment_method_id: token.id });
    expect(wrong.status).toBe(404);
    expect((await confirm(flow.id, server.keys.b.test.secret, { payment_method_id: token.id })).status).toBe(404);
    const done = await confirm(flow.id, server.keys.a.test.public, { client_secret: flow.client_secret, payment_method_id: token.id, return_url: 'https://shop.example/saved' });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ status: 'succeeded', return_url: 'https://shop.example/saved' });
    const saved = await ok(v2.getPaymentMethod({ client, path: { payment_method_id: done.body.payment_method_id as string } }));
    expect(saved).toMatchObject({ type: 'card', customer_id: null, card: { last4: '4444' } });
    // The token was spent by the confirmation.
    const again = (await ok(v2.createSetupFlow({ client, body: {} }))) as Json;
    expect((await confirm(again.id, server.keys.a.test.secret, { payment_method_id: token.id })).status).toBe(400);
    expect(await ok(v2.getSetupFlow({ client, path: { setup_flow_id: again.id } }))).toMatchObject({ status: 'requires_payment_method', payment_method_id: null });
  });

  it('a refused card: requires_payment_method with last_setup_error, setup_flow.setup_failed, 402; another card then succeeds', async () => {
    const flow = (await ok(v2.createSetupFlow({ client, body: {} }))) as Json;
    const refused = await confirm(flow.id, server.keys.a.test.secret, { payment_method_id: (await cardMethod(TEST_CARDS.declinesOnCharge.number)).id });
    expect(refused.status).toBe(402);
    expect(refused.body).toMatchObject({ status: 402, title: 'Payment Failed' });
    expect(await ok(v2.getSetupFlow({ client, path: { setup_flow_id: flow.id } }))).toMatchObject({ status: 'requires_payment_method', payment_method_id: null, last_setup_error: { type: 'card_error', code: 'card_declined' } });
    const good = await confirm(flow.id, server.keys.a.test.secret, { payment_method_id: (await cardMethod(TEST_CARDS.visa.number)).id });
    expect(good.body).toMatchObject({ status: 'succeeded', last_setup_error: null });
    expect(await eventTypes(flow.id)).toEqual(['setup_flow.created', 'setup_flow.setup_failed', 'setup_flow.succeeded']);
  });

  it('3-D Secure: requires_action with next_action, then the completed action verifies the card; a failed authentication fails the flow', async () => {
    const flow = (await ok(v2.createSetupFlow({ client, body: {} }))) as Json;
    const pending = await confirm(flow.id, server.keys.a.test.secret, { payment_method_id: (await cardMethod(TEST_CARDS.threeDSecureRequired.number)).id });
    expect(pending.body).toMatchObject({ status: 'requires_action', next_action: { type: 'three_d_secure' } });
    const browser = await authenticate(server.ctx, server.keys.a.test.public);
    const completed = await runOperation(server.ctx, browser, 'setup_flows.complete_action', { id: flow.id, client_secret: flow.client_secret });
    expect(completed).toMatchObject({ status: 'succeeded', next_action: null });
    expect(await eventTypes(flow.id)).toEqual(['setup_flow.created', 'setup_flow.requires_action', 'setup_flow.succeeded']);

    const failing = (await ok(v2.createSetupFlow({ client, body: {} }))) as Json;
    await confirm(failing.id, server.keys.a.test.secret, { payment_method_id: (await cardMethod(TEST_CARDS.threeDSecureFailed.number)).id });
    const secret = await authenticate(server.ctx, server.keys.a.test.secret);
    await expect(runOperation(server.ctx, secret, 'setup_flows.complete_action', { id: failing.id })).rejects.toMatchObject({ code: 'three_d_secure_failed' });
    expect(await ok(v2.getSetupFlow({ client, path: { setup_flow_id: failing.id } }))).toMatchObject({ status: 'requires_payment_method', last_setup_error: { code: 'three_d_secure_failed' } });
  });

  it('two confirmations at once: one succeeds, the other is refused, one setup_flow.succeeded', async () => {
    const flow = (await ok(v2.createSetupFlow({ client, body: {} }))) as Json;
    const pm = await cardMethod(TEST_CARDS.visa.number);
    const results = await Promise.all([confirm(flow.id, server.keys.a.test.secret, { payment_method_id: pm.id }), confirm(flow.id, server.keys.a.test.secret, { payment_method_id: pm.id })]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 400]);
    expect((await eventTypes(flow.id)).filter((t) => t === 'setup_flow.succeeded')).toHaveLength(1);
  });

  it('a confirmation that died after its claim (processing): refused while the claim is fresh, taken over once it lapsed, recorded once', async () => {
    const flow = (await ok(v2.createSetupFlow({ client, body: {} }))) as Json;
    const pm = await cardMethod(TEST_CARDS.visa.number);
    const now = server.ctx.clock.now();
    // What a worker killed between the claim's commit and the network call leaves behind: the flow processing, its claim in network_claims.
    const leaveClaim = async (at: Date) => {
      await server.ctx.db.updateTable('setup_flows').set({ status: 'processing', payment_method_id: pm.id, updated_at: at }).where('account_id', '=', 'acct_http_a').where('setup_flow_id', '=', flow.id).execute();
      const claim = { account_id: 'acct_http_a', livemode: false, resource: 'setup_flow', resource_id: flow.id, operation: 'setup_flows.confirm', claimed_at: at, lease_until: new Date(at.getTime() + NETWORK_CLAIM_LEASE_MS), recovery: JSON.stringify({ authorizations: [] }) };
      await server.ctx.db.insertInto('network_claims').values(claim).onConflict((oc) => oc.columns(['account_id', 'livemode', 'resource', 'resource_id']).doUpdateSet({ claimed_at: claim.claimed_at, lease_until: claim.lease_until })).execute();
    };
    await leaveClaim(now);
    expect((await confirm(flow.id, server.keys.a.test.secret, {})).status).toBe(400);
    expect(await problem(v2.cancelSetupFlow({ client, path: { setup_flow_id: flow.id }, body: {} }))).toMatchObject({ status: 400, title: 'Invalid Status' });
    await leaveClaim(new Date(now.getTime() - 61_000));
    const taken = await confirm(flow.id, server.keys.a.test.secret, {});
    expect(taken.status).toBe(200);
    expect(taken.body).toMatchObject({ status: 'succeeded', payment_method_id: pm.id });
    expect((await eventTypes(flow.id)).filter((t) => t === 'setup_flow.succeeded')).toHaveLength(1);
  });

  it('checkout in mode setup: the session makes a setup flow with setup_flow_data.metadata; a refused card leaves it open; another card completes it once; expiry abandons an unfinished flow', async () => {
    await ok(v2.createCustomer({ client, body: { id: 'cus_setup_checkout' } }));
    const session = (await ok(v2.createCheckoutSession({ client, body: { mode: 'setup', customer_id: 'cus_setup_checkout', success_url: 'https://shop.example/saved?s={CHECKOUT_SESSION_ID}', setup_flow_data: { metadata: { source: 'onboarding' } } } }))) as Json;
    expect(session).toMatchObject({ mode: 'setup', status: 'open', amount_total: 0, setup_flow_id: null, line_items: { data: [] } });
    const payjp = server.sdk(server.keys.a.test.secret);
    const token = async (number: string) => (await payjp.tokens.create({ card: { number, exp_month: 12, exp_year: 2035, cvc: '123' } } as never, { 'X-Payjp-Direct-Token-Generate': 'true' })).id;
    const secret = await authenticate(server.ctx, server.keys.a.test.secret);
    await expect(runOperation(server.ctx, secret, 'checkout.sessions.complete', { id: session.id, payment_method: await token(TEST_CARDS.declinesOnCharge.number) })).rejects.toMatchObject({ code: 'card_declined' });
    const open = await ok(v2.getCheckoutSession({ client, path: { checkout_session_id: session.id } }));
    expect(open).toMatchObject({ status: 'open' });
    const flowId = open.setup_flow_id as string;
    expect(await ok(v2.getSetupFlow({ client, path: { setup_flow_id: flowId } }))).toMatchObject({ status: 'requires_payment_method', customer_id: 'cus_setup_checkout', metadata: { source: 'onboarding' }, checkout_session_id: session.id });
    const completed = (await runOperation(server.ctx, secret, 'checkout.sessions.complete', { id: session.id, payment_method: await token(TEST_CARDS.threeDSecureRequired.number) })) as Json;
    expect(completed).toMatchObject({ status: 'complete', setup_flow: flowId, redirect_url: `https://shop.example/saved?s=${session.id}` });
    const saved = await ok(v2.getSetupFlow({ client, path: { setup_flow_id: flowId } }));
    expect(saved).toMatchObject({ status: 'succeeded' });
    expect(await ok(v2.getCustomerPaymentMethods({ client, path: { customer_id: 'cus_setup_checkout' } }))).toMatchObject({ data: [{ id: saved.payment_method_id }] });
    await expect(runOperation(server.ctx, secret, 'checkout.sessions.complete', { id: session.id, payment_method: await token(TEST_CARDS.visa.number) })).rejects.toMatchObject({ code: 'invalid_status' });
    expect((await eventTypes(session.id)).filter((t) => t === 'checkout.session.completed')).toHaveLength(1);

    const abandoned = (await ok(v2.createCheckoutSession({ client, body: { mode: 'setup', success_url: 'https://shop.example/saved' } }))) as Json;
    await expect(runOperation(server.ctx, secret, 'checkout.sessions.complete', { id: abandoned.id, payment_method: await token(TEST_CARDS.declinesOnCharge.number) })).rejects.toMatchObject({ code: 'card_declined' });
    const expire = () => client.post({ url: '/v2/checkout/sessions/{checkout_session_id}/expire', path: { checkout_session_id: abandoned.id } }) as Promise<{ data?: Json; error?: unknown; response: Response }>;
    const expired = await ok(expire());
    expect(expired).toMatchObject({ status: 'expired' });
    expect(await ok(v2.getSetupFlow({ client, path: { setup_flow_id: expired.setup_flow_id as string } }))).toMatchObject({ status: 'canceled', cancellation_reason: 'abandoned' });

    expect(await problem(v2.createCheckoutSession({ client, body: { mode: 'setup', success_url: 'https://shop.example/x', line_items: [{ price_id: 'price_x', quantity: 1 }] } }))).toMatchObject({ errors: [{ field: 'line_items' }] });
  });

  it('cancel with a reason; bad input named and nothing changed', async () => {
    const flow = (await ok(v2.createSetupFlow({ client, body: {} }))) as Json;
    expect(await problem(v2.cancelSetupFlow({ client, path: { setup_flow_id: flow.id }, body: { cancellation_reason: 'fraudulent' as never } }))).toMatchObject({ status: 422, errors: [{ field: 'cancellation_reason' }] });
    expect(await ok(v2.cancelSetupFlow({ client, path: { setup_flow_id: flow.id }, body: { cancellation_reason: 'abandoned' } }))).toMatchObject({ status: 'canceled', cancellation_reason: 'abandoned' });
    expect(await eventTypes(flow.id)).toEqual(['setup_flow.created', 'setup_flow.canceled']);
    expect(await problem(v2.createSetupFlow({ client, body: { usage: 'sometimes' as never } }))).toMatchObject({ status: 422, errors: [{ field: 'usage' }] });
    expect(await problem(v2.createSetupFlow({ client, body: { payment_method_types: ['paypay' as never] } }))).toMatchObject({ status: 422, errors: [{ field: 'payment_method_types.0' }] });
    expect(await problem(v2.createSetupFlow({ client, body: { customer_id: 'cus_nobody' } }))).toMatchObject({ status: 404, title: 'Not Found', errors: [{ field: 'customer_id' }] });
    expect(await problem(v2.getSetupFlow({ client, path: { setup_flow_id: 'sfw_unknown' } }))).toMatchObject({ status: 404, title: 'Not Found' });
    expect(await problem(v2.getAllSetupFlows({ client, query: { starting_after: 'sfw_unknown' } }))).toMatchObject({ status: 400, title: 'Resource Missing' });
  });
});
