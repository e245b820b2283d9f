import * as v2 from '@payjp/payjpv2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Payjp from 'payjp';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { DEFAULT_TEST_CLOCK_PATH } from '../../src/api/test-clock-routes';
import { addEndpoint } from '../../src/webhooks/endpoints';
import { Scheduler } from '../../src/engine/scheduler';
import { termCloseJob } from '../../jobs/term-close';
import { testContext } from '../support/database';
import { startTestServer, sdkError, type TestServer } from '../support/http-server';
import { answer as respondWith, startReceiver, type Receiver } from '../support/webhook-receiver';
import { callTestClocks, untilClockReady, type Json } from '../support/test-clock-api';
import { ok, v2Client } from '../support/v2-sdk';

const card = (number: string) => ({ number, exp_month: '12', exp_year: '2035', cvc: '123' });
const seconds = (iso: string) => Date.parse(iso) / 1000;

describe('test clocks through the payjp SDK and plain fetch', () => {
  let server: TestServer;
  let payjp: Payjp.Payjp;
  let receiver: Receiver;
  let key: string;
  const clockApi = (method: string, path: string, body?: Record<string, string>, as = key) => callTestClocks(server.baseUrl, as, method, path, body);
  const ready = (id: string) => untilClockReady(server.baseUrl, key, id);
  const token = async (number: string) => (await payjp.tokens.create({ card: card(number) } as never, { 'X-Payjp-Direct-Token-Generate': 'true' })).id;

  beforeAll(async () => {
    server = await startTestServer('harness');
    key = server.keys.a.test.secret;
    payjp = server.sdk(key);
    receiver = await startReceiver();
    await addEndpoint(server.ctx, { accountId: 'acct_http_a', url: receiver.url });
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it('creates, lists, retrieves and refuses bad input naming the parameter', async () => {
    const created = await clockApi('POST', '', { frozen_time: String(seconds('2027-03-01T00:00:00+09:00')), name: 'crud' });
    expect(created).toMatchObject({ status: 200, body: { object: 'test_clock', status: 'ready', name: 'crud', frozen_time: seconds('2027-03-01T00:00:00+09:00'), livemode: false } });
    expect((await clockApi('GET', '')).body.data.map((c: Json) => c.id)).toContain(created.body.id);
    expect((await clockApi('GET', `/${created.body.id}`)).body.id).toBe(created.body.id);
    expect(await clockApi('POST', '', { frozen_time: 'yesterday' })).toMatchObject({ status: 400, body: { error: { code: 'invalid_timestamp', param: 'frozen_time' } } });
    expect(await clockApi('POST', '', { name: 'x' })).toMatchObject({ status: 400, body: { error: { param: 'frozen_time' } } });
    expect(await clockApi('POST', `/${created.body.id}/advance`, { frozen_time: String(seconds('2027-02-01T00:00:00+09:00')) })).toMatchObject({ status: 400, body: { error: { code: 'invalid_timestamp', param: 'frozen_time' } } });
    expect(await clockApi('POST', `/${created.body.id}/advance`, { frozen_time: String(seconds('2030-03-01T00:00:00+09:00')) })).toMatchObject({ status: 400, body: { error: { code: 'invalid_timestamp' } } });
    // Another account's key does not see the clock; a live key is refused.
    expect((await clockApi('GET', `/${created.body.id}`, undefined, server.keys.b.test.secret)).status).toBe(404);
    expect((await clockApi('GET', '', undefined, server.keys.a.live.secret)).status).toBe(401);
    expect(await sdkError(payjp.customers.create({ test_clock: 'clock_nope' } as never))).toMatchObject({ status: 400, param: 'test_clock' });
    expect(await clockApi('DELETE', `/${created.body.id}`)).toMatchObject({ status: 200, body: { deleted: true } });
    expect((await clockApi('GET', `/${created.body.id}`)).status).toBe(404);
  });

  it('shows the clock on the customer object: its id on v1 and v2, in retrieve, list and the created event; null when none', async () => {
    const clock = (await clockApi('POST', '', { frozen_time: String(seconds('2027-05-01T00:00:00+09:00')), name: 'shown' })).body;
    const onClock = await payjp.customers.create({ test_clock: clock.id } as never);
    const plain = await payjp.customers.create({});
    expect((onClock as unknown as Json).test_clock).toBe(clock.id);
    expect((plain as unknown as Json).test_clock).toBeNull();
    expect((await payjp.customers.retrieve(onClock.id) as unknown as Json).test_clock).toBe(clock.id);
    const listed = (await payjp.customers.list({ limit: 100 })).data as unknown as Json[];
    expect(listed.find((c) => c.id === onClock.id)?.test_clock).toBe(clock.id);
    expect(listed.find((c) => c.id === plain.id)?.test_clock).toBeNull();
    const created = (await payjp.events.list({ type: 'customer.created', limit: 100 } as never)).data.find((event) => (event.data as unknown as Json).id === onClock.id);
    expect((created?.data as unknown as Json | undefined)?.test_clock).toBe(clock.id);

    const client = v2Client(server, key);
    const v2OnClock = (await ok(v2.createCustomer({ client, body: { test_clock: clock.id } as never }))) as Json;
    expect(v2OnClock).toMatchObject({ object: 'customer', test_clock: clock.id, created_at: '2027-04-30T15:00:00Z' });
    expect(((await ok(v2.getCustomer({ client, path: { customer_id: v2OnClock.id } }))) as Json).test_clock).toBe(clock.id);
    expect(((await ok(v2.getCustomer({ client, path: { customer_id: plain.id } }))) as Json).test_clock).toBeNull();
    // The account's default clock attaches a new customer the same way, and shows it.
    const setDefault = (id: string) => fetch(`${server.baseUrl}${DEFAULT_TEST_CLOCK_PATH}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ test_clock: id }).toString() });
    expect((await setDefault(clock.id)).status).toBe(200);
    const byDefault = (await ok(v2.createCustomer({ client, body: {} }))) as Json;
    expect(byDefault.test_clock).toBe(clock.id);
    expect((await setDefault('')).status).toBe(200);
  });

  it('a dispute on a clock: opened by the advance at its own clock instant, its event delivered by the advance on the clock, and deleted with the clock', async () => {
    const start = seconds('2027-06-01T00:00:00+09:00');
    const clock = (await clockApi('POST', '', { frozen_time: String(start), name: 'dispute' })).body;
    // A card whose captures the issuer disputes three days later.
    const customer = await payjp.customers.create({ card: await token('4000000000000259'), test_clock: clock.id } as never);
    const charge = await payjp.charges.create({ amount: 3000, currency: 'jpy', customer: customer.id });
    expect(charge.created).toBe(start);
    const receivedBefore = receiver.received.length;
    const to = start + 5 * 86_400;
    expect((await clockApi('POST', `/${clock.id}/advance`, { frozen_time: String(to) })).status).toBe(200);
    await ready(clock.id);
    const disputed = receiver.received.slice(receivedBefore).map((request) => JSON.parse(request.body) as Json).filter((event) => event.type === 'dispute.created');
    expect(disputed.map((event) => [event.data.charge_id, Date.parse(event.created_at) / 1000])).toEqual([[charge.id, start + 3 * 86_400]]);
    const delivery = await server.ctx.db.selectFrom('webhook_deliveries').select(['test_clock_id', 'status']).where('account_id', '=', 'acct_http_a').where('event_id', '=', disputed[0]!.id).execute();
    expect(delivery).toEqual([{ test_clock_id: clock.id, status: 'delivered' }]);
    expect(await clockApi('DELETE', `/${clock.id}`)).toMatchObject({ status: 200 });
    expect(await server.ctx.db.selectFrom('events').select('event_id').where('account_id', '=', 'acct_http_a').where('event_id', '=', disputed[0]!.id).execute()).toEqual([]);
  });

  it('a year on a clock: trial end, 12 renewals, a declined trial end paused, webhooks once each on the clock time; live objects untouched', async () => {
    const start = '2027-01-01T00:00:00+09:00';
    const clock = (await clockApi('POST', '', { frozen_time: String(seconds(start)), name: 'a year' })).body;
    const plan = await payjp.plans.create({ amount: 1000, currency: 'jpy', interval: 'month', trial_days: 7 });
    const onClock = await payjp.customers.create({ card: await token(TEST_CARDS.visa.number), test_clock: clock.id } as never);
    expect(onClock.created).toBe(seconds(start));
    const declining = await payjp.customers.create({ card: await token('4000000000080319'), test_clock: clock.id } as never);
    const live = await payjp.customers.create({ card: await token(TEST_CARDS.visa.number) });
    const subscription = await payjp.subscriptions.create({ customer: onClock.id, plan: plan.id });
    expect(subscription).toMatchObject({ status: 'trial', created: seconds(start), trial_end: seconds(start) + 7 * 86_400 });
    const declined = await payjp.subscriptions.create({ customer: declining.id, plan: plan.id });
    const liveSubscription = await payjp.subscriptions.create({ customer: live.id, plan: plan.id });
    const receivedBefore = receiver.received.length;
    // A second endpoint that always fails: its retries come on the clock's time too.
    const failing = await startReceiver(respondWith(500, 'down'));
    const { endpoint: failingEndpoint } = await addEndpoint(server.ctx, { accountId: 'acct_http_a', url: failing.url });

    const to = seconds('2028-02-01T00:00:00+09:00');
    const answer = await clockApi('POST', `/${clock.id}/advance`, { frozen_time: String(to) });
    expect(answer).toMatchObject({ status: 200, body: { status: 'advancing', advancing_to: to } });
    // One advance at a time: a second one meanwhile is refused, and so is a request on the clock's objects.
    const second = await clockApi('POST', `/${clock.id}/advance`, { frozen_time: String(to + 60) });
    const finished = await ready(clock.id);
    if (second.status !== 200) expect(second.body.error).toMatchObject({ code: 'invalid_status' });
    expect(finished).toMatchObject({ status: 'ready', frozen_time: second.status === 200 ? to + 60 : to });

    const renewed = await payjp.subscriptions.retrieve(subscription.id);
    expect(renewed.status).toBe('active');
    const charges = (await payjp.charges.list({ customer: onClock.id, limit: 100 } as never)).data;
    // The trial end on day 7, then a charge a month: 13 charges by 2028-02-01, each dated on the clock.
    expect(charges).toHaveLength(13);
    for (const charge of charges) expect(charge.created).toBeGreaterThanOrEqual(seconds(start) + 7 * 86_400);
    expect((await payjp.subscriptions.retrieve(declined.id)).status).toBe('paused');
    // The live subscription (same account, not on the clock) is still in its trial as the server's clock sees it.
    const liveNow = await payjp.subscriptions.retrieve(liveSubscription.id);
    expect(liveNow.status).toBe('trial');
    expect((await payjp.charges.list({ customer: live.id } as never)).data).toHaveLength(0);

    // Every event of the clock's customers reached the receiver once, dated on the clock's time.
    const events = receiver.received.slice(receivedBefore).map((request) => JSON.parse(request.body) as Json);
    const ids = events.map((event) => event.id);
    expect(new Set(ids).size).toBe(ids.length);
    const types = events.map((event) => event.type);
    expect(types.filter((type) => type === 'charge.succeeded')).toHaveLength(13);
    expect(types).toContain('test_clock.ready');
    // v1 events carry `created` (UNIX seconds); the v2 ones of the books (terms, statements, balances) `created_at`.
    const createdOf = (event: Json): number => event.created ?? Date.parse(event.created_at) / 1000;
    for (const event of events) expect(createdOf(event)).toBeGreaterThanOrEqual(seconds(start));
    expect(events.find((event) => event.type === 'test_clock.ready')!.created).toBe(finished.frozen_time);

    // The failing endpoint: each event due early enough is tried at +0, +3, +6 and +9 clock minutes,
    // then given up; the good endpoint got it once (above).
    const attempts = await server.ctx.db
      .selectFrom('webhook_attempts')
      .select(['event_id', 'attempt', 'attempted_at'])
      .where('account_id', '=', 'acct_http_a')
      .where('endpoint_id', '=', failingEndpoint.id)
      .orderBy('event_id')
      .orderBy('attempt')
      .execute();
    // (The charge and subscription events the advance made: those at the clock's start predate the failing endpoint.)
    const retried = events.filter((event) => /^(charge|subscription)\./.test(event.type) && createdOf(event) > seconds(start) && createdOf(event) + 9 * 60 <= to);
    expect(retried.length).toBeGreaterThan(13);
    for (const event of retried) {
      const times = attempts.filter((a) => a.event_id === event.id).map((a) => a.attempted_at.getTime() / 1000 - createdOf(event));
      expect(times, `${event.type} ${event.id}`).toEqual([0, 180, 360, 540]);
      expect(failing.received.filter((request) => (JSON.parse(request.body) as Json).id === event.id)).toHaveLength(4);
    }
    await failing.close();

    // The clock's books: a term a month from the first capture's (2027-01) to 2028-01, each closed by the
    // advance at its own end on the clock's time, with the captures in it and its sales statement
    // dated at that end; the close of 2028-01 (at the target) opened 2028-02.
    const month = (m: number) => seconds(`${2027 + Math.floor(m / 12)}-${String((m % 12) + 1).padStart(2, '0')}-01T00:00:00+09:00`);
    const terms = (await payjp.terms.list({ limit: 100 })).data.filter((term) => term.start_at >= seconds(start)).sort((x, y) => x.start_at - y.start_at);
    expect(terms.map((term) => [term.start_at, term.end_at, term.closed])).toEqual([
      ...Array.from({ length: 13 }, (_, m) => [month(m), month(m + 1), true]),
      [month(13), null, false],
    ]);
    expect(terms.reduce((sum, term) => sum + term.charge_count, 0)).toBe(13);
    for (const term of terms.slice(0, 13)) {
      const statements = (await payjp.statements.list({ term: term.id, limit: 100 })).data;
      // Its sales statement (a transfer fee beside it when the balance is paid out), dated at the term's end.
      expect(statements.filter((statement) => statement.type === 'sales')).toHaveLength(1);
      for (const statement of statements) expect([statement.created, statement.term?.id]).toEqual([term.end_at, term.id]);
    }
    // Their events reached the receiver on the clock's time: each close at its term's end.
    const closes = events.filter((event) => event.type === 'term.closed' && event.created !== undefined);
    expect(closes.map((event) => [event.data.id, event.created])).toEqual(terms.slice(0, 13).map((term) => [term.id, term.end_at]));

    // The live worker closes the account's own terms and leaves the clock's: a live capture opens the
    // account's term of 2027-01 (beside the clock's), and the worker's close slot after the clock's
    // open term ended closes that live term (the probe says yes) but not the clock's.
    const liveCharge = await payjp.charges.create({ amount: 500, currency: 'jpy', card: await token(TEST_CARDS.visa.number) });
    const liveTerm = (await payjp.terms.list({ limit: 100 })).data.find((term) => !terms.some((t) => t.id === term.id));
    expect(liveTerm).toMatchObject({ start_at: seconds(start), closed: false, charge_count: 1 });
    expect(liveCharge.captured).toBe(true);
    const slot = new Date(month(14) * 1000 + 86_400_000);
    const worker = testContext(server.ctx.store, { at: new Date(slot.getTime() + 60_000), seed: 902 });
    const outcome = await new Scheduler(worker, [termCloseJob], { owner: 'live-worker' }).runSlot(termCloseJob.name, slot);
    expect(outcome.status, outcome.status === 'failed' ? outcome.error : '').toBe('succeeded');
    expect(await payjp.terms.retrieve(liveTerm!.id)).toMatchObject({ closed: true, end_at: month(1) });
    expect(await payjp.terms.retrieve(terms[13]!.id)).toMatchObject({ start_at: month(13), closed: false, end_at: null });

    // Deleting the clock removes its books with it; the account's own term stays.
    const closedStatement = (await payjp.statements.list({ term: terms[0]!.id, limit: 1 })).data[0]!;
    expect(await clockApi('DELETE', `/${clock.id}`)).toMatchObject({ status: 200, body: { deleted: true } });
    expect(await sdkError(payjp.terms.retrieve(terms[0]!.id))).toMatchObject({ status: 404 });
    expect(await sdkError(payjp.statements.retrieve(closedStatement.id))).toMatchObject({ status: 404 });
    expect((await payjp.terms.list({ limit: 100 })).data.map((term) => term.id)).toContain(liveTerm!.id);
  });
});
