/**
 * The v1 token reads, transfers, 3-D Secure requests and tenant application URLs, driven by the official `payjp` SDK against the real server on
 * the harness database (PostgreSQL when the run has one) and on embedded PGlite: tokens.retrieve
 * and token-level 3-D Secure (tds_finish), balances.statementUrls (the statement URL mechanism, one
 * download address), transfers and tenant_transfers after the settlement overhaul,
 * three_d_secure_requests, and tenants.applicationUrls with the page kessai serves. Each
 * catalogue error these endpoints produce is asserted through the SDK's error object.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Payjp from 'payjp';
import { termCloseJob } from '../../jobs/term-close';
import type { Caller } from '../../src/accounts/accounts';
import { Scheduler } from '../../src/engine/scheduler';
import { runOperation } from '../../src/api/operations';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { STATEMENT_URL_TTL_MS } from '../../src/domain/limits';
import { testContext } from '../support/database';
import { rawRequest, sdkError, startTestServer, type Backend, type TestServer } from '../support/http-server';
import { rejection } from '../support/rejections';
import { captureCharge } from '../support/settlement-seed';

type Json = Record<string, unknown> & { id: string };
const jst = (local: string): Date => new Date(`${local}+09:00`);
const CARD = { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2035', cvc: '123' };
const A: Caller = { accountId: 'acct_http_a', livemode: false, kind: 'secret' };
const MINUTE = 60_000;

describe.each<Backend>(['harness', 'pglite'])('v1 token reads, transfers, 3-D Secure requests, tenant applications on %s', (backend) => {
  let server: TestServer;
  let payjp: Payjp.Payjp;
  let other: Payjp.Payjp;

  /** A token made with the public key as a checkout page makes it (the SDK refuses pk_ keys). */
  async function publicToken(query: Record<string, unknown>): Promise<Json> {
    const body = new URLSearchParams();
    const add = (prefix: string, value: unknown): void => {
      if (typeof value === 'object' && value !== null) for (const [k, v] of Object.entries(value)) add(prefix ? `${prefix}[${k}]` : k, v);
      else body.append(prefix, String(value));
    };
    add('', query);
    const response = await rawRequest(server, 'POST', '/v1/tokens', { key: server.keys.a.test.public, body: body.toString() });
    expect(response.status).toBe(200);
    return response.body as Json;
  }

  /** Moves the server's clock by `ms` for one step, then back. */
  async function later<T>(ms: number, step: () => Promise<T>): Promise<T> {
    const before = server.ctx.clock.now();
    server.ctx.clock.set(new Date(before.getTime() + ms));
    try {
      return await step();
    } finally {
      server.ctx.clock.set(before);
    }
  }

  beforeAll(async () => {
    server = await startTestServer(backend);
    payjp = server.sdk(server.keys.a.test.secret);
    other = server.sdk(server.keys.b.test.secret);
    // One closed term with a sales statement and its balance (as the statement download test seeds it).
    await captureCharge(server.ctx.db, server.ctx, { accountId: 'acct_http_a', chargeId: 'ch_p3_1', amount: 30_000, at: jst('2027-01-10T10:00:00') });
    const runCtx = testContext(server.ctx.store, { at: jst('2027-02-01T00:00:00'), seed: 79 });
    expect((await new Scheduler(runCtx, [termCloseJob], { owner: 'test' }).runSlot(termCloseJob.name, jst('2027-02-01T00:00:00'))).status).toBe('succeeded');
    server.ctx.clock.set(jst('2027-02-02T10:00:00'));
  });
  afterAll(async () => server?.close());

  describe('tokens', () => {
    it('retrieve: the token as created; unknown, another account\'s and the public key are refused', async () => {
      const created = await publicToken({ card: CARD });
      const token = await payjp.tokens.retrieve(created.id);
      expect(token).toEqual(created);
      expect(token).toMatchObject({ object: 'token', used: false, card: { last4: '4242', three_d_secure_status: null } });
      await payjp.customers.create({ card: created.id } as never);
      expect(await payjp.tokens.retrieve(created.id)).toMatchObject({ used: true });
      expect(await sdkError(payjp.tokens.retrieve('tok_nope'))).toMatchObject({ status: 404, type: 'client_error', code: 'invalid_id', param: 'id' });
      expect(await sdkError(other.tokens.retrieve(created.id))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
      const withPublicKey = await rawRequest(server, 'GET', `/v1/tokens/${created.id}`, { key: server.keys.a.test.public });
      expect(withPublicKey).toMatchObject({ status: 401, body: { error: { type: 'auth_error', code: 'invalid_api_key' } } });
    });

    it('3-D Secure: unverified until the buyer authenticates and tds_finish runs; the token cannot be used before', async () => {
      const created = await publicToken({ card: CARD, three_d_secure: true });
      expect(created).toMatchObject({ card: { three_d_secure_status: 'unverified' } });
      expect(await sdkError(payjp.tokens.tds_finish(created.id))).toMatchObject({ status: 400, code: 'three_d_secure_incompleted', param: 'id' });
      expect(await sdkError(payjp.customers.create({ card: created.id } as never))).toMatchObject({ status: 400, code: 'unverified_token', param: 'card' });
      // The refused use changed nothing: the token is still unused.
      expect(await payjp.tokens.retrieve(created.id)).toMatchObject({ used: false });
      expect(await runOperation(server.ctx, A, 'tokens.tds_authenticate', { id: created.id })).toMatchObject({ card: { three_d_secure_status: 'verified' } });
      expect((await rejection(runOperation(server.ctx, A, 'tokens.tds_authenticate', { id: created.id }))).code).toBe('invalid_three_d_secure_state');
      expect(await payjp.tokens.retrieve(created.id)).toMatchObject({ card: { three_d_secure_status: 'verified' } });
      expect(await payjp.tokens.tds_finish(created.id)).toMatchObject({ id: created.id, used: false, card: { three_d_secure_status: 'verified' } });
      expect(await sdkError(payjp.tokens.tds_finish(created.id))).toMatchObject({ status: 400, code: 'invalid_three_d_secure_state', param: 'id' });
      // The card made from the token carries the token's 3-D Secure status.
      const customer = await payjp.customers.create({ card: created.id } as never);
      expect(await payjp.customers.cards.retrieve(customer.id, customer.default_card as string)).toMatchObject({ id: (created.card as { id: string }).id, three_d_secure_status: 'verified' });
    });

    it('two tds_finish of one token at once: one finishes it, the other is invalid_three_d_secure_state', async () => {
      const created = await publicToken({ card: CARD, three_d_secure: true });
      await runOperation(server.ctx, A, 'tokens.tds_authenticate', { id: created.id });
      const outcomes = await Promise.allSettled([payjp.tokens.tds_finish(created.id), payjp.tokens.tds_finish(created.id)]);
      expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
      const refused = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected')!;
      expect(await sdkError(Promise.reject(refused.reason))).toMatchObject({ status: 400, code: 'invalid_three_d_secure_state' });
    });

    it('a charge with a token that finished 3-D Secure authorizes as authenticated: a card that requires it is approved', async () => {
      const required = { ...CARD, number: TEST_CARDS.threeDSecureRequired.number };
      const without = await publicToken({ card: required });
      const declined = await sdkError(payjp.charges.create({ amount: 1_000, currency: 'jpy', card: without.id }));
      expect(declined).toMatchObject({ status: 402, type: 'card_error', code: 'card_declined' });
      const authenticated = await publicToken({ card: required, three_d_secure: true });
      await runOperation(server.ctx, A, 'tokens.tds_authenticate', { id: authenticated.id });
      expect(await sdkError(payjp.charges.create({ amount: 1_000, currency: 'jpy', card: authenticated.id }))).toMatchObject({ status: 400, code: 'unverified_token', param: 'card' });
      await payjp.tokens.tds_finish(authenticated.id);
      expect(await payjp.charges.create({ amount: 1_000, currency: 'jpy', card: authenticated.id })).toMatchObject({ paid: true, captured: true, three_d_secure_status: 'verified' });
    });

    it('3-D Secure refusals: failed authentication (402), a token without 3-D Secure, the 30-minute window', async () => {
      const failed = await publicToken({ card: { ...CARD, number: TEST_CARDS.threeDSecureFailed.number }, three_d_secure: true });
      expect(await runOperation(server.ctx, A, 'tokens.tds_authenticate', { id: failed.id })).toMatchObject({ card: { three_d_secure_status: 'failed' } });
      expect(await sdkError(payjp.tokens.tds_finish(failed.id))).toMatchObject({ status: 402, type: 'card_error', code: 'three_d_secure_failed', param: 'id' });

      const attempted = await publicToken({ card: { ...CARD, number: TEST_CARDS.threeDSecureAttempted.number }, three_d_secure: true });
      await runOperation(server.ctx, A, 'tokens.tds_authenticate', { id: attempted.id });
      // v1 §3.1: tds_finish proceeds from `attempted` as from `verified`.
      expect(await payjp.tokens.tds_finish(attempted.id)).toMatchObject({ card: { three_d_secure_status: 'attempted' } });

      const plain = await publicToken({ card: CARD });
      expect(await sdkError(payjp.tokens.tds_finish(plain.id))).toMatchObject({ status: 400, code: 'not_in_three_d_secure_flow', param: 'id' });
      expect(await sdkError(payjp.tokens.tds_finish('tok_nope'))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });

      const late = await publicToken({ card: CARD, three_d_secure: true });
      await later(30 * MINUTE + 1_000, async () => {
        expect((await rejection(runOperation(server.ctx, A, 'tokens.tds_authenticate', { id: late.id }))).code).toBe('three_d_secure_expired');
        expect(await sdkError(payjp.tokens.tds_finish(late.id))).toMatchObject({ status: 400, code: 'three_d_secure_expired', param: 'id' });
      });
      const badFlag = await rawRequest(server, 'POST', '/v1/tokens', { key: server.keys.a.test.public, body: `card[number]=${CARD.number}&card[exp_month]=12&card[exp_year]=2035&card[cvc]=123&three_d_secure=maybe` });
      expect(badFlag).toMatchObject({ status: 400, body: { error: { code: 'invalid_boolean', param: 'three_d_secure' } } });
    });
  });

  describe('balances.statementUrls', () => {
    it('issues a URL served by kessai: the balance\'s statements as CSV, 1 hour, a newer URL invalidates the older', async () => {
      const balance = (await payjp.balances.list({ owner: 'merchant' } as never)).data[0]!;
      const statementIds = balance.statements.map((s) => s.id);
      expect(statementIds.length).toBeGreaterThan(0);
      const first = await payjp.balances.statementUrls(balance.id);
      expect(first.object).toBe('statement_url');
      expect(first.url.startsWith(`${server.baseUrl}/v1/statements/download?token=`)).toBe(true);
      expect(first.expires).toBe(Math.floor((server.ctx.clock.now().getTime() + STATEMENT_URL_TTL_MS) / 1000));
      const download = await fetch(first.url);
      expect(download.status).toBe(200);
      expect(download.headers.get('content-type')).toMatch(/^text\/csv/);
      const csv = await download.text();
      for (const id of statementIds) expect(csv).toContain(`statement_id,${id}`);
      expect(csv).toContain('gross_sales,');

      await later(STATEMENT_URL_TTL_MS - 1_000, async () => expect((await fetch(first.url)).status).toBe(200));
      await later(STATEMENT_URL_TTL_MS, async () => {
        const expired = await fetch(first.url);
        expect(expired.status).toBe(404);
        expect(await expired.json()).toMatchObject({ error: { status: 404, code: 'not_found' } });
      });
      const second = await payjp.balances.statementUrls(balance.id);
      expect((await fetch(first.url)).status).toBe(404);
      expect((await fetch(second.url)).status).toBe(200);
      // The platformer version is another URL; it leaves the merchant's valid.
      const platformer = await payjp.balances.statementUrls(balance.id, { platformer: true });
      expect((await fetch(platformer.url)).status).toBe(200);
      expect((await fetch(second.url)).status).toBe(200);
      // A statement's own URL for the same id space is another kind: issuing it leaves the balance's.
      await payjp.statements.statementUrls(statementIds[0]!);
      expect((await fetch(second.url)).status).toBe(200);
    });

    it('refusals: unknown balance, another account\'s balance, a bad platformer', async () => {
      const balance = (await payjp.balances.list()).data[0]!;
      expect(await sdkError(payjp.balances.statementUrls('ba_nope'))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
      expect(await sdkError(other.balances.statementUrls(balance.id))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
      expect(await sdkError(payjp.balances.statementUrls(balance.id, { platformer: 'maybe' } as never))).toMatchObject({ status: 400, code: 'invalid_boolean', param: 'platformer' });
      expect(await sdkError(payjp.balances.statementUrls(balance.id, { format: 'pdf' } as never))).toMatchObject({ status: 400, code: 'invalid_param_key', param: 'format' });
    });
  });

  describe('transfers and tenant_transfers (superseded by balances)', () => {
    it('lists are empty, ids unknown, parameters still checked', async () => {
      expect(await payjp.transfers.list({ status: 'paid', since_scheduled_date: 1_800_000_000 })).toEqual({ object: 'list', count: 0, data: [], has_more: false, url: '/v1/transfers' });
      expect(await payjp.tenant_transfers.list({ tenant: 'ten_x', limit: 5 })).toEqual({ object: 'list', count: 0, data: [], has_more: false, url: '/v1/tenant_transfers' });
      expect(await sdkError(payjp.transfers.retrieve('tr_nope'))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
      expect(await sdkError(payjp.transfers.charges('tr_nope', { customer: 'cus_x' }))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
      expect(await sdkError(payjp.tenant_transfers.retrieve('tenr_nope'))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
      expect(await sdkError(payjp.tenant_transfers.charges('tenr_nope'))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
      expect(await sdkError(payjp.tenant_transfers.statementUrls('tenr_nope', { platformer: true }))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
      expect(await sdkError(payjp.transfers.list({ status: 'lost' } as never))).toMatchObject({ status: 400, code: 'invalid_querystring', param: 'status' });
      expect(await sdkError(payjp.transfers.list({ until_scheduled_date: 'tomorrow' } as never))).toMatchObject({ status: 400, code: 'invalid_timestamp', param: 'until_scheduled_date' });
      expect(await sdkError(payjp.transfers.list({ tenant: 'ten_x' } as never))).toMatchObject({ status: 400, code: 'invalid_param_key', param: 'tenant' });
      expect(await sdkError(payjp.tenant_transfers.list({ limit: 101 }))).toMatchObject({ status: 400, code: 'invalid_querystring', param: 'limit' });
    });
  });

  describe('three_d_secure_requests', () => {
    let cardId: string;
    let customerId: string;
    beforeAll(async () => {
      const customer = await payjp.customers.create({ card: (await publicToken({ card: { ...CARD, number: TEST_CARDS.threeDSecureAttempted.number } })).id } as never);
      cardId = customer.default_card as string;
      customerId = customer.id;
    });

    it('create, retrieve, list; the buyer\'s steps move created → in_progress → finished with the network\'s status; events', async () => {
      const request = await payjp.three_d_secure_requests.create({ resource_id: cardId });
      const createdAt = Math.floor(server.ctx.clock.now().getTime() / 1000);
      expect(request).toEqual({
        id: request.id,
        object: 'three_d_secure_request',
        livemode: false,
        created: createdAt,
        resource_id: cardId,
        tenant_id: null,
        state: 'created',
        three_d_secure_status: 'unverified',
        started_at: null,
        result_received_at: null,
        finished_at: null,
        expired_at: null,
      });
      expect(request.id.startsWith('tdsr_')).toBe(true);
      expect(await payjp.three_d_secure_requests.retrieve(request.id)).toEqual(request);
      expect((await rejection(runOperation(server.ctx, A, 'three_d_secure_requests.authenticate', { id: request.id }))).code).toBe('invalid_three_d_secure_state');
      expect(await runOperation(server.ctx, A, 'three_d_secure_requests.start', { id: request.id })).toMatchObject({ state: 'in_progress', started_at: createdAt });
      expect(await payjp.customers.cards.retrieve(customerId, cardId)).toMatchObject({ three_d_secure_status: null });
      expect(await runOperation(server.ctx, A, 'three_d_secure_requests.authenticate', { id: request.id })).toMatchObject({ state: 'finished', three_d_secure_status: 'attempted', result_received_at: createdAt, finished_at: createdAt });
      expect((await rejection(runOperation(server.ctx, A, 'three_d_secure_requests.start', { id: request.id }))).code).toBe('invalid_three_d_secure_state');
      // The finished request's status is the card's now (v1 §2.3 `three_d_secure_status`), with its event.
      expect(await payjp.customers.cards.retrieve(customerId, cardId)).toMatchObject({ three_d_secure_status: 'attempted' });
      expect((await payjp.events.list({ resource_id: cardId, type: 'customer.card.updated' } as never)).data[0]).toMatchObject({ data: { id: cardId, three_d_secure_status: 'attempted' } });
      // A finished request never lapses.
      await later(60 * MINUTE, async () => expect(await payjp.three_d_secure_requests.retrieve(request.id)).toMatchObject({ state: 'finished', expired_at: null }));

      const list = await payjp.three_d_secure_requests.list({ resource_id: cardId });
      expect(list).toMatchObject({ object: 'list', count: 1, has_more: false, url: '/v1/three_d_secure_requests' });
      expect(list.data[0]).toMatchObject({ id: request.id, state: 'finished' });
      expect((await payjp.three_d_secure_requests.list({ resource_id: 'car_other' })).count).toBe(0);
      const events = await payjp.events.list({ resource_id: request.id } as never);
      expect(events.data.map((e) => e.type).sort()).toEqual(['three_d_secure_request.created', 'three_d_secure_request.updated', 'three_d_secure_request.updated']);
    });

    it('a request not finished within 30 minutes lapses: expired_at shown, steps refused', async () => {
      const request = await payjp.three_d_secure_requests.create({ resource_id: cardId });
      await later(30 * MINUTE + 1_000, async () => {
        expect(await payjp.three_d_secure_requests.retrieve(request.id)).toMatchObject({ state: 'created', expired_at: request.created + 30 * 60 });
        expect((await rejection(runOperation(server.ctx, A, 'three_d_secure_requests.start', { id: request.id }))).code).toBe('three_d_secure_expired');
      });
    });

    it('refusals: not a customer\'s card, missing resource_id, unknown tenant, unknown id, another account', async () => {
      const token = await publicToken({ card: CARD });
      expect(await sdkError(payjp.three_d_secure_requests.create({ resource_id: token.id }))).toMatchObject({ status: 400, code: 'not_customer_card', param: 'resource_id' });
      expect(await sdkError(other.three_d_secure_requests.create({ resource_id: cardId }))).toMatchObject({ status: 400, code: 'not_customer_card', param: 'resource_id' });
      expect(await sdkError(payjp.three_d_secure_requests.create({} as never))).toMatchObject({ status: 400, code: 'missing_param', param: 'resource_id' });
      expect(await sdkError(payjp.three_d_secure_requests.create({ resource_id: cardId, tenant_id: 'ten_nope' }))).toMatchObject({ status: 404, code: 'invalid_id', param: 'tenant_id' });
      expect(await sdkError(payjp.three_d_secure_requests.retrieve('tdsr_nope'))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
      expect(await sdkError(payjp.three_d_secure_requests.list({ limit: 0 }))).toMatchObject({ status: 400, code: 'invalid_querystring', param: 'limit' });
      const before = (await payjp.three_d_secure_requests.list({ resource_id: cardId, limit: 100 })).count;
      await sdkError(payjp.three_d_secure_requests.create({ resource_id: cardId, tenant_id: 'ten_nope' }));
      expect((await payjp.three_d_secure_requests.list({ resource_id: cardId, limit: 100 })).count).toBe(before);
    });
  });

  describe('tenants.applicationUrls', () => {
    it('issues the URL of the application page kessai serves; 1 hour; a newer URL invalidates the older', async () => {
      await payjp.tenants.create({ id: 'ten_p3', name: 'Shop <p3>', platform_fee_rate: '10.00' } as never);
      const first = await payjp.tenants.applicationUrls('ten_p3');
      expect(first.object).toBe('application_url');
      expect(first.url.startsWith(`${server.baseUrl}/v1/tenant_application?token=`)).toBe(true);
      expect(first.expires).toBe(Math.floor((server.ctx.clock.now().getTime() + STATEMENT_URL_TTL_MS) / 1000));
      const page = await fetch(first.url);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toMatch(/^text\/html/);
      const html = await page.text();
      expect(html).toContain('<dd id="tenant">ten_p3</dd>');
      expect(html).toContain('Shop &#60;p3&#62;');
      // The token is a page of its kind only: the statement download refuses it.
      expect((await fetch(first.url.replace('/v1/tenant_application', '/v1/statements/download'))).status).toBe(404);

      await later(STATEMENT_URL_TTL_MS, async () => expect((await fetch(first.url)).status).toBe(404));
      const second = await payjp.tenants.applicationUrls('ten_p3');
      expect((await fetch(first.url)).status).toBe(404);
      expect((await fetch(second.url)).status).toBe(200);
      expect((await fetch(`${server.baseUrl}/v1/tenant_application`)).status).toBe(404);
    });

    it('refusals: unknown tenant, another account\'s tenant, a parameter', async () => {
      expect(await sdkError(payjp.tenants.applicationUrls('ten_nope'))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
      expect(await sdkError(other.tenants.applicationUrls('ten_p3'))).toMatchObject({ status: 404, code: 'invalid_id', param: 'id' });
      const withParam = await rawRequest(server, 'POST', '/v1/tenants/ten_p3/application_urls', { key: server.keys.a.test.secret, body: 'lang=en' });
      expect(withParam).toMatchObject({ status: 400, body: { error: { code: 'invalid_param_key', param: 'lang' } } });
    });
  });
});
