/**
 * Every v1 route through the official `payjp` SDK (npm v3, pointed at the real server with
 * `apibase`), on the harness database (PostgreSQL when the run has one) and on embedded PGlite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Payjp from 'payjp';
import { runOperation } from '../../src/api/operations';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { sdkError, startTestServer, type Backend, type TestServer } from '../support/http-server';

type Json = Record<string, unknown> & { id: string };
const CARD = { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2035', cvc: '123' };

describe.each<Backend>(['harness', 'pglite'])('v1 routes on %s', (backend) => {
  let server: TestServer;
  let payjp: Payjp.Payjp;
  let publicSdk: (query: object) => Promise<Json>;

  async function token(number: string = CARD.number): Promise<string> {
    return (await publicSdk({ card: { ...CARD, number } })).id;
  }

  beforeAll(async () => {
    server = await startTestServer(backend);
    payjp = server.sdk(server.keys.a.test.secret);
    // The SDK refuses a pk_ key at construction (official-sdks.md §4): the public key's call is a
    // plain form POST, as checkout pages make it.
    const pk = server.keys.a.test.public;
    publicSdk = async (query) => {
      const body = new URLSearchParams();
      const add = (prefix: string, value: unknown): void => {
        if (typeof value === 'object' && value !== null) for (const [k, v] of Object.entries(value)) add(prefix ? `${prefix}[${k}]` : k, v);
        else body.append(prefix, String(value));
      };
      add('', query);
      const response = await fetch(`${server.baseUrl}/v1/tokens`, { method: 'POST', headers: { authorization: `Basic ${Buffer.from(`${pk}:`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' }, body });
      const json = (await response.json()) as Json;
      if (response.status !== 200) throw Object.assign(new Error(`HTTP ${response.status}`), { status: response.status, response: { body: json } });
      return json;
    };
  });
  afterAll(async () => server?.close());

  it('tokens: the public key creates; the secret key creates with X-Payjp-Direct-Token-Generate and is refused without it', async () => {
    const tok = await publicSdk({ card: CARD });
    expect(tok).toMatchObject({ object: 'token', used: false, card: { last4: '4242', brand: 'Visa' } });
    const direct = (await payjp.tokens.create({ card: CARD }, { 'X-Payjp-Direct-Token-Generate': 'true' })) as unknown as Json;
    expect(direct.object).toBe('token');
    expect(await sdkError(payjp.tokens.create({ card: CARD }))).toMatchObject({ status: 401, type: 'auth_error', code: 'invalid_api_key' });
  });

  it('customers: create (with metadata, nested form), retrieve, update, list, delete', async () => {
    const customer = await payjp.customers.create({ id: 'cus_http_1', email: 'a@example.com', card: await token(), metadata: { plan: 'gold', n: 3 } } as never);
    expect(customer).toMatchObject({ id: 'cus_http_1', object: 'customer', email: 'a@example.com', metadata: { plan: 'gold', n: '3' } });
    expect(await payjp.customers.retrieve('cus_http_1')).toEqual(customer);
    expect(await payjp.customers.update('cus_http_1', { description: 'updated' })).toMatchObject({ description: 'updated' });
    const list = await payjp.customers.list({ limit: 1 });
    expect(list).toMatchObject({ object: 'list', count: 1, has_more: false, url: '/v1/customers' });
    await payjp.customers.create({ id: 'cus_http_gone' });
    expect(await payjp.customers.delete('cus_http_gone')).toEqual({ id: 'cus_http_gone', deleted: true, livemode: false });
    expect(await sdkError(payjp.customers.retrieve('cus_http_gone'))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
  });

  it('customer cards: create, retrieve, update, list, delete', async () => {
    await payjp.customers.create({ id: 'cus_http_cards' });
    const card = await payjp.customers.cards.create('cus_http_cards', { card: await token(TEST_CARDS.mastercard.number) } as never);
    expect(card).toMatchObject({ object: 'card', last4: '4444' });
    expect(await payjp.customers.cards.retrieve('cus_http_cards', card.id)).toEqual(card);
    expect(await payjp.customers.cards.update('cus_http_cards', card.id, { name: 'TARO YAMADA', metadata: { k: 'v' } } as never)).toMatchObject({ name: 'TARO YAMADA', metadata: { k: 'v' } });
    expect(await payjp.customers.cards.list('cus_http_cards')).toMatchObject({ object: 'list', count: 1, url: '/v1/customers/cus_http_cards/cards' });
    expect(await payjp.customers.cards.delete('cus_http_cards', card.id)).toMatchObject({ id: card.id, deleted: true });
  });

  it('plans: create, retrieve, update, list, delete', async () => {
    const plan = await payjp.plans.create({ id: 'pln_http_gone', amount: 500, currency: 'jpy', interval: 'month', name: 'Gone' });
    expect(plan).toMatchObject({ object: 'plan', amount: 500, interval: 'month' });
    expect(await payjp.plans.retrieve(plan.id)).toEqual(plan);
    expect(await payjp.plans.update(plan.id, { name: 'Renamed' })).toMatchObject({ name: 'Renamed' });
    expect((await payjp.plans.list()).data.map((p) => p.id)).toContain(plan.id);
    expect(await payjp.plans.delete(plan.id)).toMatchObject({ id: plan.id, deleted: true });
  });

  it('subscriptions: create, retrieve, update, pause, resume, cancel, delete with prorate in the query, list with filters; customer subscriptions', async () => {
    await payjp.customers.create({ id: 'cus_http_sub', card: await token() } as never);
    const plan = await payjp.plans.create({ id: 'pln_http_monthly', amount: 1_000, currency: 'jpy', interval: 'month' });
    const subscription = await payjp.subscriptions.create({ customer: 'cus_http_sub', plan: plan.id, metadata: { a: '1' } });
    expect(subscription).toMatchObject({ object: 'subscription', status: 'active', customer: 'cus_http_sub', metadata: { a: '1' } });
    expect(await payjp.subscriptions.retrieve(subscription.id)).toEqual(subscription);
    expect(await payjp.subscriptions.update(subscription.id, { metadata: { a: '2' } })).toMatchObject({ metadata: { a: '2' } });
    expect(await payjp.subscriptions.pause(subscription.id)).toMatchObject({ status: 'paused' });
    expect(await payjp.subscriptions.resume(subscription.id)).toMatchObject({ status: 'active' });
    expect(await payjp.subscriptions.cancel(subscription.id)).toMatchObject({ status: 'canceled' });
    expect((await payjp.subscriptions.list({ customer: 'cus_http_sub', status: 'canceled' } as never)).data.map((s) => s.id)).toEqual([subscription.id]);
    expect((await payjp.subscriptions.list({ status: 'paused' } as never)).count).toBe(0);
    expect(await payjp.customers.subscriptions.retrieve('cus_http_sub', subscription.id)).toMatchObject({ id: subscription.id });
    expect(await payjp.customers.subscriptions.list('cus_http_sub', { plan: plan.id } as never)).toMatchObject({ count: 1, url: '/v1/customers/cus_http_sub/subscriptions' });
    // DELETE parameters travel in the query string: a bad one is refused naming it, a good one deletes.
    expect(await sdkError(payjp.subscriptions.delete(subscription.id, { prorate: 'maybe' } as never))).toMatchObject({ status: 400, code: 'invalid_boolean', param: 'prorate' });
    expect(await payjp.subscriptions.delete(subscription.id, { prorate: false } as never)).toMatchObject({ id: subscription.id, deleted: true });
    expect(await sdkError(payjp.subscriptions.retrieve(subscription.id))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
  });

  it('charges: create, retrieve, update, list, capture, refund, reauth, tds_finish', async () => {
    await payjp.customers.create({ id: 'cus_http_charge', card: await token() } as never);
    const held = await payjp.charges.create({ amount: 3_000, currency: 'jpy', customer: 'cus_http_charge', capture: false, expiry_days: 3 });
    expect(held).toMatchObject({ object: 'charge', captured: false, paid: true, amount: 3_000 });
    expect(await payjp.charges.retrieve(held.id)).toEqual(held);
    expect(await payjp.charges.update(held.id, { description: 'order 1', metadata: { order: '1' } })).toMatchObject({ description: 'order 1', metadata: { order: '1' } });
    expect(await payjp.charges.reauth(held.id, { expiry_days: 5 })).toMatchObject({ captured: false });
    expect(await payjp.charges.capture(held.id, { amount: 2_500 })).toMatchObject({ captured: true, amount_refunded: 500 });
    expect(await payjp.charges.refund(held.id, { amount: 1_000, refund_reason: 'partial' })).toMatchObject({ amount_refunded: 1_500, refund_reason: 'partial' });
    expect((await payjp.charges.list({ customer: 'cus_http_charge' } as never)).data.map((c) => c.id)).toEqual([held.id]);
    const tds = await payjp.charges.create({ amount: 1_000, currency: 'jpy', card: await token(), three_d_secure: true } as never);
    expect(tds).toMatchObject({ paid: false, three_d_secure_status: 'unverified' });
    // The buyer's authentication step is the simulator's (no v1 route: the buyer talks to the issuer).
    await runOperation(server.ctx, { accountId: 'acct_http_a', livemode: false, kind: 'secret' }, 'charges.tds_authenticate', { id: tds.id });
    expect(await payjp.charges.tds_finish(tds.id)).toMatchObject({ id: tds.id, paid: true });
  });

  it('tenants: create, retrieve, update, list, delete', async () => {
    const tenant = await payjp.tenants.create({ id: 'ten_http', name: 'Shop', platform_fee_rate: '10.15', payjp_fee_included: false, minimum_transfer_amount: 1000 } as never);
    expect(tenant).toMatchObject({ id: 'ten_http', object: 'tenant', platform_fee_rate: '10.15', payjp_fee_included: false });
    expect(await payjp.tenants.retrieve('ten_http')).toEqual(tenant);
    expect(await payjp.tenants.update('ten_http', { name: 'Renamed' } as never)).toMatchObject({ name: 'Renamed' });
    expect((await payjp.tenants.list()).data.map((t) => t.id)).toEqual(['ten_http']);
    expect(await payjp.tenants.delete('ten_http')).toMatchObject({ id: 'ten_http', deleted: true });
  });

  it('terms, balances and statements lists and retrieves answer lists of their objects', async () => {
    expect(await payjp.terms.list()).toMatchObject({ object: 'list', url: '/v1/terms' });
    expect(await payjp.balances.list()).toMatchObject({ object: 'list', url: '/v1/balances' });
    expect(await payjp.statements.list({ owner: 'merchant' } as never)).toMatchObject({ object: 'list', url: '/v1/statements' });
    expect(await sdkError(payjp.terms.retrieve('tm_nope'))).toMatchObject({ status: 404, code: 'invalid_id' });
    expect(await sdkError(payjp.balances.retrieve('ba_nope'))).toMatchObject({ status: 404, code: 'invalid_id' });
    expect(await sdkError(payjp.statements.retrieve('st_nope'))).toMatchObject({ status: 404, code: 'invalid_id' });
  });

  it('events: list with resource_id, object and type; retrieve', async () => {
    const plan = await payjp.plans.create({ amount: 700, currency: 'jpy', interval: 'year' });
    const events = await payjp.events.list({ resource_id: plan.id, object: 'plan', type: 'plan.created' } as never);
    expect(events).toMatchObject({ object: 'list', count: 1, url: '/v1/events' });
    const event = events.data[0]!;
    expect(event).toMatchObject({ object: 'event', type: 'plan.created', data: { id: plan.id } });
    expect(await payjp.events.retrieve(event.id)).toEqual(event);
    expect((await payjp.events.list({ type: 'no.such' } as never)).count).toBe(0);
  });

  it('accounts: the caller\'s own account', async () => {
    expect(await payjp.accounts.retrieve()).toMatchObject({ id: 'acct_http_a', object: 'account', livemode: false, merchant: { name: 'HTTP Shop A' } });
  });
});
