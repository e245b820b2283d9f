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
import { testContext } from '../support/database';
import { startTestServer, type TestServer } from '../support/http-server';
import { ok, problem, v2Client } from '../support/v2-sdk';

const jst = (local: string): Date => new Date(`${local}+09:00`);
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

describe('v2 statements, balances and terms after a term closed', () => {
  let server: TestServer;
  let client: Client;

  beforeAll(async () => {
    server = await startTestServer('harness');
    client = v2Client(server, server.keys.a.test.secret);
    server.ctx.clock.set(jst('2027-01-10T10:00:00'));
    const pm = await ok(v2.createPaymentMethod({ client, body: { type: 'card', card: { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: 2035, cvc: '123' }, billing_details: { email: 'buyer@example.com' } } }));
    for (const amount of [10_000, 6_000]) {
      const flow = await ok(v2.createPaymentFlow({ client, body: { amount, currency: 'jpy', payment_method_id: pm.id, confirm: true } }));
      await ok(v2.createPaymentRefund({ client, body: { payment_flow_id: flow.id, amount: amount / 4 } }));
    }
    const runCtx = testContext(server.ctx.store, { at: jst('2027-02-01T00:00:00'), seed: 79 });
    expect((await new Scheduler(runCtx, [termCloseJob], { owner: 'test' }).runSlot(termCloseJob.name, jst('2027-02-01T00:00:00'))).status).toBe('succeeded');
    server.ctx.clock.set(jst('2027-02-02T10:00:00'));
  });
  afterAll(async () => server?.close());

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
