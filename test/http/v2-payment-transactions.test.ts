/**
 * v2 payment transactions through the official `@payjp/payjpv2` SDK against the real server: the
 * settled captures (v2 flows, a partial capture and its remainder, PayPay, a v1 charge), refunds
 * (v2 and v1) and a dispute's chargeback as read-only transactions; cursor paging both ways; the
 * `term_id`, `type` and `payment_method_type` filters; 404 and the unknown cursor; and a closed
 * term's transactions adding up to its statement.
 */
import * as v2 from '@payjp/payjpv2';
import type { Client, PaymentTransactionResponse } from '@payjp/payjpv2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disputeOpeningJob } from '../../jobs/dispute-opening';
import { termCloseJob } from '../../jobs/term-close';
import type { JobDefinition } from '../../src/engine/job';
import { Scheduler } from '../../src/engine/scheduler';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { testContext } from '../support/database';
import { startTestServer, type TestServer } from '../support/http-server';
import { ok, problem, v2CardMethod, v2Client } from '../support/v2-sdk';

const jst = (local: string): Date => new Date(`${local}+09:00`);
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

describe.each(['harness', 'pglite'] as const)('v2 payment transactions through @payjp/payjpv2 (%s)', (backend) => {
  let server: TestServer;
  let client: Client;
  /** What the setup made, by name. */
  const made: Record<string, string> = {};

  /** Runs one slot of a job the way the worker does, with the clock at the slot. */
  async function runSlot(job: JobDefinition, slot: Date, seed: number): Promise<void> {
    const runCtx = testContext(server.ctx.store, { at: slot, seed });
    const outcome = await new Scheduler(runCtx, [job], { owner: 'test' }).runSlot(job.name, slot);
    expect(outcome.status, outcome.status === 'failed' ? outcome.error : '').toBe('succeeded');
  }

  async function all(query: Record<string, string> = {}): Promise<PaymentTransactionResponse[]> {
    return (await ok(v2.getAllPaymentTransactions({ client, query: { limit: 100, ...query } }))).data;
  }

  beforeAll(async () => {
    server = await startTestServer(backend);
    client = v2Client(server, server.keys.a.test.secret);
    const at = (local: string) => server.ctx.clock.set(jst(local));
    at('2027-01-10T10:00:00');
    const pm = await v2CardMethod(client, TEST_CARDS.visa.number);
    const automatic = await ok(v2.createPaymentFlow({ client, body: { amount: 10_000, currency: 'jpy', payment_method_id: pm.id, confirm: true } }));
    made.automatic = automatic.id;
    at('2027-01-10T11:00:00');
    const manual = await ok(v2.createPaymentFlow({ client, body: { amount: 8_000, currency: 'jpy', capture_method: 'manual', payment_method_id: pm.id, confirm: true } }));
    made.manual = manual.id;
    at('2027-01-10T12:00:00');
    await ok(v2.capturePaymentFlow({ client, path: { payment_flow_id: manual.id }, body: { amount_to_capture: 3_000 } }));
    at('2027-01-11T12:00:00');
    await ok(v2.capturePaymentFlow({ client, path: { payment_flow_id: manual.id } }));
    at('2027-01-12T09:00:00');
    const paypay = await ok(v2.createPaymentFlow({ client, body: { amount: 2_000, currency: 'jpy', payment_method_types: ['paypay'] } }));
    await ok(v2.confirmPaymentFlow({ client, path: { payment_flow_id: paypay.id }, body: { payment_method_type: 'paypay' } as never }));
    made.paypay = paypay.id;
    at('2027-01-13T09:00:00');
    made.refund = (await ok(v2.createPaymentRefund({ client, body: { payment_flow_id: automatic.id, amount: 2_500 } }))).id;
    // The v1 side of the same account: a charge and its partial refund.
    at('2027-01-14T09:00:00');
    const payjp = server.sdk(server.keys.a.test.secret);
    const token = await payjp.tokens.create({ card: { number: TEST_CARDS.mastercard.number, exp_month: 12, exp_year: 2035, cvc: '123' } } as never, { 'X-Payjp-Direct-Token-Generate': 'true' });
    made.charge = (await payjp.charges.create({ amount: 5_000, currency: 'jpy', card: token.id })).id;
    at('2027-01-15T09:00:00');
    await payjp.charges.refund(made.charge, { amount: 1_000 });
    // A capture with the fraud dispute card, disputed in full 3 days later (the disputes.open job).
    at('2027-01-16T09:00:00');
    const disputedPm = await v2CardMethod(client, TEST_CARDS.disputedFraudulent.number);
    made.disputed = (await ok(v2.createPaymentFlow({ client, body: { amount: 6_000, currency: 'jpy', payment_method_id: disputedPm.id, confirm: true } }))).id;
    at('2027-01-19T09:00:00');
    await runSlot(disputeOpeningJob, jst('2027-01-19T09:00:00'), 80);
    made.dispute = (await ok(v2.getAllPaymentDisputes({ client, query: { payment_flow_id: made.disputed } }))).data[0]!.id;
    // Something in the next term, and something in another account that must never show.
    at('2027-02-03T09:00:00');
    made.february = (await ok(v2.createPaymentFlow({ client, body: { amount: 1_500, currency: 'jpy', payment_method_id: pm.id, confirm: true } }))).id;
    const other = v2Client(server, server.keys.b.test.secret);
    const otherPm = await v2CardMethod(other, TEST_CARDS.visa.number);
    await ok(v2.createPaymentFlow({ client: other, body: { amount: 7_777, currency: 'jpy', payment_method_id: otherPm.id, confirm: true } }));
  });
  afterAll(async () => server?.close());

  it('every settled capture is a payment and every refund row a refund, newest first, signed from the merchant side', async () => {
    const list = await ok(v2.getAllPaymentTransactions({ client, query: { limit: 100 } }));
    expect(list).toMatchObject({ object: 'list', url: '/v2/payment_transactions', has_more: false });
    expect(list.data.map((t) => [t.type, t.resource_id, t.amount, t.payment_method_type])).toEqual([
      ['payment', made.february, 1_500, 'card'],
      ['chargeback', made.dispute, -6_000, 'card'],
      ['payment', made.disputed, 6_000, 'card'],
      ['refund', made.charge, -1_000, 'card'],
      ['payment', made.charge, 5_000, 'card'],
      ['refund', made.refund, -2_500, 'card'],
      ['payment', made.paypay, 2_000, 'paypay'],
      ['payment', made.manual, 5_000, 'card'],
      ['payment', made.manual, 3_000, 'card'],
      ['payment', made.automatic, 10_000, 'card'],
    ]);
    const first = list.data.at(-1)!;
    // Visa at the default 3.00 %: the fee settlement booked on the capture.
    expect(first).toMatchObject({ object: 'payment_transaction', id: expect.stringMatching(/^ptxn_ch_/), livemode: false, currency: 'jpy', fee_rate: '3.00', fee: 300, term_id: expect.stringMatching(/^tm_/), created_at: '2027-01-10T01:00:00Z', updated_at: '2027-01-10T01:00:00Z' });
    const refund = list.data.find((t) => t.resource_id === made.refund)!;
    expect(refund).toMatchObject({ id: expect.stringMatching(/^ptxn_re_/), fee: -75, fee_rate: '3.00', created_at: expect.stringMatching(ISO) });
    expect(new Set(list.data.map((t) => t.id)).size).toBe(list.data.length);
    expect(await ok(v2.getPaymentTransaction({ client, path: { payment_transaction_id: refund.id } }))).toEqual(refund);
    expect(await ok(v2.getPaymentTransaction({ client, path: { payment_transaction_id: first.id } }))).toEqual(first);
    // The chargeback: the disputed amount and the fee given back (3.00 % of 6,000), at the dispute instant.
    const chargeback = list.data.find((t) => t.type === 'chargeback')!;
    expect(chargeback).toMatchObject({ id: `ptxn_${made.dispute}`, fee: -180, fee_rate: '3.00', term_id: first.term_id, created_at: '2027-01-19T00:00:00Z', updated_at: '2027-01-19T00:00:00Z' });
    expect(await ok(v2.getPaymentTransaction({ client, path: { payment_transaction_id: chargeback.id } }))).toEqual(chargeback);
  });

  it('pages by cursor both ways: starting_after walks the list, ending_before walks it back', async () => {
    const everything = await all();
    const forward: string[] = [];
    let page = await ok(v2.getAllPaymentTransactions({ client, query: { limit: 3 } }));
    forward.push(...page.data.map((t) => t.id));
    while (page.has_more) {
      page = await ok(v2.getAllPaymentTransactions({ client, query: { limit: 3, starting_after: page.data.at(-1)!.id } }));
      forward.push(...page.data.map((t) => t.id));
    }
    expect(forward).toEqual(everything.map((t) => t.id));
    const before = await ok(v2.getAllPaymentTransactions({ client, query: { limit: 2, ending_before: everything[4]!.id } }));
    expect(before).toMatchObject({ has_more: true });
    expect(before.data.map((t) => t.id)).toEqual([everything[2]!.id, everything[3]!.id]);
    const head = await ok(v2.getAllPaymentTransactions({ client, query: { limit: 5, ending_before: everything[2]!.id } }));
    expect(head).toMatchObject({ has_more: false });
    expect(head.data.map((t) => t.id)).toEqual([everything[0]!.id, everything[1]!.id]);
  });

  it('filters by type, payment_method_type and term_id, alone and together', async () => {
    expect((await all({ type: 'refund' })).map((t) => t.amount)).toEqual([-1_000, -2_500]);
    expect((await all({ type: 'payment' })).every((t) => t.type === 'payment' && t.amount > 0)).toBe(true);
    expect((await all({ type: 'chargeback' })).map((t) => [t.resource_id, t.amount])).toEqual([[made.dispute, -6_000]]);
    // kessai never cancels a dispute: nothing is a chargeback_cancel.
    expect(await all({ type: 'chargeback_cancel' })).toEqual([]);
    expect((await all({ payment_method_type: 'paypay' })).map((t) => t.resource_id)).toEqual([made.paypay]);
    expect(await all({ payment_method_type: 'apple_pay' })).toEqual([]);
    const february = (await all()).find((t) => t.resource_id === made.february)!;
    const january = (await all()).find((t) => t.resource_id === made.automatic)!;
    expect(february.term_id).not.toBe(january.term_id);
    expect((await all({ term_id: february.term_id })).map((t) => t.resource_id)).toEqual([made.february]);
    expect((await all({ term_id: january.term_id, type: 'refund', payment_method_type: 'card' })).map((t) => t.resource_id)).toEqual([made.charge, made.refund]);
    expect((await all({ term_id: january.term_id, type: 'chargeback', payment_method_type: 'card' })).map((t) => t.resource_id)).toEqual([made.dispute]);
    expect(await all({ term_id: february.term_id, type: 'chargeback' })).toEqual([]);
    expect(await all({ term_id: 'tm_unknown' })).toEqual([]);
  });

  it('refuses what names nothing: an unknown or foreign id is 404, an unknown cursor 400 Resource Missing, a bad filter 422', async () => {
    const someone = (await all())[0]!;
    expect(await problem(v2.getPaymentTransaction({ client, path: { payment_transaction_id: 'ptxn_ch_nothing' } }))).toMatchObject({ status: 404, title: 'Not Found' });
    expect(await problem(v2.getPaymentTransaction({ client, path: { payment_transaction_id: 'ptxn_pydp_nothing' } }))).toMatchObject({ status: 404, title: 'Not Found' });
    expect(await problem(v2.getPaymentTransaction({ client, path: { payment_transaction_id: made.charge! } }))).toMatchObject({ status: 404, title: 'Not Found' });
    expect(await problem(v2.getPaymentTransaction({ client, path: { payment_transaction_id: made.dispute! } }))).toMatchObject({ status: 404, title: 'Not Found' });
    // Account B's key does not reach account A's transaction, nor does live mode reach test mode.
    expect(await problem(v2.getPaymentTransaction({ client: v2Client(server, server.keys.b.test.secret), path: { payment_transaction_id: someone.id } }))).toMatchObject({ status: 404 });
    expect(await problem(v2.getPaymentTransaction({ client: v2Client(server, server.keys.a.live.secret), path: { payment_transaction_id: someone.id } }))).toMatchObject({ status: 404 });
    expect((await ok(v2.getAllPaymentTransactions({ client: v2Client(server, server.keys.b.test.secret), query: { limit: 100 } }))).data.map((t) => t.amount)).toEqual([7_777]);
    expect(await problem(v2.getAllPaymentTransactions({ client, query: { starting_after: 'ptxn_re_nothing' } }))).toMatchObject({ status: 400, title: 'Resource Missing' });
    expect(await problem(v2.getAllPaymentTransactions({ client, query: { ending_before: 'nothing' } }))).toMatchObject({ status: 400, title: 'Resource Missing' });
    expect(await problem(v2.getAllPaymentTransactions({ client, query: { type: 'transfer' } }))).toMatchObject({ status: 422, errors: [{ field: 'type' }] });
    expect(await problem(v2.getAllPaymentTransactions({ client, query: { payment_method_type: 'bank' } }))).toMatchObject({ status: 422, errors: [{ field: 'payment_method_type' }] });
    expect(await problem(v2.getAllPaymentTransactions({ client, query: { limit: 101 } }))).toMatchObject({ status: 422, errors: [{ field: 'limit' }] });
  });

  it('a closed term: its transactions add up to the statement (amounts to gross sales + gross refund + chargeback, fees to fee + both fee offsets)', async () => {
    await runSlot(termCloseJob, jst('2027-02-01T00:00:00'), 81);
    const january = (await all()).find((t) => t.resource_id === made.automatic)!.term_id;
    const sales = (await ok(v2.getAllStatements({ client, query: { limit: 100 } }))).data.find((s) => s.type === 'sales' && s.term?.id === january)!;
    const item = (subject: string) => sales.items.filter((i) => i.subject === subject).reduce((sum, i) => sum + i.amount, 0);
    const inTerm = await all({ term_id: january });
    expect(inTerm).toHaveLength(9);
    expect(item('chargeback')).toBe(-6_000);
    expect(item('chargeback_fee_offset')).toBe(180);
    expect(inTerm.reduce((sum, t) => sum + t.amount, 0)).toBe(item('gross_sales') + item('gross_refund') + item('chargeback'));
    expect(inTerm.reduce((sum, t) => sum + t.amount, 0)).toBe(10_000 + 8_000 + 2_000 + 5_000 + 6_000 - 2_500 - 1_000 - 6_000);
    expect(-inTerm.reduce((sum, t) => sum + t.fee, 0)).toBe(item('fee') + item('refund_fee_offset') + item('chargeback_fee_offset'));
  });
});
