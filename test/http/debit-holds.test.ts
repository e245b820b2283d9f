/**
 * Debit cards are debited at authorization (service rules §2.1: "releasing or partially capturing
 * refunds the rest"; v1 §3: a smaller capture "sets amount_refunded to the difference"), through the
 * `payjp` SDK for the API paths and the hold-expiry job for the lapse, then the term close:
 * - full capture: the sale is the whole amount, nothing refunded;
 * - partial capture: the rest goes back to the buyer (`amount_refunded`), the sale and its fee are the
 *   captured part only;
 * - cancel (refund of the uncaptured charge): the debit goes back whole, `refunded`, no sale;
 * - expiry: the job releases the hold and so refunds the debit: `refunded`, `amount_refunded` =
 *   amount, `charge.refunded` (a credit card's lapse stays unrefunded, `charge.updated`);
 * and the merchant's statement counts only what was captured (no `refunds` row, no gross_refund).
 */
import * as v2 from '@payjp/payjpv2';
import type { Client } from '@payjp/payjpv2';
import { describe, expect, it } from 'vitest';
import { holdExpiryJob } from '../../jobs/hold-expiry';
import { paymentFlowExpiryJob } from '../../jobs/payment-flow-expiry';
import { termCloseJob } from '../../jobs/term-close';
import { slotAtOrBefore } from '../../src/engine/cron';
import { Scheduler } from '../../src/engine/scheduler';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { testContext } from '../support/database';
import { harnessServerForBlock } from '../support/http-server';
import { ok, v2Client } from '../support/v2-sdk';

const jst = (local: string): Date => new Date(`${local}+09:00`);
/** Where every block's clock starts: its holds are authorized then. */
const MAY_10 = jst('2027-05-10T10:00:00');
const card = (number: string) => ({ number, exp_month: 12, exp_year: 2035, cvc: '123' });

/** A manual-capture flow held on a card of `number` through the SDK. */
async function heldFlow(client: Client, number: string, amount: number) {
  const pm = await ok(v2.createPaymentMethod({ client, body: { type: 'card', card: card(number), billing_details: { email: 'buyer@example.com' } } }));
  const flow = await ok(v2.createPaymentFlow({ client, body: { amount, currency: 'jpy', capture_method: 'manual', payment_method_id: pm.id, confirm: true } }));
  expect(flow).toMatchObject({ status: 'requires_capture', amount_capturable: amount, amount_received: 0 });
  return flow;
}

/** The debit given back to the buyer: one succeeded refund of the flow of `amount`, with `refund.created`. */
async function expectReturned(client: Client, flowId: string, amount: number) {
  const refunds = (await ok(v2.getPaymentFlowRefunds({ client, path: { payment_flow_id: flowId } }))).data;
  expect(refunds).toEqual([expect.objectContaining({ object: 'payment_refund', payment_flow_id: flowId, amount, status: 'succeeded' })]);
  const refundId = (refunds[0] as { id: string }).id;
  expect((await ok(v2.getAllEvents({ client, query: { resource_id: refundId } }))).data.map((e) => e.type)).toEqual(['refund.created']);
}

describe('debit card holds, each path with its money', () => {
  const harness = harnessServerForBlock({ at: MAY_10 });
  const ids: Record<string, string> = {};

  async function hold(number: string, amount: number) {
    const payjp = harness.server.sdk(harness.server.keys.a.test.secret);
    const token = await payjp.tokens.create({ card: card(number) } as never, { 'X-Payjp-Direct-Token-Generate': 'true' });
    return payjp.charges.create({ amount, currency: 'jpy', card: token.id, capture: false, expiry_days: 3 });
  }

  it('full capture: the whole debit is the sale', async () => {
    const payjp = harness.server.sdk(harness.server.keys.a.test.secret);
    const held = await hold(TEST_CARDS.debit.number, 10_000);
    expect(held).toMatchObject({ paid: true, captured: false, card: { brand: 'Visa', last4: '5556' } });
    const captured = await payjp.charges.capture(held.id);
    expect(captured).toMatchObject({ captured: true, amount: 10_000, refunded: false, amount_refunded: 0 });
    ids.full = held.id;
  });

  it('partial capture: the rest is refunded to the buyer at once (amount_refunded), the charge stays unrefunded', async () => {
    const payjp = harness.server.sdk(harness.server.keys.a.test.secret);
    const held = await hold(TEST_CARDS.debit.number, 8_000);
    const captured = await payjp.charges.capture(held.id, { amount: 5_000 });
    expect(captured).toMatchObject({ captured: true, amount: 8_000, refunded: false, amount_refunded: 3_000 });
    // What is left to refund is the captured part only.
    const refunded = await payjp.charges.refund(held.id, { amount: 5_000 });
    expect(refunded).toMatchObject({ refunded: true, amount_refunded: 8_000 });
    ids.partial = held.id;
  });

  it('cancel: the whole debit is refunded, nothing is sold', async () => {
    const payjp = harness.server.sdk(harness.server.keys.a.test.secret);
    const held = await hold(TEST_CARDS.debit.number, 7_000);
    expect(await payjp.charges.refund(held.id)).toMatchObject({ captured: false, refunded: true, amount_refunded: 7_000 });
    ids.cancel = held.id;
  });

  it('expiry (the hold-expiry job): a debit hold is refunded whole with charge.refunded; a credit hold just lapses', async () => {
    const payjp = harness.server.sdk(harness.server.keys.a.test.secret);
    const debit = await hold(TEST_CARDS.debit.number, 6_000);
    const credit = await hold(TEST_CARDS.visa.number, 4_000);
    const slot = jst('2027-05-13T10:01:00');
    const outcome = await new Scheduler(testContext(harness.server.ctx.store, { at: slot, seed: 51 }), [holdExpiryJob], { owner: 'test' }).runSlot(holdExpiryJob.name, slot);
    expect(outcome).toMatchObject({ status: 'succeeded', counts: { released: 2 } });
    expect(await payjp.charges.retrieve(debit.id)).toMatchObject({ captured: false, refunded: true, amount_refunded: 6_000, expired_at: debit.expired_at });
    expect(await payjp.charges.retrieve(credit.id)).toMatchObject({ captured: false, refunded: false, amount_refunded: 0 });
    const debitEvents = await payjp.events.list({ resource_id: debit.id } as never);
    expect(debitEvents.data.map((e) => e.type)).toContain('charge.refunded');
    expect((debitEvents.data.find((e) => e.type === 'charge.refunded')!.data as { amount_refunded: number }).amount_refunded).toBe(6_000);
    const creditEvents = await payjp.events.list({ resource_id: credit.id } as never);
    expect(creditEvents.data.map((e) => e.type)).toContain('charge.updated');
    expect(creditEvents.data.map((e) => e.type)).not.toContain('charge.refunded');
    // The debit is gone: nothing to capture, nothing to reauthorize (that would debit again).
    harness.server.ctx.clock.set(jst('2027-05-14T10:00:00'));
    await expect(payjp.charges.capture(debit.id)).rejects.toMatchObject({ status: 400 });
    await expect(payjp.charges.reauth(debit.id)).rejects.toMatchObject({ status: 400 });
    ids.expired = debit.id;
  });

  it('the term close: only captured money is on the merchant statement; the buyer refunds of a debit are not refunds of a sale', async () => {
    const close = testContext(harness.server.ctx.store, { at: jst('2027-06-01T00:00:00'), seed: 52 });
    expect((await new Scheduler(close, [termCloseJob], { owner: 'test' }).runSlot(termCloseJob.name, jst('2027-06-01T00:00:00'))).status).toBe('succeeded');
    const payjp = harness.server.sdk(harness.server.keys.a.test.secret);
    const [sales] = (await payjp.statements.list({ type: 'sales' } as never)).data;
    const amountOf = (subject: string) => sales!.items.filter((item) => item.subject === subject).reduce((sum, item) => sum + item.amount, 0);
    // Sales 10,000 + 5,000 at 3.00 %; the merchant's one refund is the 5,000 captured and refunded later.
    expect(amountOf('gross_sales')).toBe(15_000);
    expect(amountOf('fee')).toBe(-450);
    expect(amountOf('gross_refund')).toBe(-5_000);
    expect(amountOf('refund_fee_offset')).toBe(150);
    const refundRows = await harness.server.ctx.db.selectFrom('refunds').select(['charge_id', 'amount']).where('account_id', '=', 'acct_http_a').execute();
    expect(refundRows).toEqual([{ charge_id: ids.partial, amount: 5_000 }]);
  });
});

describe('v2: a debit card in a manual-capture payment flow', () => {
  const harness = harnessServerForBlock({ at: MAY_10 });

  it('a partial capture is final: the rest is refunded to the buyer with it (a succeeded refund of the flow, refund.created), the flow succeeds with what was captured, all of which is still refundable', async () => {
    const client = v2Client(harness.server, harness.server.keys.a.test.secret);
    const flow = await heldFlow(client, TEST_CARDS.debit.number, 9_000);
    const captured = await ok(v2.capturePaymentFlow({ client, path: { payment_flow_id: flow.id }, body: { amount_to_capture: 6_000 } }));
    expect(captured).toMatchObject({ status: 'succeeded', amount_received: 6_000, amount_capturable: 0 });
    await expectReturned(client, flow.id, 3_000);
    // What came back was never sold: the 6,000 captured can still be refunded whole.
    expect(await ok(v2.createPaymentRefund({ client, body: { payment_flow_id: flow.id, amount: 6_000 } }))).toMatchObject({ amount: 6_000 });
  });

  it('cancel refunds the whole debit: canceled, nothing received, a succeeded refund of the held amount; a credit hold canceled has no refund', async () => {
    const client = v2Client(harness.server, harness.server.keys.a.test.secret);
    const flow = await heldFlow(client, TEST_CARDS.debit.number, 3_000);
    expect(await ok(v2.cancelPaymentFlow({ client, path: { payment_flow_id: flow.id }, body: {} }))).toMatchObject({ status: 'canceled', amount_received: 0, amount_capturable: 0 });
    await expectReturned(client, flow.id, 3_000);
    const credit = await heldFlow(client, TEST_CARDS.visa.number, 2_000);
    await ok(v2.cancelPaymentFlow({ client, path: { payment_flow_id: credit.id }, body: {} }));
    expect((await ok(v2.getPaymentFlowRefunds({ client, path: { payment_flow_id: credit.id } }))).data).toEqual([]);
  });

  it('full capture: the whole debit is the sale, nothing goes back; the payment transactions are the settled money only (captures and the merchant’s refund), never a debit given back', async () => {
    const client = v2Client(harness.server, harness.server.keys.a.test.secret);
    const flow = await heldFlow(client, TEST_CARDS.debit.number, 5_000);
    expect(await ok(v2.capturePaymentFlow({ client, path: { payment_flow_id: flow.id }, body: {} }))).toMatchObject({ status: 'succeeded', amount_received: 5_000, amount_capturable: 0 });
    expect((await ok(v2.getPaymentFlowRefunds({ client, path: { payment_flow_id: flow.id } }))).data).toEqual([]);
    // This block's flows: the 6,000 captured of 9,000 and refunded by the merchant, the canceled 3,000 debit and 2,000 credit hold, this 5,000.
    const transactions = (await ok(v2.getAllPaymentTransactions({ client, query: { limit: 100 } }))).data;
    expect(transactions.map((t) => [t.type, t.amount]).sort()).toEqual([
      ['payment', 5_000],
      ['payment', 6_000],
      ['refund', -6_000],
    ]);
  });
});

describe('v2: a debit hold that lapses shows its refund', () => {
  const harness = harnessServerForBlock({ at: MAY_10 });

  it('the lapse cancels the flow (expired) and refunds the debit: a succeeded refund of the amount with refund.created; a credit hold lapses with no refund; no refund is booked as a sale’s', async () => {
    const { server } = harness;
    const client = v2Client(server, server.keys.a.test.secret);
    const debit = await heldFlow(client, TEST_CARDS.debit.number, 4_500);
    const credit = await heldFlow(client, TEST_CARDS.visa.number, 2_500);
    const slot = new Date(Date.parse((debit as { capture_before?: string }).capture_before!) + 60_000);
    const outcome = await new Scheduler(testContext(server.ctx.store, { at: slot, seed: 61 }), [paymentFlowExpiryJob], { owner: 'test' }).runSlot(paymentFlowExpiryJob.name, slotAtOrBefore(paymentFlowExpiryJob.schedule, slot));
    expect(outcome).toMatchObject({ status: 'succeeded', counts: { canceled: 2 } });
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: debit.id } }))).toMatchObject({ status: 'canceled', cancellation_reason: 'expired', amount_received: 0 });
    await expectReturned(client, debit.id, 4_500);
    expect((await ok(v2.getPaymentFlowRefunds({ client, path: { payment_flow_id: credit.id } }))).data).toEqual([]);
    const refundRows = await server.ctx.db.selectFrom('refunds').select('refund_id').where('account_id', '=', 'acct_http_a').execute();
    expect(refundRows).toEqual([]);
  });
});
