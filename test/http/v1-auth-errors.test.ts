/**
 * Authentication, isolation (v1 §5) and the error policy (v1 §7) of the HTTP server, through the
 * `payjp` SDK's error object (status, and the v1 body as `response.body`) and raw requests where
 * the SDK cannot send what is tested (no key, the public key, a JSON or over-large body).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Payjp from 'payjp';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { rawRequest, sdkError, startTestServer, type TestServer } from '../support/http-server';

const CARD = `card[number]=${TEST_CARDS.visa.number}&card[exp_month]=12&card[exp_year]=2035&card[cvc]=123`;
const BODY_LIMIT = 4_096;

let server: TestServer;
let payjp: Payjp.Payjp;

async function tokenFor(number: string, key = server.keys.a.test.public): Promise<string> {
  const { status, body } = await rawRequest(server, 'POST', '/v1/tokens', { key, body: CARD.replace(TEST_CARDS.visa.number, number) });
  expect(status).toBe(200);
  return body.id as string;
}

async function rowCounts(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of ['customers', 'charges', 'plans', 'subscriptions', 'cards', 'events'] as const) {
    const row = await server.ctx.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    counts[table] = Number(row.n);
  }
  return counts;
}

beforeAll(async () => {
  server = await startTestServer('harness', {
    bodyLimit: BODY_LIMIT,
    extraRoutes: async (app) => {
      // A route that fails inside, as a broken database would: the answer must not show the fault.
      app.get('/v1/test_fault', async () => {
        throw new Error('connection to postgres://admin:hunter2@db failed');
      });
    },
  });
  payjp = server.sdk(server.keys.a.test.secret);
  await payjp.customers.create({ id: 'cus_a', card: await tokenFor(TEST_CARDS.visa.number) } as never);
  await payjp.customers.create({ id: 'cus_nocard' });
  await payjp.plans.create({ id: 'pln_a', amount: 1_000, currency: 'jpy', interval: 'month' });
});
afterAll(async () => server?.close());

describe('authentication and isolation (v1 §5)', () => {
  it('no key → 401 no_api_key; a wrong key → 401 invalid_api_key', async () => {
    expect(await rawRequest(server, 'GET', '/v1/charges')).toMatchObject({ status: 401, body: { error: { status: 401, type: 'auth_error', code: 'no_api_key' } } });
    expect(await sdkError(server.sdk('sk_test_wrong').charges.list())).toMatchObject({ status: 401, type: 'auth_error', code: 'invalid_api_key' });
    expect(await rawRequest(server, 'GET', '/v1/charges', { key: '' })).toMatchObject({ status: 401, body: { error: { code: 'no_api_key' } } });
  });

  it('the public key only creates tokens: on a secret route it is 401 invalid_api_key', async () => {
    expect(await rawRequest(server, 'GET', '/v1/customers', { key: server.keys.a.test.public })).toMatchObject({ status: 401, body: { error: { type: 'auth_error', code: 'invalid_api_key' } } });
  });

  it('a test key does not reach a live object, nor a live key a test object: the same 404 as an unknown id', async () => {
    const live = server.sdk(server.keys.a.live.secret);
    const livePlan = await live.plans.create({ id: 'pln_live', amount: 1_000, currency: 'jpy', interval: 'month' });
    expect(livePlan.livemode).toBe(true);
    expect(await sdkError(payjp.plans.retrieve('pln_live'))).toEqual(await sdkError(payjp.plans.retrieve('pln_live')));
    expect(await sdkError(payjp.plans.retrieve('pln_live'))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
    expect(await sdkError(live.customers.retrieve('cus_a'))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
  });

  it("another account's object is the same 404 as one that does not exist", async () => {
    const other = server.sdk(server.keys.b.test.secret);
    const foreign = await sdkError(other.plans.retrieve('pln_a'));
    expect(foreign).toMatchObject({ status: 404, type: 'client_error', code: 'invalid_id', param: 'id' });
    await other.plans.create({ id: 'pln_b', amount: 600, currency: 'jpy', interval: 'month' });
    expect(await sdkError(payjp.plans.retrieve('pln_b'))).toEqual(foreign);
    expect((await other.customers.list()).count).toBe(0);
  });

  it('a live key of an account without live permission is not_activated_account; a test card in live mode is test_card_on_livemode', async () => {
    expect(await sdkError(server.sdk(server.keys.b.live.secret).charges.list())).toMatchObject({ status: 400, code: 'not_activated_account' });
    const { status, body } = await rawRequest(server, 'POST', '/v1/tokens', { key: server.keys.a.live.public, body: CARD });
    expect(status).toBe(402);
    expect(body).toMatchObject({ error: { status: 402, type: 'card_error', code: 'test_card_on_livemode', param: 'card[number]' } });
  });
});

describe('errors (v1 §7): the v1 body with the catalogue status and type; a refusal changes nothing', () => {
  it('unknown URL 404 not_found; wrong method 405 not_allowed_method', async () => {
    const key = server.keys.a.test.secret;
    expect(await rawRequest(server, 'GET', '/v1/nothing_here', { key })).toMatchObject({ status: 404, body: { error: { status: 404, code: 'not_found' } } });
    expect(await rawRequest(server, 'DELETE', '/v1/charges', { key })).toMatchObject({ status: 405, body: { error: { status: 405, type: 'not_allowed_method_error', code: 'not_allowed_method' } } });
    expect(await rawRequest(server, 'PUT', '/v1/customers/cus_a', { key, body: 'email=a@b.c' })).toMatchObject({ status: 405, body: { error: { code: 'not_allowed_method' } } });
  });

  it('an unknown parameter is 400 invalid_param_key naming it, in the body, nested, or in a POST query', async () => {
    const before = await rowCounts();
    expect(await sdkError(payjp.customers.create({ emial: 'x@example.com' } as never))).toMatchObject({ status: 400, type: 'client_error', code: 'invalid_param_key', param: 'emial' });
    expect(await sdkError(payjp.customers.create({ card: { number: '4242' } } as never))).toMatchObject({ status: 400, param: 'card' });
    expect(await rawRequest(server, 'POST', '/v1/customers?email=a@b.c', { key: server.keys.a.test.secret, body: '' })).toMatchObject({ status: 400, body: { error: { code: 'invalid_param_key', param: 'email' } } });
    expect(await rawRequest(server, 'POST', '/v1/customers/cus_a', { key: server.keys.a.test.secret, body: 'id=cus_other' })).toMatchObject({ status: 400, body: { error: { code: 'invalid_param_key', param: 'id' } } });
    expect(await rowCounts()).toEqual(before);
  });

  it('a body that is not a form is 400 invalid_querystring; an over-large body is refused before it is read', async () => {
    const before = await rowCounts();
    const key = server.keys.a.test.secret;
    expect(await rawRequest(server, 'POST', '/v1/customers', { key, body: '{"email":"a@b.c"}', contentType: 'application/json' })).toMatchObject({ status: 400, body: { error: { code: 'invalid_querystring' } } });
    // Over the body limit: 413 with the v1 error body, not a 400 that says the parameters are wrong.
    expect(await rawRequest(server, 'POST', '/v1/customers', { key, body: `description=${'x'.repeat(BODY_LIMIT + 1)}` })).toEqual({ status: 413, body: { error: { status: 413, type: 'client_error', code: 'payload_too_large', message: 'the request body is too large' } } });
    expect(await rawRequest(server, 'POST', '/v1/customers', { key, body: 'a'.repeat(10) + '&'.repeat(2_000) })).toMatchObject({ status: 400, body: { error: { code: 'invalid_querystring' } } });
    expect(await rowCounts()).toEqual(before);
  });

  it('a fault is 500 payjp_wrong and shows nothing of the fault', async () => {
    const { status, body } = await rawRequest(server, 'GET', '/v1/test_fault', { key: server.keys.a.test.secret });
    expect(status).toBe(500);
    expect(body).toEqual({ error: { status: 500, type: 'server_error', code: 'payjp_wrong', message: 'An unexpected error occurred.' } });
  });

  it("a declined card is 402 card_error card_declined with the failed charge's id in `charge`", async () => {
    await payjp.customers.create({ id: 'cus_declines', card: await tokenFor(TEST_CARDS.declinesOnCharge.number) } as never);
    const refusal = await sdkError(payjp.charges.create({ amount: 1_000, currency: 'jpy', customer: 'cus_declines' }));
    expect(refusal).toMatchObject({ status: 402, type: 'card_error', code: 'card_declined' });
    expect(refusal.charge).toMatch(/^ch_/);
    expect(await payjp.charges.retrieve(refusal.charge!)).toMatchObject({ paid: false, failure_code: 'card_declined' });
  });

  // One refusal per catalogue code an endpoint gives for bad input, as the SDK sees it.
  const cases: [string, () => Promise<unknown>, { status: number; type: string; code: string; param?: string }][] = [
    ['charges.create without currency', () => payjp.charges.create({ amount: 1_000, customer: 'cus_a' } as never), { status: 400, type: 'client_error', code: 'missing_param', param: 'currency' }],
    ['charges.create amount 49', () => payjp.charges.create({ amount: 49, currency: 'jpy', customer: 'cus_a' }), { status: 400, type: 'client_error', code: 'invalid_amount', param: 'amount' }],
    ['charges.create currency usd', () => payjp.charges.create({ amount: 1_000, currency: 'usd', customer: 'cus_a' } as never), { status: 400, type: 'client_error', code: 'invalid_currency', param: 'currency' }],
    ['charges.create capture=maybe', () => payjp.charges.create({ amount: 1_000, currency: 'jpy', customer: 'cus_a', capture: 'maybe' } as never), { status: 400, type: 'client_error', code: 'invalid_boolean', param: 'capture' }],
    ['charges.create unknown customer', () => payjp.charges.create({ amount: 1_000, currency: 'jpy', customer: 'cus_nope' }), { status: 404, type: 'client_error', code: 'invalid_id', param: 'customer' }],
    ['charges.retrieve unknown', () => payjp.charges.retrieve('ch_nope'), { status: 404, type: 'client_error', code: 'invalid_id', param: 'id' }],
    ['charges.list limit 101', () => payjp.charges.list({ limit: 101 }), { status: 400, type: 'client_error', code: 'invalid_querystring', param: 'limit' }],
    ['charges.list since not a timestamp', () => payjp.charges.list({ since: 'yesterday' } as never), { status: 400, type: 'client_error', code: 'invalid_timestamp', param: 'since' }],
    ['plans.create interval week', () => payjp.plans.create({ amount: 1_000, currency: 'jpy', interval: 'week' } as never), { status: 400, type: 'client_error', code: 'invalid_interval', param: 'interval' }],
    ['plans.create duplicate id', () => payjp.plans.create({ id: 'pln_a', amount: 1_000, currency: 'jpy', interval: 'month' }), { status: 400, type: 'client_error', code: 'already_exist_id', param: 'id' }],
    ['subscriptions.create customer without card', () => payjp.subscriptions.create({ customer: 'cus_nocard', plan: 'pln_a' }), { status: 400, type: 'client_error', code: 'doesnt_have_card', param: 'customer' }],
    ['tokens.create bad number', async () => {
      const { body } = await rawRequest(server, 'POST', '/v1/tokens', { key: server.keys.a.test.public, body: CARD.replace(TEST_CARDS.visa.number, '4242424242424241') });
      throw Object.assign(new Error('refused'), { status: (body.error as { status: number }).status, response: { body } });
    }, { status: 400, type: 'card_error', code: 'invalid_number', param: 'card[number]' }],
    ['customers.update metadata key too long', () => payjp.customers.update('cus_a', { metadata: { ['k'.repeat(41)]: 'v' } }), { status: 400, type: 'client_error', code: 'invalid_metadata_key', param: `metadata[${'k'.repeat(41)}]` }],
  ];
  it.each(cases)('%s', async (_name, call, expected) => {
    const before = await rowCounts();
    const refusal = await sdkError(call());
    expect({ status: refusal.status, type: refusal.type, code: refusal.code, param: refusal.param }).toEqual({ param: undefined, ...expected });
    expect(await rowCounts()).toEqual(before);
  });
});
