/**
 * Disputes (chargebacks) through the official SDKs: a v2 payment flow and a v1
 * charge paid with the simulated network's dispute card, the clock moved past the dispute instant,
 * the `disputes.open` job run, the disputes read with `getPaymentDispute` / `getAllPaymentDisputes`
 * (filters, cursors), `dispute.created` read through the events API, and the term closed with the
 * chargeback items and conserved totals.
 */
import * as v2 from '@payjp/payjpv2';
import type { Client } from '@payjp/payjpv2';
import type Payjp from 'payjp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disputeOpeningJob } from '../../jobs/dispute-opening';
import { termCloseJob } from '../../jobs/term-close';
import type { JobDefinition } from '../../src/engine/job';
import { Scheduler } from '../../src/engine/scheduler';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { testContext } from '../support/database';
import { startTestServer, type TestServer } from '../support/http-server';
import { ok, problem, v2Client } from '../support/v2-sdk';

const jst = (local: string): Date => new Date(`${local}+09:00`);
const DAY = 24 * 60 * 60 * 1000;
const CAPTURED_AT = jst('2027-01-10T10:00:00');
/** The fraud dispute card is disputed 3 days after each capture. */
const DISPUTED_AT = new Date(CAPTURED_AT.getTime() + 3 * DAY);

describe('v2 payment disputes', () => {
  let server: TestServer;
  let client: Client;
  let payjp: Payjp.Payjp;
  let flowId: string;
  let otherFlowId: string;
  let chargeId: string;
  let runs = 0;

  /** Runs one slot of a job the way the worker does, with the clock at the slot. */
  async function runSlot(job: JobDefinition, slot: Date): Promise<Record<string, number>> {
    runs += 1;
    const runCtx = testContext(server.ctx.store, { at: slot, seed: 160 + runs });
    const outcome = await new Scheduler(runCtx, [job], { owner: 'test' }).runSlot(job.name, slot);
    expect(outcome.status, outcome.status === 'failed' ? outcome.error : '').toBe('succeeded');
    return outcome.status === 'succeeded' ? { ...outcome.counts } : {};
  }

  beforeAll(async () => {
    server = await startTestServer('harness');
    client = v2Client(server, server.keys.a.test.secret);
    payjp = server.sdk(server.keys.a.test.secret);
    server.ctx.clock.set(CAPTURED_AT);
    const card = (number: string) => ({ type: 'card' as const, card: { number, exp_month: 12, exp_year: 2035, cvc: '123' }, billing_details: { email: 'buyer@example.com' } });
    // A v2 flow paid with the dispute card, 2,500 of it refunded before the dispute; one paid with Visa.
    const disputedPm = await ok(v2.createPaymentMethod({ client, body: card(TEST_CARDS.disputedFraudulent.number) }));
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 10_000, currency: 'jpy', payment_method_id: disputedPm.id, confirm: true } }));
    expect(flow.status).toBe('succeeded');
    flowId = flow.id;
    await ok(v2.createPaymentRefund({ client, body: { payment_flow_id: flow.id, amount: 2_500 } }));
    const visaPm = await ok(v2.createPaymentMethod({ client, body: card(TEST_CARDS.visa.number) }));
    otherFlowId = (await ok(v2.createPaymentFlow({ client, body: { amount: 3_000, currency: 'jpy', payment_method_id: visaPm.id, confirm: true } }))).id;
    // A v1 charge with a token of the same card (the secret key creates tokens with the direct header).
    const token = await payjp.tokens.create({ card: { number: TEST_CARDS.disputedFraudulent.number, exp_month: 12, exp_year: 2035, cvc: '123' } } as never, { 'X-Payjp-Direct-Token-Generate': 'true' });
    chargeId = (await payjp.charges.create({ amount: 4_000, currency: 'jpy', card: token.id })).id;

    // Nothing is disputed before the instant; the job opens both disputes at it.
    expect(await runSlot(disputeOpeningJob, new Date(DISPUTED_AT.getTime() - 60_000))).toMatchObject({ opened: 0 });
    expect((await ok(v2.getAllPaymentDisputes({ client }))).data).toEqual([]);
    server.ctx.clock.set(DISPUTED_AT);
    expect(await runSlot(disputeOpeningJob, DISPUTED_AT)).toMatchObject({ opened: 2 });
  });
  afterAll(async () => server?.close());

  it('getAllPaymentDisputes and getPaymentDispute: the flow disputed for what was left after its refund, the v1 charge in full', async () => {
    const list = await ok(v2.getAllPaymentDisputes({ client }));
    expect(list).toMatchObject({ object: 'list', url: '/v2/payment_disputes', has_more: false });
    expect(list.data).toHaveLength(2);
    const ofFlow = list.data.find((d) => d.payment_flow_id === flowId)!;
    expect(ofFlow).toEqual({
      id: expect.stringMatching(/^pydp_/),
      object: 'payment_dispute',
      livemode: false,
      payment_flow_id: flowId,
      charge_id: expect.stringMatching(/^ch_/),
      amount: 7_500,
      currency: 'jpy',
      status: 'needs_response',
      reason: 'fraudulent',
      due_by: '2027-01-27T01:00:00Z',
      payment_method_type: 'card',
      metadata: {},
      created_at: '2027-01-13T01:00:00Z',
      updated_at: '2027-01-13T01:00:00Z',
    });
    const ofCharge = list.data.find((d) => d.payment_flow_id === null)!;
    expect(ofCharge).toMatchObject({ charge_id: chargeId, amount: 4_000, reason: 'fraudulent', created_at: '2027-01-13T01:00:00Z' });
    for (const dispute of list.data) expect(await ok(v2.getPaymentDispute({ client, path: { payment_dispute_id: dispute.id } }))).toEqual(dispute);
    expect(await problem(v2.getPaymentDispute({ client, path: { payment_dispute_id: 'pydp_unknown' } }))).toMatchObject({ status: 404, title: 'Not Found', errors: [{ field: 'payment_dispute_id' }] });
  });

  it('filters by payment_flow_id and status (several values) and pages by cursor both ways', async () => {
    const all = (await ok(v2.getAllPaymentDisputes({ client }))).data.map((d) => d.id);
    expect((await ok(v2.getAllPaymentDisputes({ client, query: { payment_flow_id: flowId } }))).data.map((d) => d.payment_flow_id)).toEqual([flowId]);
    expect((await ok(v2.getAllPaymentDisputes({ client, query: { payment_flow_id: otherFlowId } }))).data).toEqual([]);
    expect((await ok(v2.getAllPaymentDisputes({ client, query: { status: ['needs_response', 'lost'] } }))).data.map((d) => d.id)).toEqual(all);
    expect((await ok(v2.getAllPaymentDisputes({ client, query: { status: ['under_review'] } }))).data).toEqual([]);
    expect(await problem(v2.getAllPaymentDisputes({ client, query: { status: ['won'] } } as never))).toMatchObject({ errors: [{ field: 'status' }] });
    const first = await ok(v2.getAllPaymentDisputes({ client, query: { limit: 1 } }));
    expect(first).toMatchObject({ has_more: true, data: [{ id: all[0] }] });
    expect((await ok(v2.getAllPaymentDisputes({ client, query: { starting_after: all[0]! } }))).data.map((d) => d.id)).toEqual([all[1]]);
    expect((await ok(v2.getAllPaymentDisputes({ client, query: { ending_before: all[1]! } }))).data.map((d) => d.id)).toEqual([all[0]]);
    expect(await problem(v2.getAllPaymentDisputes({ client, query: { starting_after: 'pydp_unknown' } }))).toMatchObject({ status: 400, title: 'Resource Missing' });
  });

  it('dispute.created is in the events API, once per dispute, with the dispute as it was opened', async () => {
    const disputes = (await ok(v2.getAllPaymentDisputes({ client }))).data;
    const events = await ok(v2.getAllEvents({ client, query: { type: 'dispute.created', limit: 100 } }));
    expect(events.data.map((e) => e.data).sort((a, b) => String(a.id).localeCompare(String(b.id)))).toEqual([...disputes].sort((a, b) => a.id.localeCompare(b.id)));
    for (const dispute of disputes) {
      const own = await ok(v2.getAllEvents({ client, query: { resource_id: dispute.id } }));
      expect(own.data.map((e) => ({ type: e.type, created_at: e.created_at }))).toEqual([{ type: 'dispute.created', created_at: '2027-01-13T01:00:00Z' }]);
    }
  });

  it('the term close books the chargebacks: Σ items = net, money in = net + the service fees, dispute_count on the term', async () => {
    // A later slot finds nothing more to open.
    expect(await runSlot(disputeOpeningJob, new Date(DISPUTED_AT.getTime() + 60_000))).toMatchObject({ opened: 0 });
    expect(await runSlot(termCloseJob, jst('2027-02-01T00:00:00'))).toMatchObject({ terms_closed: 1 });
    server.ctx.clock.set(jst('2027-02-02T10:00:00'));
    const sales = (await ok(v2.getAllStatements({ client, query: { limit: 100 } }))).data.filter((s) => s.type === 'sales');
    expect(sales).toHaveLength(1);
    const statement = sales[0]!;
    const items = Object.fromEntries(statement.items.map((item) => [item.subject, item.amount]));
    expect(items).toEqual({
      gross_sales: 17_000,
      fee: -510,
      gross_refund: -2_500,
      refund_fee_offset: 75,
      chargeback: -11_500,
      chargeback_fee_offset: 345,
    });
    expect(statement.items.reduce((sum, item) => sum + item.amount, 0)).toBe(statement.net);
    // 17,000 captured − 2,500 refunded − 11,500 disputed = 3,000 = net + the service's 510 − 75 − 345.
    expect(statement.net + (510 - 75 - 345)).toBe(17_000 - 2_500 - 11_500);
    const term = (await ok(v2.getAllTerms({ client }))).data.find((t) => t.closed)!;
    expect(term).toMatchObject({ charge_count: 3, refund_count: 1, dispute_count: 2 });
  });
});
