/**
 * Statements, balances and terms through the v2 SDK after a term with v2 captures and refunds
 * closed: read-only views with ISO instants, cursor lists, statement and balance URLs served by
 * kessai; the statement's items add up to its net and the v2 money is all there.
 */
import * as v2 from '@payjp/payjpv2';
import type { Client } from '@payjp/payjpv2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { termCloseJob } from '../../jobs/term-close';
import { Scheduler } from '../../src/engine/scheduler';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { deliverDueWebhooks } from '../../src/webhooks/delivery';
import { addEndpoint } from '../../src/webhooks/endpoints';
import { testContext } from '../support/database';
import { startTestServer, type TestServer } from '../support/http-server';
import { startReceiver, type Receiver } from '../support/webhook-receiver';
import { ok, problem, v2Client } from '../support/v2-sdk';

const jst = (local: string): Date => new Date(`${local}+09:00`);
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

describe('v2 statements, balances and terms after a term closed', () => {
  let server: TestServer;
  let client: Client;
  let receiver: Receiver;
  let runCtx: ReturnType<typeof testContext>;

  beforeAll(async () => {
    server = await startTestServer('harness');
    client = v2Client(server, server.keys.a.test.secret);
    // A webhook endpoint that takes v2 events only, there before the term closes.
    receiver = await startReceiver();
    await addEndpoint(server.ctx, { accountId: 'acct_http_a', url: `${receiver.url}/v2-hooks`, apiVersion: 'v2' });
    server.ctx.clock.set(jst('2027-01-10T10:00:00'));
    const pm = await ok(v2.createPaymentMethod({ client, body: { type: 'card', card: { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: 2035, cvc: '123' }, billing_details: { email: 'buyer@example.com' } } }));
    for (const amount of [10_000, 6_000]) {
      const flow = await ok(v2.createPaymentFlow({ client, body: { amount, currency: 'jpy', payment_method_id: pm.id, confirm: true } }));
      await ok(v2.createPaymentRefund({ client, body: { payment_flow_id: flow.id, amount: amount / 4 } }));
    }
    runCtx = testContext(server.ctx.store, { at: jst('2027-02-01T00:00:00'), seed: 79 });
    expect((await new Scheduler(runCtx, [termCloseJob], { owner: 'test' }).runSlot(termCloseJob.name, jst('2027-02-01T00:00:00'))).status).toBe('succeeded');
    server.ctx.clock.set(jst('2027-02-02T10:00:00'));
  });
  afterAll(async () => {
    await receiver?.close();
    await server?.close();
  });

  it('the settlement events are v2 events too (v2 §6.1 "other"): GET /v2/events?type=term.closed and a v2-only webhook endpoint see the close', async () => {
    const closed = (await ok(v2.getAllTerms({ client }))).data.find((t) => t.closed)!;
    const listed = await ok(v2.getAllEvents({ client, query: { type: 'term.closed' } }));
    expect(listed.data).toHaveLength(1);
    const [termClosed] = listed.data;
    // The v2 event shows the term as GET /v2/terms/{id} does: ISO instants under v2 names.
    expect(termClosed).toMatchObject({ object: 'event', type: 'term.closed', created_at: closed.end_at, data: await ok(v2.getTerm({ client, path: { term_id: closed.id } })) });
    expect(termClosed!.id.startsWith('evt_')).toBe(true);
    // Every settlement event of the close, once in each API (v1 lists events of one instant by id, so compared sorted).
    const SETTLEMENT = /^(term|statement|balance)\./;
    const v2Types = (await ok(v2.getAllEvents({ client, query: { limit: 100 } }))).data.map((e) => e.type).filter((type) => SETTLEMENT.test(type)).sort();
    const v1Types = (await server.sdk(server.keys.a.test.secret).events.list({ limit: 100 })).data.map((e) => e.type).filter((type) => SETTLEMENT.test(type)).sort();
    expect(v2Types).toEqual(v1Types);
    expect(new Set(v2Types)).toEqual(new Set(['term.created', 'term.closed', 'statement.created', 'balance.created', 'balance.fixed']));
    const statementCreated = (await ok(v2.getAllEvents({ client, query: { type: 'statement.created' } }))).data[0]!;
    expect(statementCreated.data).toMatchObject({ object: 'statement', created_at: expect.stringMatching(ISO), term: { id: closed.id, start_at: expect.stringMatching(ISO) } });

    // The v2-only endpoint hears the close: the same event, delivered through the delivery job.
    expect(await deliverDueWebhooks(runCtx, { owner: 'test' })).toMatchObject({ given_up: 0 });
    const heard = receiver.received.map((request) => JSON.parse(request.body) as { id: string; type: string; data: unknown });
    expect(heard.filter((event) => event.type === 'term.closed')).toEqual([expect.objectContaining({ id: termClosed!.id, data: termClosed!.data })]);
    expect(heard.every((event) => event.id.startsWith('evt_'))).toBe(true);
  });

  it('the closed term, its statement (Σ items = net, gross sales and refunds of the v2 flows) and its balance, with ISO instants', async () => {
    const terms = await ok(v2.getAllTerms({ client }));
    const closed = terms.data.find((t) => t.closed)!;
    expect(closed).toMatchObject({ object: 'term', start_at: expect.stringMatching(ISO), end_at: expect.stringMatching(ISO) });
    expect(await ok(v2.getTerm({ client, path: { term_id: closed.id } }))).toEqual(closed);
    const statements = await ok(v2.getAllStatements({ client, query: { limit: 100 } }));
    expect(statements).toMatchObject({ object: 'list', url: '/v2/statements', has_more: false });
    const sales = statements.data.find((s) => s.type === 'sales')!;
    expect(sales).toMatchObject({ object: 'statement', created_at: expect.stringMatching(ISO), updated_at: expect.stringMatching(ISO), term: { id: closed.id } });
    expect(sales.items.reduce((sum, item) => sum + item.amount, 0)).toBe(sales.net);
    const amountOf = (subject: string) => sales.items.filter((item) => item.subject === subject).reduce((sum, item) => sum + item.amount, 0);
    expect(amountOf('gross_sales')).toBe(16_000);
    expect(amountOf('gross_refund')).toBe(-4_000);
    expect(await ok(v2.getStatement({ client, path: { statement_id: sales.id } }))).toEqual(sales);
    const balances = await ok(v2.getAllBalances({ client }));
    const balance = balances.data.find((b) => b.id === sales.balance_id)!;
    expect(balance).toMatchObject({ object: 'balance', created_at: expect.stringMatching(ISO) });
    expect(await ok(v2.getBalance({ client, path: { balance_id: balance.id } }))).toEqual(balance);
  });

  it('statement_urls and balance_urls issue URLs this server serves, expiring in ISO', async () => {
    const statement = (await ok(v2.getAllStatements({ client }))).data[0]!;
    const statementUrl = await ok(v2.createStatementUrl({ client, path: { statement_id: statement.id } }));
    expect(statementUrl).toMatchObject({ object: 'statement_url', expires: expect.stringMatching(ISO) });
    expect(statementUrl.url.startsWith(`${server.baseUrl}/v1/statements/download?token=`)).toBe(true);
    const download = await fetch(statementUrl.url);
    expect(download.status).toBe(200);
    expect(await download.text()).toContain(statement.id);
    const balanceUrl = await ok(v2.createBalanceUrl({ client, path: { balance_id: statement.balance_id! } }));
    expect(balanceUrl).toMatchObject({ object: 'balance_url', expires: expect.stringMatching(ISO) });
    expect((await fetch(balanceUrl.url)).status).toBe(200);
    expect(await problem(v2.createBalanceUrl({ client, path: { balance_id: 'ba_none' } }))).toMatchObject({ status: 404, errors: [{ field: 'balance_id' }] });
  });

  it('lists page by cursor both ways', async () => {
    const all = (await ok(v2.getAllStatements({ client, query: { limit: 100 } }))).data.map((s) => s.id);
    expect(all.length).toBeGreaterThan(1);
    const first = await ok(v2.getAllStatements({ client, query: { limit: 1 } }));
    expect(first).toMatchObject({ has_more: true, data: [{ id: all[0] }] });
    expect((await ok(v2.getAllStatements({ client, query: { limit: 1, starting_after: all[0]! } }))).data.map((s) => s.id)).toEqual([all[1]]);
    expect((await ok(v2.getAllStatements({ client, query: { ending_before: all[1]! } }))).data.map((s) => s.id)).toEqual([all[0]]);
  });
});
