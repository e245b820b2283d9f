import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { decodeCreateToken } from '../../src/api/v1/tokens';
import { createToken } from '../../src/customers/tokens';
import type { Database } from '../../src/db/schema';
import { toProblemDocument } from '../../src/domain/problem-details';
import { listEvents } from '../../src/events/outbox';
import { TEST_CARDS, type TestCardName } from '../../src/processor/test-cards';
import { createTestDatabase, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { createPaymentFlow, updatePaymentFlow, confirmPaymentFlow, completePaymentFlowAction, capturePaymentFlow, cancelPaymentFlow } from '../support/payment-flows';
import { expectRefused, rejection } from '../support/rejections';
import type { PaymentFlowObject } from '../../src/payment-flows/payment-flow-object';
import type { V2List } from '../../src/operations/v2-pagination';
import { v2Operation } from '../support/operations';

const retrievePaymentFlow = v2Operation<PaymentFlowObject>('payment_flows.retrieve');
const listPaymentFlows = v2Operation<V2List<PaymentFlowObject>>('payment_flows.list');

const ACCOUNT = 'acct_flows';
const secret: Caller = { accountId: ACCOUNT, livemode: false, kind: 'secret' };
const browser: Caller = { accountId: ACCOUNT, livemode: false, kind: 'public' };
const DAY = 24 * 60 * 60 * 1000;

let database: TestDatabase;
let db: Kysely<Database>;
let ctx: ReturnType<typeof testContext>;

beforeAll(async () => {
  database = await createTestDatabase();
  db = database.store.db;
  await createAccount(testContext(database.store), { name: 'Flow Shop', id: ACCOUNT });
});
afterAll(async () => database?.drop());
beforeEach(async () => {
  await sql`TRUNCATE payment_flows, charges, tokens, events`.execute(db);
  ctx = testContext(database.store, { seed: 7 });
});

async function token(card: TestCardName): Promise<string> {
  const spec = TEST_CARDS[card];
  return (await createToken(ctx, browser, decodeCreateToken({ card: { number: spec.number, exp_month: 12, exp_year: 2030, cvc: '123' } }))).id;
}

const flowChargesOf = (id: string) => db.selectFrom('charges').selectAll().where('payment_flow_id', '=', id).orderBy('payment_flow_capture').execute();
const eventTypes = async (id: string) => (await listEvents(db, ACCOUNT, { resourceId: id })).map((event) => event.type);
/** Everything a refused call must leave as it was: the flows, the tokens' use, charges and events. */
const snapshot = async () => ({
  flows: await db.selectFrom('payment_flows').selectAll().orderBy('payment_flow_id').execute(),
  tokens: await db.selectFrom('tokens').select(['token_id', 'used_at']).orderBy('token_id').execute(),
  charges: await db.selectFrom('charges').select(['charge_id', 'amount']).orderBy('charge_id').execute(),
  events: (await db.selectFrom('events').select(({ fn }) => fn.countAll().as('n')).executeTakeFirstOrThrow()).n,
});

/** A manual-capture flow confirmed with the card, held. */
async function heldFlow(amount: number, card: TestCardName = 'visa', extra: Record<string, unknown> = {}) {
  const flow = await createPaymentFlow(ctx, secret, { amount, capture_method: 'manual', ...extra });
  return confirmPaymentFlow(ctx, browser, { id: flow.id, client_secret: flow.client_secret, payment_method: await token(card) });
}

describe('payment flow creation and confirmation (v2 §3, §4.2, §4.8)', () => {
  it('creates a flow in requires_payment_method with a client_secret and payment_flow.created', async () => {
    const flow = await createPaymentFlow(ctx, secret, { amount: 1200, metadata: { order: 'A-1', count: 3, gift: true } });
    expect(flow).toMatchObject({
      object: 'payment_flow',
      status: 'requires_payment_method',
      amount: 1200,
      currency: 'jpy',
      capture_method: 'automatic',
      payment_method_types: ['card'],
      amount_received: 0,
      amount_capturable: 0,
      metadata: { order: 'A-1', count: 3, gift: true },
      created_at: '2027-01-01T00:00:00Z',
    });
    expect(flow.id).toMatch(/^pfw_/);
    expect(flow.client_secret.startsWith(`${flow.id}_secret_`)).toBe(true);
    const [event] = await listEvents(db, ACCOUNT, { resourceId: flow.id });
    expect(event).toMatchObject({ type: 'payment_flow.created', apiVersion: 'v2' });
    expect(event!.id).toMatch(/^evt_/);
  });

  it('"created with capture_method=automatic → client confirms → succeeded; captured automatically; event payment_flow.succeeded"', async () => {
    const flow = await createPaymentFlow(ctx, secret, { amount: 5000, metadata: { order: 'B-7' } });
    const confirmed = await confirmPaymentFlow(ctx, browser, { id: flow.id, client_secret: flow.client_secret, payment_method: await token('visa'), return_url: 'https://shop.test/done' });
    expect(confirmed).toMatchObject({ status: 'succeeded', amount_received: 5000, amount_capturable: 0, capture_before: null, payment_method_details: { type: 'card', card: { brand: 'Visa', last4: '4242' } } });
    expect(await eventTypes(flow.id)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.succeeded']);
    const succeeded = (await listEvents(db, ACCOUNT, { type: 'payment_flow.succeeded' }))[0]!;
    // v2 §6.1: "for a payment flow [data] includes its metadata and customer".
    expect(succeeded.data).toMatchObject({ id: flow.id, metadata: { order: 'B-7' }, customer: null });
    // Settlement sees the captured money as a charge row linked to the flow.
    const [charge] = await flowChargesOf(flow.id);
    expect(charge).toMatchObject({ amount: 5000, amount_captured: 5000, captured: true, captured_at: REFERENCE_INSTANT, payment_flow_capture: 1, fee_rate: '3.00' });
    // settleCaptured ran on it: fee = floor(5000 × 3.00 / 100), and the term of its capture instant.
    expect(charge!.fee).toBe(150);
    expect(charge!.term_id).toMatch(/^tm_/);
  });

  it('the browser must present the client_secret: a public key without it, or with another, finds no flow', async () => {
    const flow = await createPaymentFlow(ctx, secret, { amount: 800 });
    const tok = await token('visa');
    await expectRefused('no secret', () => confirmPaymentFlow(ctx, browser, { id: flow.id, payment_method: tok }), 'invalid_id', 'id', snapshot);
    await expectRefused('wrong secret', () => confirmPaymentFlow(ctx, browser, { id: flow.id, client_secret: `${flow.id}_secret_x`, payment_method: tok }), 'invalid_id', 'id', snapshot);
    await expectRefused('retrieve without secret', () => retrievePaymentFlow(ctx, browser, { id: flow.id }), 'invalid_id', 'id', snapshot);
    // v2 §4.8 step 5: "The result is read either in the browser from the client secret, or on the server by id".
    expect((await retrievePaymentFlow(ctx, browser, { id: flow.id, client_secret: flow.client_secret })).status).toBe('requires_payment_method');
    expect((await retrievePaymentFlow(ctx, secret, { id: flow.id })).id).toBe(flow.id);
  });

  it('"created with capture_method=manual → confirm → requires_capture; the amount is held; no charge is made"', async () => {
    const held = await heldFlow(10_000);
    expect(held).toMatchObject({ status: 'requires_capture', amount_received: 0, amount_capturable: 10_000, extended_authorization: false });
    // Service rules §2.1: domestic card from 2026-09-14, 7 days.
    expect(held.capture_before).toBe(new Date(REFERENCE_INSTANT.getTime() + 7 * DAY).toISOString().replace('.000Z', 'Z'));
    expect(await flowChargesOf(held.id)).toEqual([]);
    expect(await eventTypes(held.id)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.amount_capturable_updated']);
  });

  it('must_extend extends a domestic card to 25 days; if_available on an overseas card keeps 5 days', async () => {
    const extended = await heldFlow(3000, 'visa', { payment_method_options: { card: { request_extended_authorization: 'must_extend' } } });
    expect(extended).toMatchObject({ extended_authorization: true, payment_method_options: { card: { request_extended_authorization: 'must_extend' } } });
    expect(Date.parse(extended.capture_before!) - REFERENCE_INSTANT.getTime()).toBe(25 * DAY);
    const overseas = await heldFlow(3000, 'overseas', { payment_method_options: { card: { request_extended_authorization: 'if_available' } } });
    expect(overseas.extended_authorization).toBe(false);
    expect(Date.parse(overseas.capture_before!) - REFERENCE_INSTANT.getTime()).toBe(5 * DAY);
  });

  it('"With must_extend on a card issued overseas the request fails" — at confirmation, and at creation when the card is given there; nothing changes', async () => {
    const options = { payment_method_options: { card: { request_extended_authorization: 'must_extend' } } };
    const flow = await createPaymentFlow(ctx, secret, { amount: 3000, capture_method: 'manual', ...options });
    const tok = await token('overseas');
    const param = 'payment_method_options[card][request_extended_authorization]';
    const error = await expectRefused('confirm', () => confirmPaymentFlow(ctx, browser, { id: flow.id, client_secret: flow.client_secret, payment_method: tok }), 'extended_authorization_not_available', param, snapshot);
    expect(toProblemDocument(error)).toMatchObject({ status: 400, title: 'Extended Authorization Not Available', errors: [{ field: 'payment_method_options.card.request_extended_authorization' }] });
    await expectRefused('create', () => createPaymentFlow(ctx, secret, { amount: 3000, capture_method: 'manual', payment_method: tok, ...options }), 'extended_authorization_not_available', param, snapshot);
    // The token was not used up by the refused calls: the same token still confirms without must_extend.
    await updatePaymentFlow(ctx, secret, { id: flow.id, payment_method_options: { card: {} } });
    expect((await confirmPaymentFlow(ctx, browser, { id: flow.id, client_secret: flow.client_secret, payment_method: tok })).status).toBe('requires_capture');
  });

  it('a declined card: 402 card_declined, the flow goes back to requires_payment_method with last_payment_error.message and payment_flow.payment_failed', async () => {
    const flow = await createPaymentFlow(ctx, secret, { amount: 2000 });
    const error = await rejection(confirmPaymentFlow(ctx, browser, { id: flow.id, client_secret: flow.client_secret, payment_method: await token('declinesOnCharge') }));
    expect([error.code, error.status]).toEqual(['card_declined', 402]);
    expect(toProblemDocument(error)).toMatchObject({ status: 402, title: 'Payment Failed', code: 'card_declined' });
    const after = await retrievePaymentFlow(ctx, secret, { id: flow.id });
    expect(after).toMatchObject({ status: 'requires_payment_method', payment_method: null, last_payment_error: { code: 'card_declined' } });
    expect(typeof after.last_payment_error!.message).toBe('string');
    expect(await eventTypes(flow.id)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.payment_failed']);
    // A new payment method may be tried.
    expect((await confirmPaymentFlow(ctx, browser, { id: flow.id, client_secret: flow.client_secret, payment_method: await token('visa') })).status).toBe('succeeded');
  });

  it('"a payment needing 3-D Secure emits payment_flow.requires_action"; completing the action authorizes', async () => {
    const flow = await createPaymentFlow(ctx, secret, { amount: 4000, capture_method: 'manual' });
    const pending = await confirmPaymentFlow(ctx, browser, { id: flow.id, client_secret: flow.client_secret, payment_method: await token('threeDSecureRequired') });
    expect(pending).toMatchObject({ status: 'requires_action', next_action: { type: 'three_d_secure' }, three_d_secure_status: 'unverified' });
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 60_000));
    const done = await completePaymentFlowAction(ctx, browser, { id: flow.id, client_secret: flow.client_secret });
    expect(done).toMatchObject({ status: 'requires_capture', three_d_secure_status: 'verified', next_action: null, amount_capturable: 4000 });
    // The hold counts from the authorization, i.e. the completion of the action.
    expect(Date.parse(done.capture_before!)).toBe(REFERENCE_INSTANT.getTime() + 60_000 + 7 * DAY);
    expect(await eventTypes(flow.id)).toEqual(['payment_flow.created', 'payment_flow.requires_action', 'payment_flow.processing', 'payment_flow.amount_capturable_updated']);
  });

  it('a failed 3-D Secure authentication: three_d_secure_failed (402), back to requires_payment_method', async () => {
    const flow = await createPaymentFlow(ctx, secret, { amount: 4000 });
    await confirmPaymentFlow(ctx, browser, { id: flow.id, client_secret: flow.client_secret, payment_method: await token('threeDSecureFailed') });
    const error = await rejection(completePaymentFlowAction(ctx, browser, { id: flow.id, client_secret: flow.client_secret }));
    expect([error.code, error.status]).toEqual(['three_d_secure_failed', 402]);
    expect(await retrievePaymentFlow(ctx, secret, { id: flow.id })).toMatchObject({ status: 'requires_payment_method', three_d_secure_status: 'failed', last_payment_error: { code: 'three_d_secure_failed' } });
    expect(await eventTypes(flow.id)).toEqual(['payment_flow.created', 'payment_flow.requires_action', 'payment_flow.processing', 'payment_flow.payment_failed']);
    await expectRefused('no action left', () => completePaymentFlowAction(ctx, secret, { id: flow.id }), 'invalid_status', undefined, snapshot);
  });

  it('a method the flow does not accept is refused; PayPay holds 30 days and captures without a card', async () => {
    const cardOnly = await createPaymentFlow(ctx, secret, { amount: 1000 });
    await expectRefused('paypay on a card flow', () => confirmPaymentFlow(ctx, browser, { id: cardOnly.id, client_secret: cardOnly.client_secret, payment_method_type: 'paypay' }), 'no_allowed_param', 'payment_method_type', snapshot);
    const flow = await createPaymentFlow(ctx, secret, { amount: 1000, capture_method: 'manual', payment_method_types: ['paypay'] });
    const held = await confirmPaymentFlow(ctx, browser, { id: flow.id, client_secret: flow.client_secret, payment_method_type: 'paypay' });
    expect(held).toMatchObject({ status: 'requires_capture', payment_method: 'paypay', payment_method_details: { type: 'paypay', card: null } });
    expect(Date.parse(held.capture_before!) - REFERENCE_INSTANT.getTime()).toBe(30 * DAY);
    expect((await capturePaymentFlow(ctx, secret, { id: flow.id })).status).toBe('succeeded');
    expect(await flowChargesOf(flow.id)).toMatchObject([{ amount: 1000, card_id: 'paypay' }]);
  });
});

describe('capture (v2 §3, §4.4, §8)', () => {
  it('"A partial capture is allowed once", then "only the full remaining amount may be captured"', async () => {
    const held = await heldFlow(10_000);
    const partial = await capturePaymentFlow(ctx, secret, { id: held.id, amount_to_capture: 3000 });
    // v2 §3: "amount_received = captured part; amount_capturable = remainder".
    expect(partial).toMatchObject({ status: 'requires_capture', amount_received: 3000, amount_capturable: 7000 });
    await expectRefused('a second partial capture', () => capturePaymentFlow(ctx, secret, { id: held.id, amount_to_capture: 5000 }), 'invalid_status', 'amount_to_capture', snapshot);
    await expectRefused('above the remainder', () => capturePaymentFlow(ctx, secret, { id: held.id, amount_to_capture: 7001 }), 'capture_amount_gt_net', 'amount_to_capture', snapshot);
    const rest = await capturePaymentFlow(ctx, secret, { id: held.id, amount_to_capture: 7000 });
    expect(rest).toMatchObject({ status: 'succeeded', amount_received: 10_000, amount_capturable: 0 });
    expect((await flowChargesOf(held.id)).map((c) => [c.payment_flow_capture, c.amount])).toEqual([[1, 3000], [2, 7000]]);
    expect(await eventTypes(held.id)).toEqual(['payment_flow.created', 'payment_flow.processing', 'payment_flow.amount_capturable_updated', 'payment_flow.amount_capturable_updated', 'payment_flow.succeeded']);
    await expectRefused('after success', () => capturePaymentFlow(ctx, secret, { id: held.id }), 'invalid_status', undefined, snapshot);
  });

  it('a cancel after the hold lapsed (before the job came round) ends the flow as the job would: reason expired, at capture_before', async () => {
    const held = await heldFlow(5000);
    const lapsedAt = Date.parse(held.capture_before!);
    ctx.clock.set(new Date(lapsedAt + 45_000));
    const canceled = await cancelPaymentFlow(ctx, secret, { id: held.id, cancellation_reason: 'requested_by_customer' });
    expect(canceled).toMatchObject({ status: 'canceled', cancellation_reason: 'expired', canceled_at: held.capture_before, amount_capturable: 0 });
    ctx.clock.set(REFERENCE_INSTANT);
  });

  it('a debit card\'s partial capture is final: "releasing or partially capturing refunds the rest" (service rules §2.1)', async () => {
    const held = await heldFlow(10_000, 'debit');
    const captured = await capturePaymentFlow(ctx, secret, { id: held.id, amount_to_capture: 4000 });
    expect(captured).toMatchObject({ status: 'succeeded', amount_received: 4000, amount_capturable: 0 });
    await expectRefused('the refunded rest', () => capturePaymentFlow(ctx, secret, { id: held.id, amount_to_capture: 6000 }), 'invalid_status', undefined, snapshot);
    expect((await flowChargesOf(held.id)).map((c) => c.amount)).toEqual([4000]);
  });

  it('"without amount_to_capture → succeeded; amount_received holds the captured amount", also after a partial capture', async () => {
    const full = await heldFlow(6000);
    expect(await capturePaymentFlow(ctx, secret, { id: full.id })).toMatchObject({ status: 'succeeded', amount_received: 6000, amount_capturable: 0 });
    const split = await heldFlow(6000);
    await capturePaymentFlow(ctx, secret, { id: split.id, amount_to_capture: 1000 });
    expect(await capturePaymentFlow(ctx, secret, { id: split.id })).toMatchObject({ status: 'succeeded', amount_received: 6000 });
  });

  it('"The held amount cannot be increased; the captured amount cannot exceed it": capture above the hold is refused (422)', async () => {
    const held = await heldFlow(5000);
    const error = await expectRefused('above the hold', () => capturePaymentFlow(ctx, secret, { id: held.id, amount_to_capture: 5001 }), 'capture_amount_gt_net', 'amount_to_capture', snapshot);
    expect(toProblemDocument(error)).toMatchObject({ status: 422, code: 'validation_error', errors: [{ field: 'amount_to_capture' }] });
    await expectRefused('amount after confirmation', () => updatePaymentFlow(ctx, secret, { id: held.id, amount: 9000 }), 'invalid_status', 'amount', snapshot);
  });

  it('capture after the hold lapsed is refused with charge_expired (400 invalid_status in v2)', async () => {
    const held = await heldFlow(5000);
    ctx.clock.set(new Date(Date.parse(held.capture_before!) + 1000));
    const error = await expectRefused('lapsed', () => capturePaymentFlow(ctx, secret, { id: held.id }), 'charge_expired', undefined, snapshot);
    expect(toProblemDocument(error)).toMatchObject({ status: 400, code: 'invalid_status', title: 'Payment Flow Expired' });
  });

  it('a flow that was not confirmed cannot be captured (invalid_status)', async () => {
    const flow = await createPaymentFlow(ctx, secret, { amount: 5000, capture_method: 'manual' });
    await expectRefused('unconfirmed', () => capturePaymentFlow(ctx, secret, { id: flow.id }), 'invalid_status', undefined, snapshot);
  });
});

describe('cancel', () => {
  it('cancels a held flow, releasing the hold, with its cancellation_reason and payment_flow.canceled', async () => {
    const held = await heldFlow(5000);
    const canceled = await cancelPaymentFlow(ctx, secret, { id: held.id, cancellation_reason: 'requested_by_customer' });
    expect(canceled).toMatchObject({ status: 'canceled', cancellation_reason: 'requested_by_customer', amount_capturable: 0, canceled_at: '2027-01-01T00:00:00Z' });
    expect((await eventTypes(held.id)).at(-1)).toBe('payment_flow.canceled');
    await expectRefused('twice', () => cancelPaymentFlow(ctx, secret, { id: held.id }), 'invalid_status', undefined, snapshot);
  });

  it('refuses after a partial capture, and refuses an unknown reason', async () => {
    const held = await heldFlow(5000);
    await capturePaymentFlow(ctx, secret, { id: held.id, amount_to_capture: 2000 });
    await expectRefused('partially captured', () => cancelPaymentFlow(ctx, secret, { id: held.id }), 'invalid_status', undefined, snapshot);
    const open = await createPaymentFlow(ctx, secret, { amount: 5000 });
    await expectRefused('reason', () => cancelPaymentFlow(ctx, secret, { id: open.id, cancellation_reason: 'expired' }), 'invalid_param_key', 'cancellation_reason', snapshot);
    expect((await cancelPaymentFlow(ctx, secret, { id: open.id })).status).toBe('canceled');
  });
});

describe('metadata (v2 §2.6, §8)', () => {
  it('rules 1–5: set on create, read back, sent keys overwrite, new keys add, unsent keys stay, "" deletes a key, {} clears all', async () => {
    const flow = await createPaymentFlow(ctx, secret, { amount: 1000, metadata: { a: '1', b: 2, c: true } });
    expect((await retrievePaymentFlow(ctx, secret, { id: flow.id })).metadata).toEqual({ a: '1', b: 2, c: true });
    const merged = await updatePaymentFlow(ctx, secret, { id: flow.id, metadata: { a: 'one', d: 'new', c: '' } });
    expect(merged.metadata).toEqual({ a: 'one', b: 2, d: 'new' });
    const cleared = await updatePaymentFlow(ctx, secret, { id: flow.id, metadata: {} });
    expect(cleared.metadata).toEqual({});
    // Metadata may change whatever the status.
    const held = await heldFlow(1000);
    expect((await updatePaymentFlow(ctx, secret, { id: held.id, metadata: { k: 'v' } })).metadata).toEqual({ k: 'v' });
  });

  it('limits: 20 keys, 40-character keys, 500-character values, no arrays or nested objects — refused, nothing changes', async () => {
    const flow = await createPaymentFlow(ctx, secret, { amount: 1000, metadata: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, 'v'])) });
    await expectRefused('a 21st key', () => updatePaymentFlow(ctx, secret, { id: flow.id, metadata: { extra: 'x' } }), 'too_many_metadata_keys', 'metadata', snapshot);
    await expectRefused('41-char key', () => updatePaymentFlow(ctx, secret, { id: flow.id, metadata: { ['k'.repeat(41)]: 'x' } }), 'invalid_metadata_key', `metadata[${'k'.repeat(41)}]`, snapshot);
    await expectRefused('501-char value', () => updatePaymentFlow(ctx, secret, { id: flow.id, metadata: { k0: 'v'.repeat(501) } }), 'invalid_metadata_value', 'metadata[k0]', snapshot);
    await expectRefused('nested', () => updatePaymentFlow(ctx, secret, { id: flow.id, metadata: { k0: { x: 1 } } }), 'invalid_metadata_value', 'metadata[k0]', snapshot);
    await expectRefused('array', () => createPaymentFlow(ctx, secret, { amount: 1000, metadata: { k: [1] } }), 'invalid_metadata_value', 'metadata[k]', snapshot);
    // 40 characters and 500 characters are fine.
    expect((await updatePaymentFlow(ctx, secret, { id: flow.id, metadata: { k0: 'v'.repeat(500), k1: '' } })).metadata).toHaveProperty('k0', 'v'.repeat(500));
  });
});

describe('validation and list', () => {
  it('checks amount, currency, capture_method and payment_method_types at the boundary', async () => {
    await expectRefused('no amount', () => createPaymentFlow(ctx, secret, {}), 'missing_param', 'amount', snapshot);
    await expectRefused('small amount', () => createPaymentFlow(ctx, secret, { amount: 49 }), 'invalid_amount', 'amount', snapshot);
    await expectRefused('currency', () => createPaymentFlow(ctx, secret, { amount: 100, currency: 'usd' }), 'invalid_currency', 'currency', snapshot);
    await expectRefused('capture_method', () => createPaymentFlow(ctx, secret, { amount: 100, capture_method: 'later' }), 'invalid_param_key', 'capture_method', snapshot);
    await expectRefused('types', () => createPaymentFlow(ctx, secret, { amount: 100, payment_method_types: ['card', 'bitcoin'] }), 'invalid_param_key', 'payment_method_types[1]', snapshot);
    await expectRefused('option', () => createPaymentFlow(ctx, secret, { amount: 100, payment_method_options: { card: { request_extended_authorization: 'yes' } } }), 'no_allowed_param', 'payment_method_options[card][request_extended_authorization]', snapshot);
    await expectRefused('customer', () => createPaymentFlow(ctx, secret, { amount: 100, customer: 'cus_missing' }), 'invalid_id', 'customer', snapshot);
  });

  it('lists newest first with limit and starting_after / ending_before cursors', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + i * 1000));
      ids.push((await createPaymentFlow(ctx, secret, { amount: 100 + i })).id);
    }
    const first = await listPaymentFlows(ctx, secret, { limit: 2 });
    expect(first).toMatchObject({ object: 'list', url: '/v2/payment_flows', has_more: true });
    expect(first.data.map((f) => f.id)).toEqual([ids[4], ids[3]]);
    const next = await listPaymentFlows(ctx, secret, { limit: 2, starting_after: ids[3] });
    expect(next.data.map((f) => f.id)).toEqual([ids[2], ids[1]]);
    const back = await listPaymentFlows(ctx, secret, { limit: 2, ending_before: ids[1] });
    expect(back.data.map((f) => f.id)).toEqual([ids[3], ids[2]]);
    expect((await listPaymentFlows(ctx, secret, { starting_after: ids[0] })).data).toEqual([]);
  });
});
