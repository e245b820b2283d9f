/**
 * The operator API (/admin) through real HTTP on the real server, on PostgreSQL (the harness
 * database) and on the embedded database: its own credential (no token, a wrong one or a merchant
 * key → 401), every operation with its audit row (who = the operator token's name), the re-send of
 * a given-up webhook delivery (reaches a local receiver once, recorded as a re-send, a retried
 * request re-sends nothing more), and the re-run of an abandoned slot.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recentAudit } from '../../src/api/admin/operator';
import { remoteOperator } from '../../src/api/admin/operator-client';
import { KessaiError } from '../../src/domain/errors';
import { Scheduler } from '../../src/engine/scheduler';
import { deliverDueWebhooks, MAX_WEBHOOK_ATTEMPTS, WEBHOOK_RETRY_DELAY_MS } from '../../src/webhooks/delivery';
import { checkoutSessionExpiryJob } from '../../jobs/checkout-session-expiry';
import { startTestServer, type Backend, type TestServer } from '../support/http-server';
import { answer, startReceiver, type Receiver } from '../support/webhook-receiver';

const OPERATOR = { name: 'ops-alice', token: 'kop_test_operator_token_0123456789' };

describe.each<Backend>(['harness', 'pglite'])('operator API on %s', (backend) => {
  let server: TestServer;
  let receiver: Receiver;
  // One attempt abandons a slot here, so a failing slot is abandoned at its first run.
  beforeAll(async () => {
    server = await startTestServer(backend, { operatorTokens: [OPERATOR], config: { maxAttempts: 1 } });
    receiver = await startReceiver(answer(500, 'down'));
  });
  afterAll(async () => {
    await receiver?.close();
    await server?.close();
  });

  async function admin(method: string, path: string, options: { body?: unknown; token?: string | null; headers?: Record<string, string> } = {}) {
    const token = options.token === undefined ? OPERATOR.token : options.token;
    const response = await fetch(`${server.baseUrl}/admin${path}`, {
      method,
      headers: { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...(options.body === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers },
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
    });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers, asserted field by field
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  }
  const ok = async (method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}) => {
    const result = await admin(method, path, options);
    if (result.status !== 200) throw new Error(`${method} ${path}: ${result.status} ${JSON.stringify(result.body)}`);
    return result.body;
  };
  const lastAudit = async () => (await recentAudit(server.ctx.db, 1))[0]!;

  it('refuses a request without the operator token, with a wrong one, and with a merchant key (401)', async () => {
    expect((await admin('GET', '/accounts', { token: null })).status).toBe(401);
    expect((await admin('GET', '/accounts', { token: 'kop_not_the_operator_token_000000' })).status).toBe(401);
    const merchant = await admin('GET', '/accounts', { token: server.keys.a.test.secret });
    expect(merchant.status).toBe(401);
    expect(merchant.body.error.code).toBe('invalid_api_key');
    // Nor does the operator token open the merchant API.
    const v1 = await fetch(`${server.baseUrl}/v1/customers`, { headers: { authorization: `Bearer ${OPERATOR.token}` } });
    expect(v1.status).toBe(401);
    // Refused requests changed nothing.
    expect((await admin('POST', '/accounts', { token: null, body: { name: 'Nope' } })).status).toBe(401);
    expect((await ok('GET', '/accounts')).data.map((a: { id: string }) => a.id)).toEqual(['acct_http_a', 'acct_http_b']);
  });

  it('accounts and keys: create, list, make a key and revoke it (the merchant API refuses it), each audited', async () => {
    const created = await ok('POST', '/accounts', { body: { name: 'Ops Shop', id: 'acct_ops_shop', feeRates: { Visa: '2.5' } } });
    expect(created.account).toMatchObject({ id: 'acct_ops_shop', name: 'Ops Shop', feeRates: expect.objectContaining({ Visa: '2.50' }) });
    expect(created.keys.test.secret).toMatch(/^sk_test_/);
    expect(await lastAudit()).toMatchObject({ operator: 'ops-alice', action: 'account.create', account: 'acct_ops_shop' });
    expect((await ok('GET', '/accounts')).data.map((a: { id: string }) => a.id)).toContain('acct_ops_shop');

    const key = await ok('POST', '/accounts/acct_ops_shop/keys', { body: { kind: 'secret', livemode: false } });
    expect(key.secret).toMatch(/^sk_test_/);
    const customers = () => fetch(`${server.baseUrl}/v1/customers`, { headers: { authorization: `Bearer ${key.secret as string}` } });
    expect((await customers()).status).toBe(200);
    const keys = (await ok('GET', '/accounts/acct_ops_shop/keys')).data as { id: string; revokedAt: string | null }[];
    expect(keys).toHaveLength(5);
    const revoked = await ok('POST', `/accounts/acct_ops_shop/keys/${key.key.id as string}/revoke`);
    expect(revoked.revokedAt).not.toBeNull();
    expect(await lastAudit()).toMatchObject({ operator: 'ops-alice', action: 'api_key.revoke', account: 'acct_ops_shop', target: key.key.id });
    // The server's key memory answers for at most a second.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect((await customers()).status).toBe(401);
    // The secret was never recorded.
    const rows = await recentAudit(server.ctx.db, 10);
    expect(JSON.stringify(rows)).not.toContain(key.secret);
    expect(JSON.stringify(rows)).not.toContain(created.keys.test.secret);
  });

  it('bad input gets the catalogue code with the parameter named, and changes nothing', async () => {
    const before = (await recentAudit(server.ctx.db, 1))[0]?.audit_id;
    const cases: [string, string, unknown, string][] = [
      ['POST', '/accounts', { name: '' }, 'name'],
      ['POST', '/accounts', { name: 'X', colour: 'red' }, 'colour'],
      ['POST', '/accounts', { name: 'X', termCycle: 'weekly' }, 'termCycle'],
      ['POST', '/accounts/acct_http_a/keys', { kind: 'master' }, 'kind'],
      ['POST', '/accounts/acct_http_a/webhook_endpoints', { url: 'ftp://x' }, 'url'],
      ['POST', '/accounts/acct_nobody/webhook_endpoints', { url: 'https://example.com/hook' }, 'account'],
      ['POST', '/jobs/no.such.job/run', { slot: '2026-12-31T23:59:00Z' }, 'job'],
      ['POST', '/jobs/webhooks.deliver/run', { slot: 'yesterday' }, 'slot'],
      ['POST', '/jobs/webhooks.deliver/run', { slot: '2030-01-01T00:00:00Z' }, 'slot'],
      ['POST', '/jobs/webhooks.deliver/run', { slot: '2026-12-31T23:59:30Z' }, 'slot'],
    ];
    for (const [method, path, body, param] of cases) {
      const refused = await admin(method, path, { body });
      expect([refused.status, refused.body.error?.param], `${method} ${path} ${JSON.stringify(body)}`).toEqual([refused.status < 500 && refused.status >= 400 ? refused.status : -1, param]);
    }
    const notJson = await fetch(`${server.baseUrl}/admin/accounts`, { method: 'POST', headers: { authorization: `Bearer ${OPERATOR.token}`, 'content-type': 'application/json' }, body: '{"name":' });
    expect(notJson.status).toBe(400);
    expect((await recentAudit(server.ctx.db, 1))[0]?.audit_id).toBe(before);
  });

  it('webhook endpoints: add, list with counts, disable, enable, rotate the token, send a test event, remove — each audited', async () => {
    const added = await ok('POST', '/accounts/acct_http_b/webhook_endpoints', { body: { url: receiver.url + '/b', eventTypes: ['customer.created'] } });
    expect(added.token).toMatch(/^whook_/);
    const id = added.endpoint.id as string;
    expect(await lastAudit()).toMatchObject({ operator: 'ops-alice', action: 'webhook_endpoint.add', account: 'acct_http_b', target: id });
    const listed = (await ok('GET', '/accounts/acct_http_b/webhook_endpoints')).data;
    expect(listed).toEqual([expect.objectContaining({ id, status: 'enabled', counts: { delivered: 0, failing: 0, waiting: 0, givenUp: 0 } })]);
    expect((await ok('POST', `/accounts/acct_http_b/webhook_endpoints/${id}/disable`)).status).toBe('disabled');
    expect((await ok('POST', `/accounts/acct_http_b/webhook_endpoints/${id}/enable`)).status).toBe('enabled');
    const rotated = await ok('POST', `/accounts/acct_http_b/webhook_endpoints/${id}/rotate_token`);
    expect(rotated.token).not.toBe(added.token);
    receiver.respond = answer(200, 'ok');
    const before = receiver.received.length;
    const tested = await ok('POST', `/accounts/acct_http_b/webhook_endpoints/${id}/test`);
    expect(tested).toMatchObject({ ok: true, status: 200 });
    expect(receiver.received.length).toBe(before + 1);
    expect(receiver.received.at(-1)!.headers['x-service-webhook-token']).toBe(rotated.token);
    await ok('DELETE', `/accounts/acct_http_b/webhook_endpoints/${id}`);
    expect((await ok('GET', '/accounts/acct_http_b/webhook_endpoints')).data).toEqual([]);
    const actions = (await recentAudit(server.ctx.db, 6)).map((row) => row.action).reverse();
    expect(actions).toEqual(['webhook_endpoint.add', 'webhook_endpoint.disable', 'webhook_endpoint.enable', 'webhook_endpoint.rotate_token', 'webhook_endpoint.test', 'webhook_endpoint.remove']);
    expect(JSON.stringify(await recentAudit(server.ctx.db, 6))).not.toContain(rotated.token);
  });

  it('re-sends a given-up delivery: it reaches the receiver once, is recorded as a re-send, and a retried request re-sends nothing more', async () => {
    receiver.respond = answer(500, 'down');
    const added = await ok('POST', '/accounts/acct_http_a/webhook_endpoints', { body: { url: receiver.url + '/a', apiVersion: 'v1' } });
    const id = added.endpoint.id as string;
    const customer = await server.sdk(server.keys.a.test.secret).customers.create({ email: 'resend@example.com' });
    const pass = () => deliverDueWebhooks(server.ctx, { owner: 'test-pass' });
    // Every attempt fails: the delivery is given up after the last one.
    for (let attempt = 1; attempt <= MAX_WEBHOOK_ATTEMPTS; attempt += 1) {
      await pass();
      server.ctx.clock.advance(WEBHOOK_RETRY_DELAY_MS);
    }
    const givenUp = (await ok('GET', `/accounts/acct_http_a/webhook_endpoints/${id}/deliveries?status=failed`)).data as { eventId: string; attempts: number }[];
    expect(givenUp).toHaveLength(1);
    expect(givenUp[0]!.attempts).toBe(MAX_WEBHOOK_ATTEMPTS);
    const eventId = givenUp[0]!.eventId;
    expect(receiver.received.filter((r) => r.body.includes(customer.id))).toHaveLength(MAX_WEBHOOK_ATTEMPTS);

    const resendPath = `/accounts/acct_http_a/webhook_endpoints/${id}/deliveries/${eventId}/resend`;
    const sent = () => receiver.received.filter((r) => r.body.includes(customer.id)).length;
    // The receiver is still down: the re-send is one more attempt, given up again.
    const first = await ok('POST', resendPath, { headers: { 'idempotency-key': 'resend-1' }, body: {} });
    expect(first).toEqual({ resent: 1, deliveries: [{ eventId, attempt: MAX_WEBHOOK_ATTEMPTS + 1 }] });
    await pass();
    expect(sent()).toBe(MAX_WEBHOOK_ATTEMPTS + 1);
    expect((await ok('GET', `/accounts/acct_http_a/webhook_endpoints/${id}/deliveries?status=failed`)).data).toHaveLength(1);
    // The same request again (a retry, though the delivery is given up once more): nothing is put back.
    const retried = await ok('POST', resendPath, { headers: { 'idempotency-key': 'resend-1' }, body: {} });
    expect(retried).toEqual({ resent: 0, deliveries: [{ eventId, attempt: MAX_WEBHOOK_ATTEMPTS + 1 }] });
    await pass();
    expect(sent()).toBe(MAX_WEBHOOK_ATTEMPTS + 1);

    // A new request, the receiver back up: reached once, even with the request sent twice.
    receiver.respond = answer(200, 'ok');
    const second = await ok('POST', resendPath, { body: { after_attempt: MAX_WEBHOOK_ATTEMPTS + 1 } });
    expect(second).toEqual({ resent: 1, deliveries: [{ eventId, attempt: MAX_WEBHOOK_ATTEMPTS + 2 }] });
    expect((await ok('POST', resendPath, { body: { after_attempt: MAX_WEBHOOK_ATTEMPTS + 1 } })).resent).toBe(0);
    await pass();
    expect((await ok('POST', resendPath, { body: { after_attempt: MAX_WEBHOOK_ATTEMPTS + 1 } })).resent).toBe(0);
    await pass();
    expect(sent()).toBe(MAX_WEBHOOK_ATTEMPTS + 2);
    const delivered = (await ok('GET', `/accounts/acct_http_a/webhook_endpoints/${id}/deliveries`)).data as { eventId: string; status: string; resends: number }[];
    expect(delivered.find((d) => d.eventId === eventId)).toMatchObject({ status: 'delivered', resends: 2 });
    const attempts = (await ok('GET', `/accounts/acct_http_a/webhook_endpoints/${id}/deliveries/${eventId}/attempts`)).data as { attempt: number; succeeded: boolean; resentBy: string | null }[];
    expect(attempts.map((a) => [a.attempt, a.succeeded, a.resentBy])).toEqual([
      [1, false, null],
      [2, false, null],
      [3, false, null],
      [4, false, null],
      [5, false, 'ops-alice'],
      [6, true, 'ops-alice'],
    ]);
    const audits = (await recentAudit(server.ctx.db, 20)).filter((row) => row.action === 'webhook_delivery.resend');
    expect(audits).toHaveLength(2);
    expect(audits[0]).toMatchObject({ operator: 'ops-alice', account: 'acct_http_a', target: id });
    // A delivery that is not given up is not re-sent; a re-send without a request key is refused.
    expect((await admin('POST', resendPath, { headers: { 'idempotency-key': 'resend-3' }, body: {} })).body.error.param).toBe('event');
    expect((await admin('POST', `/accounts/acct_http_a/webhook_endpoints/${id}/resend_given_up`, { body: {} })).body.error.param).toBe('idempotency_key');
    expect((await ok('POST', `/accounts/acct_http_a/webhook_endpoints/${id}/resend_given_up`, { headers: { 'idempotency-key': 'all-1' }, body: {} })).resent).toBe(0);
    await ok('DELETE', `/accounts/acct_http_a/webhook_endpoints/${id}`);
  });

  it('the job ledger: an abandoned slot is listed, re-run through the API and completes; statements run now', async () => {
    const slot = server.ctx.clock.now();
    // The job's table is gone, so its slot fails; with one attempt allowed it is abandoned.
    await sql`ALTER TABLE checkout_sessions RENAME TO checkout_sessions_hidden`.execute(server.ctx.db);
    try {
      const [outcome] = await new Scheduler(server.ctx, [checkoutSessionExpiryJob], { owner: 'test-worker' }).tick();
      expect(outcome).toMatchObject({ job: 'checkout_sessions.expire', status: 'abandoned' });
    } finally {
      await sql`ALTER TABLE checkout_sessions_hidden RENAME TO checkout_sessions`.execute(server.ctx.db);
    }
    const states = (await ok('GET', '/jobs')).data as { job: string; abandonedSlots: number; lastSlot: { status: string } | null }[];
    expect(states.find((s) => s.job === 'checkout_sessions.expire')).toMatchObject({ abandonedSlots: 1, lastSlot: { status: 'abandoned' } });
    const abandoned = (await ok('GET', '/jobs/slots?status=abandoned')).data as { job: string; slot: string }[];
    expect(abandoned).toEqual([expect.objectContaining({ job: 'checkout_sessions.expire', slot: slot.toISOString() })]);

    const rerun = await ok('POST', '/jobs/checkout_sessions.expire/run', { body: { slot: slot.toISOString() } });
    expect(rerun).toMatchObject({ job: 'checkout_sessions.expire', status: 'succeeded', claimedFrom: 'abandoned' });
    expect(await lastAudit()).toMatchObject({ operator: 'ops-alice', action: 'job.run', target: `checkout_sessions.expire@${slot.toISOString()}` });
    expect((await ok('GET', '/jobs/slots?job=checkout_sessions.expire')).data[0]).toMatchObject({ status: 'succeeded' });
    expect((await ok('GET', '/jobs')).data.find((s: { job: string }) => s.job === 'checkout_sessions.expire').abandonedSlots).toBe(0);

    const statements = (await ok('POST', '/statements/run', { body: {} })).data as { job: string; status: string }[];
    expect(statements.map((o) => [o.job, o.status])).toEqual([
      ['terms.close', 'succeeded'],
      ['service_fees.bill', 'succeeded'],
      ['balances.close', 'succeeded'],
    ]);
    expect(await lastAudit()).toMatchObject({ operator: 'ops-alice', action: 'statements.run' });
  });

  it('adjustments: a booking is listed and audited; a bad amount is refused and changes nothing; a retried request with the same key books once', async () => {
    const path = '/accounts/acct_http_a/adjustments';
    const booked = await ok('POST', path, { body: { amount: -1200, subject: 'other', reason: 'late fee waived back' } });
    expect(booked).toMatchObject({ object: 'adjustment', livemode: false, owner: 'merchant', subject: 'other', amount: -1200, reason: 'late fee waived back' });
    expect(await lastAudit()).toMatchObject({ operator: 'ops-alice', action: 'adjustment.book', account: 'acct_http_a', target: booked.id });
    expect((await lastAudit()).detail).toMatchObject({ amount: -1200, subject: 'other', livemode: false });
    expect((await ok('GET', path)).data.map((a: { id: string }) => a.id)).toEqual([booked.id]);
    // Live mode keeps its own list.
    expect((await ok('GET', `${path}?livemode=true`)).data).toEqual([]);

    const auditBefore = await recentAudit(server.ctx.db, 1000);
    for (const amount of [0, 1.5, '500']) {
      const refused = await admin('POST', path, { body: { amount, subject: 'other', reason: 'nope' } });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ code: 'invalid_amount', param: 'amount' });
    }
    const badSubject = await admin('POST', path, { body: { amount: 100, subject: 'gift', reason: 'nope' } });
    expect(badSubject.body.error).toMatchObject({ code: 'invalid_param_key', param: 'subject' });
    expect(await recentAudit(server.ctx.db, 1000)).toEqual(auditBefore);
    expect((await ok('GET', path)).data).toHaveLength(1);

    const headers = { 'idempotency-key': 'adj-retry-1' };
    const first = await ok('POST', path, { body: { amount: 3000, subject: 'reallocation', reason: 'moved from the platform' }, headers });
    const again = await ok('POST', path, { body: { amount: 3000, subject: 'reallocation', reason: 'moved from the platform' }, headers });
    expect(again).toEqual(first);
    expect((await ok('GET', path)).data.map((a: { id: string }) => a.id)).toEqual([first.id, booked.id]);
    const booking = (await recentAudit(server.ctx.db, 1000)).filter((row) => row.action === 'adjustment.book');
    expect(booking.map((row) => row.target)).toEqual([first.id, booked.id]);
  });

  it('test clocks through the operator API (the CLI\'s client): created, listed, advanced in the server until ready, deleted; bad input and unknown accounts refused; each change audited', async () => {
    const op = remoteOperator(server.baseUrl, OPERATOR.token);
    const clock = await op.testClocks.create('acct_http_a', { frozenTime: new Date('2027-03-01T00:00:00+09:00'), name: 'by operator' });
    expect(clock).toMatchObject({ object: 'test_clock', status: 'ready', name: 'by operator', frozen_time: Date.parse('2027-03-01T00:00:00+09:00') / 1000 });
    expect(await lastAudit()).toMatchObject({ operator: 'ops-alice', action: 'test_clock.create', account: 'acct_http_a', target: clock.id });
    const to = new Date('2027-03-05T00:00:00+09:00');
    expect(await op.testClocks.advance('acct_http_a', clock.id, to)).toMatchObject({ id: clock.id, status: 'advancing', advancing_to: to.getTime() / 1000 });
    expect(await lastAudit()).toMatchObject({ action: 'test_clock.advance', target: clock.id });
    await expect.poll(async () => (await op.testClocks.list('acct_http_a')).find((c) => c.id === clock.id), { timeout: 30_000 }).toMatchObject({ status: 'ready', frozen_time: to.getTime() / 1000 });
    const refusal = async (work: Promise<unknown>) => work.then(() => null, (error: unknown) => (error instanceof KessaiError ? { code: error.code, param: error.param } : error));
    expect(await refusal(op.testClocks.advance('acct_http_a', clock.id, new Date('2027-03-02T00:00:00+09:00')))).toEqual({ code: 'invalid_timestamp', param: 'frozen_time' });
    expect(await refusal(op.testClocks.list('acct_nobody'))).toEqual({ code: 'invalid_id', param: 'account' });
    expect((await admin('POST', '/accounts/acct_http_a/test_clocks', { body: { frozenTime: 'soon' } })).body.error).toMatchObject({ code: 'invalid_param_key', param: 'frozenTime' });
    // Deleted: gone from the list, audited; a second delete finds nothing.
    expect(await op.testClocks.delete('acct_http_a', clock.id)).toEqual({ id: clock.id, object: 'test_clock', deleted: true });
    expect(await lastAudit()).toMatchObject({ action: 'test_clock.delete', target: clock.id });
    expect((await op.testClocks.list('acct_http_a')).map((c) => c.id)).not.toContain(clock.id);
    expect(await refusal(op.testClocks.delete('acct_http_a', clock.id))).toEqual({ code: 'not_found', param: 'id' });
  });

  it('an account: reauthorization and service plan settings (audited), its recent events, terms, statements and balances, and a statement CSV; unknown accounts refused', async () => {
    expect(await ok('GET', '/accounts/acct_http_b/reauth')).toMatchObject({ enabled: false });
    expect(await ok('POST', '/accounts/acct_http_b/reauth', { body: { enabled: true, leadHours: 24 } })).toMatchObject({ enabled: true, leadHours: 24 });
    expect(await lastAudit()).toMatchObject({ operator: 'ops-alice', action: 'account.reauth', account: 'acct_http_b' });
    expect((await admin('POST', '/accounts/acct_http_b/reauth', { body: { leadHours: 0 } })).body.error).toMatchObject({ code: 'invalid_param_key', param: 'lead_hours' });
    expect((await admin('POST', '/accounts/acct_http_b/reauth', { body: { leadHours: '24' } })).body.error).toMatchObject({ code: 'invalid_param_key', param: 'leadHours' });
    const plan = await ok('POST', '/accounts/acct_http_b/service_plans', { body: { subject: 'proplan', monthlyFee: 3000, from: '2027-02-01T00:00:00+09:00' } });
    expect(plan).toMatchObject({ object: 'service_plan', subject: 'proplan', monthly_fee: 3000 });
    expect(await lastAudit()).toMatchObject({ action: 'service_plan.set', account: 'acct_http_b' });
    expect((await ok('GET', '/accounts/acct_http_b/service_plans')).data).toEqual([plan]);

    const customer = await server.sdk(server.keys.b.test.secret).customers.create({ email: 'events@example.com' });
    const events = (await ok('GET', '/accounts/acct_http_b/events')).data as { type: string; data: { id: string } }[];
    expect(events.find((e) => e.type === 'customer.created')?.data.id).toBe(customer.id);
    expect((await ok('GET', '/accounts/acct_http_b/events?livemode=true')).data).toEqual([]);
    await ok('POST', '/accounts/acct_http_b/adjustments', { body: { amount: 900, subject: 'other', reason: 'goodwill' } });
    const settlement = await ok('GET', '/accounts/acct_http_b/settlement');
    expect(settlement.terms.length).toBeGreaterThan(0);
    expect(settlement.balances).toEqual(expect.any(Array));
    for (const statement of settlement.statements as { id: string }[]) {
      expect((await ok('GET', `/accounts/acct_http_b/statements/${statement.id}/csv`)).csv).toContain(`statement_id,${statement.id}`);
    }
    expect((await admin('GET', '/accounts/acct_http_b/statements/st_missing/csv')).body.error).toMatchObject({ code: 'invalid_id', param: 'statement' });
    expect((await admin('GET', '/accounts/acct_nobody/events')).body.error).toMatchObject({ code: 'invalid_id', param: 'account' });
  });
});
