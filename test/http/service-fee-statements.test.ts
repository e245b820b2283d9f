/**
 * `service_fee` and `misc` statements through the official SDKs (v1 §2.6, service rules §4): a
 * term with the account's paid plan billed by `service_fees.bill` and two operator adjustments
 * closes into a `service_fee` statement (`proplan`, billed, tax 10.00) and a `misc` statement
 * (`reallocation` paid, `other` billed, tax 0.00) beside the sales statement; all of them join the
 * merchant's balance, which adds up; v1 and v2 list them, and the statement download shows them.
 */
import * as v2 from '@payjp/payjpv2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceFeeBillingJob } from '../../jobs/service-fee-billing';
import { termCloseJob } from '../../jobs/term-close';
import { Scheduler } from '../../src/engine/scheduler';
import { bookAdjustment } from '../../src/settlement/adjustments';
import { setServicePlan } from '../../src/settlement/service-fees';
import { testContext } from '../support/database';
import { startTestServer, type TestServer } from '../support/http-server';
import { captureCharge } from '../support/settlement-seed';
import { ok, v2Client } from '../support/v2-sdk';

const jst = (local: string): Date => new Date(`${local}+09:00`);
const caller = { accountId: 'acct_http_a', livemode: false };

describe('a term with a plan fee and two adjustments', () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer('harness');
    await setServicePlan(server.ctx, caller, { subject: 'proplan', monthlyFee: 10_000, from: jst('2027-03-01T00:00:00') });
    const bill = testContext(server.ctx.store, { at: jst('2027-03-01T00:00:00'), seed: 41 });
    const billed = await new Scheduler(bill, [serviceFeeBillingJob], { owner: 'test' }).runSlot(serviceFeeBillingJob.name, jst('2027-03-01T00:00:00'));
    expect(billed).toMatchObject({ status: 'succeeded', counts: { billed: 1 } });
    // The slot again (a replay, or a second worker): nothing is billed twice.
    const replay = await new Scheduler(bill, [serviceFeeBillingJob], { owner: 'test2' }).runSlot(serviceFeeBillingJob.name, jst('2027-03-01T00:00:00'));
    expect(replay).toMatchObject({ status: 'succeeded', counts: { billed: 0 } });
    await captureCharge(server.ctx.db, server.ctx, { accountId: caller.accountId, chargeId: 'ch_sf_1', amount: 100_000, at: jst('2027-03-10T10:00:00') });
    server.ctx.clock.set(jst('2027-03-20T12:00:00'));
    await bookAdjustment(server.ctx, caller, { amount: 5_000, subject: 'reallocation', reason: 'moved from the old account acct_old' });
    await bookAdjustment(server.ctx, caller, { amount: -1_200, subject: 'other', reason: 'bank charge of a returned transfer' });
    const close = testContext(server.ctx.store, { at: jst('2027-04-01T00:00:00'), seed: 42 });
    expect((await new Scheduler(close, [termCloseJob], { owner: 'test' }).runSlot(termCloseJob.name, jst('2027-04-01T00:00:00'))).status).toBe('succeeded');
    server.ctx.clock.set(jst('2027-04-02T10:00:00'));
  });
  afterAll(async () => server?.close());

  it('v1: service_fee (proplan −10,000, tax 10.00) and misc (reallocation +5,000, other −1,200, tax 0.00) statements of the term, in the merchant balance that adds up', async () => {
    const payjp = server.sdk(server.keys.a.test.secret);
    const [serviceFee] = (await payjp.statements.list({ type: 'service_fee' } as never)).data;
    const [misc] = (await payjp.statements.list({ type: 'misc' } as never)).data;
    const [sales] = (await payjp.statements.list({ type: 'sales' } as never)).data;
    expect(serviceFee).toMatchObject({ object: 'statement', type: 'service_fee', tenant_id: null, net: -10_000, items: [{ subject: 'proplan', name: 'プロプラン利用料', amount: -10_000, tax_rate: '10.00' }] });
    expect(misc).toMatchObject({
      type: 'misc',
      net: 3_800,
      items: [
        { subject: 'reallocation', name: '振替', amount: 5_000, tax_rate: '0.00' },
        { subject: 'other', name: 'その他', amount: -1_200, tax_rate: '0.00' },
      ],
    });
    // One term, one balance: the sales, the plan fee and the adjustments all joined it.
    expect(serviceFee!.term!.id).toBe(sales!.term!.id);
    expect(misc!.term!.id).toBe(sales!.term!.id);
    expect(new Set([sales!.balance_id, serviceFee!.balance_id, misc!.balance_id]).size).toBe(1);
    const balance = await payjp.balances.retrieve(sales!.balance_id!);
    expect(balance.statements.map((s) => s.type)).toEqual(['sales', 'service_fee', 'misc', 'transfer_fee']);
    // 100,000 − 3,000 (fee) − 10,000 (plan) + 5,000 − 1,200 − 250 (transfer fee).
    expect(sales!.net).toBe(97_000);
    expect(balance).toMatchObject({ state: 'transfer', net: 97_000 - 10_000 + 3_800 - 250 });
    expect(balance.net).toBe(balance.statements.reduce((sum, s) => sum + s.net, 0));
  });

  it('v2 lists and retrieves them with ISO instants', async () => {
    const client = v2Client(server, server.keys.a.test.secret);
    const all = await ok(v2.getAllStatements({ client, query: { limit: 100 } }));
    const types = all.data.map((s) => s.type).sort();
    expect(types).toEqual(['misc', 'sales', 'service_fee', 'transfer_fee']);
    const serviceFee = all.data.find((s) => s.type === 'service_fee')!;
    expect(await ok(v2.getStatement({ client, path: { statement_id: serviceFee.id } }))).toMatchObject({ net: -10_000, items: [{ subject: 'proplan', amount: -10_000 }] });
  });

  it('the statement download shows the plan fee and the adjustments', async () => {
    const payjp = server.sdk(server.keys.a.test.secret);
    const csvOf = async (type: string) => {
      const [statement] = (await payjp.statements.list({ type } as never)).data;
      const response = await fetch((await payjp.statements.statementUrls(statement!.id)).url);
      expect(response.status).toBe(200);
      return response.text();
    };
    const serviceFee = await csvOf('service_fee');
    expect(serviceFee).toContain('type,service_fee');
    expect(serviceFee).toContain('proplan,プロプラン利用料,-10000,10.00');
    const misc = await csvOf('misc');
    expect(misc).toContain('reallocation,振替,5000,0.00');
    expect(misc).toContain('other,その他,-1200,0.00');
  });
});
