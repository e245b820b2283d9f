import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { checkoutSessionExpiryJob } from '../../jobs/checkout-session-expiry';
import { openHostedSession, type CheckoutSessionObject } from '../../src/checkout/checkout-sessions';
import { setPaymentMethodCapabilities, type PaymentMethodConfigurationObject } from '../../src/checkout/payment-method-configurations';
import { decodeCreateToken } from '../../src/api/v1/tokens';
import { createToken } from '../../src/customers/tokens';
import type { Database } from '../../src/db/schema';
import { listEvents } from '../../src/events/outbox';
import { runOperation } from '../../src/api/operations';
import { Scheduler } from '../../src/engine/scheduler';
import type { PriceObject } from '../../src/prices/prices';
import { TEST_CARDS, type TestCardName } from '../../src/processor/test-cards';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';
import { updatePaymentFlow, confirmPaymentFlow } from '../support/payment-flows';
import { expectRefused, rejection } from '../support/rejections';
import { v2Operation } from '../support/operations';
import type { PaymentFlowObject } from '../../src/payment-flows/payment-flow-object';

const retrievePaymentFlow = v2Operation<PaymentFlowObject>('payment_flows.retrieve');
const completeCheckoutSession = v2Operation<CheckoutSessionObject>('checkout.sessions.complete');
const createCheckoutSession = v2Operation<CheckoutSessionObject>('checkout.sessions.create');
const expireCheckoutSession = v2Operation<CheckoutSessionObject>('checkout.sessions.expire');
const retrieveCheckoutSession = v2Operation<CheckoutSessionObject>('checkout.sessions.retrieve');

const createPrice = v2Operation<PriceObject>('prices.create');
const retrievePrice = v2Operation<PriceObject>('prices.retrieve');
const listPaymentMethodConfigurations = v2Operation<{ object: 'list'; url: string; has_more: boolean; data: PaymentMethodConfigurationObject[] }>('payment_method_configurations.list');
const retrievePaymentMethodConfiguration = v2Operation<PaymentMethodConfigurationObject>('payment_method_configurations.retrieve');
const updatePaymentMethodConfiguration = v2Operation<PaymentMethodConfigurationObject>('payment_method_configurations.update');

const ACCOUNT = 'acct_checkout';
const secret: Caller = { accountId: ACCOUNT, livemode: false, kind: 'secret' };
const live: Caller = { accountId: ACCOUNT, livemode: true, kind: 'secret' };
const browser: Caller = { accountId: ACCOUNT, livemode: false, kind: 'public' };

let database: TestDatabase;
let db: Kysely<Database>;
let ctx: ReturnType<typeof testContext>;

beforeAll(async () => {
  database = await createTestDatabase();
  db = database.store.db;
  await createAccount(testContext(database.store), { name: 'Checkout Shop', id: ACCOUNT, liveEnabled: true });
});
afterAll(async () => database?.drop());
beforeEach(async () => {
  await sql`TRUNCATE payment_flows, checkout_sessions, checkout_session_line_items, prices, payment_method_configurations, charges, tokens, events, job_runs, job_run_groups, job_schedule`.execute(db);
  ctx = testContext(database.store, { seed: 11 });
});

async function token(card: TestCardName): Promise<string> {
  return (await createToken(ctx, browser, decodeCreateToken({ card: { number: TEST_CARDS[card].number, exp_month: 12, exp_year: 2030 } }))).id;
}

const snapshot = async () => ({
  sessions: await db.selectFrom('checkout_sessions').selectAll().orderBy('checkout_session_id').execute(),
  items: await db.selectFrom('checkout_session_line_items').selectAll().orderBy('checkout_session_id').orderBy('position').execute(),
  flows: await db.selectFrom('payment_flows').selectAll().orderBy('payment_flow_id').execute(),
  prices: await db.selectFrom('prices').selectAll().orderBy('price_id').execute(),
  configurations: await db.selectFrom('payment_method_configurations').selectAll().orderBy('configuration_id').execute(),
  events: (await db.selectFrom('events').select(({ fn }) => fn.countAll().as('n')).executeTakeFirstOrThrow()).n,
});

async function session(extra: Record<string, unknown> = {}) {
  const tea = await createPrice(ctx, secret, { unit_amount: 1200, currency: 'jpy' });
  const cup = await createPrice(ctx, secret, { unit_amount: 800 });
  return createCheckoutSession(ctx, secret, {
    mode: 'payment',
    line_items: [
      { price: tea.id, quantity: 2 },
      { price: cup.id, quantity: 1 },
    ],
    payment_method_types: ['card', 'paypay', 'apple_pay'],
    success_url: 'https://shop.test/thanks?session_id={CHECKOUT_SESSION_ID}',
    cancel_url: 'https://shop.test/cart',
    metadata: { cart: 'c-1' },
    payment_flow_data: { metadata: { order_id: 'o-77', gift: true } },
    setup_flow_data: { metadata: { purpose: 'later' } },
    ...extra,
  });
}

describe('prices', () => {
  it('creates and retrieves a price (price_, amount and currency) with price.created', async () => {
    const price = await createPrice(ctx, secret, { unit_amount: 500, currency: 'jpy', metadata: { sku: 'T-1' } });
    expect(price).toMatchObject({ object: 'price', unit_amount: 500, currency: 'jpy', active: true, metadata: { sku: 'T-1' } });
    expect(price.id).toMatch(/^price_/);
    expect(await retrievePrice(ctx, secret, { id: price.id })).toEqual(price);
    expect((await listEvents(db, ACCOUNT, { resourceId: price.id })).map((e) => e.type)).toEqual(['price.created']);
    await expectRefused('no amount', () => createPrice(ctx, secret, { currency: 'jpy' }), 'missing_param', 'unit_amount', snapshot);
    await expectRefused('currency', () => createPrice(ctx, secret, { unit_amount: 5, currency: 'usd' }), 'invalid_currency', 'currency', snapshot);
    await expectRefused('other mode', () => retrievePrice(ctx, live, { id: price.id }), 'invalid_id', 'id', snapshot);
  });
});

describe('checkout sessions (v2 §4.1, §2.6 rule 6, service rules §3)', () => {
  it('creates an open session with its line items, total, url and expiry 24 hours on', async () => {
    const created = await session();
    expect(created).toMatchObject({
      object: 'checkout.session',
      status: 'open',
      mode: 'payment',
      amount_total: 3200,
      currency: 'jpy',
      success_url: 'https://shop.test/thanks?session_id={CHECKOUT_SESSION_ID}',
      redirect_url: null,
      metadata: { cart: 'c-1' },
      payment_flow_data: { metadata: { order_id: 'o-77', gift: true } },
      setup_flow_data: { metadata: { purpose: 'later' } },
      payment_flow: null,
      created_at: '2027-01-01T00:00:00Z',
      expires_at: '2027-01-02T00:00:00Z',
    });
    expect(created.id).toMatch(/^cs_/);
    expect(created.url).toBe(`https://checkout.kessai.dev/pay/${created.id}`);
    expect(created.line_items.data).toEqual([
      { price: expect.stringMatching(/^price_/), quantity: 2, unit_amount: 1200, amount_total: 2400 },
      { price: expect.stringMatching(/^price_/), quantity: 1, unit_amount: 800, amount_total: 800 },
    ]);
    expect(await retrieveCheckoutSession(ctx, secret, { id: created.id })).toEqual(created);
  });

  it('end to end: create → complete on the hosted page → payment flow confirmed with payment_flow_data.metadata, success_url placeholder replaced, checkout.session.completed', async () => {
    const created = await session();
    const completed = await completeCheckoutSession(ctx, browser, { id: created.id, payment_method: await token('visa') });
    expect(completed).toMatchObject({ status: 'complete', url: null, completed_at: '2027-01-01T00:00:00Z' });
    // v2 §4.1: "{CHECKOUT_SESSION_ID} … is replaced by the session id".
    expect(completed.redirect_url).toBe(`https://shop.test/thanks?session_id=${created.id}`);
    const flow = await retrievePaymentFlow(ctx, secret, { id: completed.payment_flow! });
    // v2 §2.6 rule 6: "that data becomes the metadata of the created resource".
    expect(flow).toMatchObject({ status: 'succeeded', amount: 3200, amount_received: 3200, metadata: { order_id: 'o-77', gift: true }, checkout_session: created.id, payment_method_types: ['card', 'paypay', 'apple_pay'] });
    const types = (await listEvents(db, ACCOUNT)).filter((e) => e.apiVersion === 'v2' && e.type !== 'price.created').map((e) => e.type);
    // The capture opens the account's first term, which v2 hears of too (settlement events in both APIs).
    expect(types).toEqual(['payment_flow.created', 'payment_flow.processing', 'term.created', 'payment_flow.succeeded', 'checkout.session.completed']);
    const [event] = await listEvents(db, ACCOUNT, { type: 'checkout.session.completed' });
    expect(event!.data).toMatchObject({ id: created.id, status: 'complete', payment_flow: flow.id });
    await expectRefused('complete twice', () => completeCheckoutSession(ctx, browser, { id: created.id, payment_method: 'tok_x' }), 'invalid_status', undefined, snapshot);
  });

  it('a manual-capture session completes with its flow in requires_capture; a 3-D Secure card is authenticated on the hosted page', async () => {
    const created = await session({ payment_flow_data: { capture_method: 'manual', metadata: { k: 'v' } } });
    const completed = await completeCheckoutSession(ctx, browser, { id: created.id, payment_method: await token('threeDSecureRequired') });
    expect(completed.status).toBe('complete');
    expect(await retrievePaymentFlow(ctx, secret, { id: completed.payment_flow! })).toMatchObject({ status: 'requires_capture', amount_capturable: 3200, three_d_secure_status: 'verified', metadata: { k: 'v' } });
  });

  it('a declined card leaves the session open with its flow in requires_payment_method; another card then completes it', async () => {
    const created = await session();
    const error = await rejection(completeCheckoutSession(ctx, browser, { id: created.id, payment_method: await token('declinesOnCharge') }));
    expect([error.code, error.status]).toEqual(['card_declined', 402]);
    const open = await retrieveCheckoutSession(ctx, secret, { id: created.id });
    expect(open.status).toBe('open');
    expect(await retrievePaymentFlow(ctx, secret, { id: open.payment_flow! })).toMatchObject({ status: 'requires_payment_method', last_payment_error: { code: 'card_declined' } });
    // The hosted page charges what the session shows: its flow's amount cannot be changed apart.
    const drift = await rejection(updatePaymentFlow(ctx, secret, { id: open.payment_flow!, amount: 9000 }));
    expect([drift.code, drift.param]).toEqual(['invalid_status', 'amount']);
    const completed = await completeCheckoutSession(ctx, browser, { id: created.id, payment_method_type: 'paypay' });
    expect(completed).toMatchObject({ status: 'complete', payment_flow: open.payment_flow });
    expect(await retrievePaymentFlow(ctx, secret, { id: open.payment_flow! })).toMatchObject({ amount: created.amount_total });
    expect((await db.selectFrom('payment_flows').select('payment_flow_id').execute()).length).toBe(1);
  });

  it('a session past its 24 hours cannot be completed, even before the job marks it; expire ends an open session', async () => {
    const late = await session();
    ctx.clock.set(new Date('2027-01-02T00:00:00Z'));
    const tok = await token('visa');
    await expectRefused('expired', () => completeCheckoutSession(ctx, browser, { id: late.id, payment_method: tok }), 'invalid_status', undefined, snapshot);
    ctx.clock.set(new Date('2027-01-01T06:00:00Z'));
    const other = await session();
    const expired = await expireCheckoutSession(ctx, secret, { id: other.id });
    expect(expired).toMatchObject({ status: 'expired', url: null });
    expect((await listEvents(db, ACCOUNT, { resourceId: other.id })).map((e) => e.type)).toEqual(['checkout.session.expired']);
    await expectRefused('expire twice', () => expireCheckoutSession(ctx, secret, { id: other.id }), 'invalid_status', undefined, snapshot);
  });

  it('validates at the boundary: line items, prices, total, URLs, mode, nested metadata — nothing is created', async () => {
    const price = await createPrice(ctx, secret, { unit_amount: 10 });
    const base = { line_items: [{ price: price.id, quantity: 5 }], success_url: 'https://shop.test/ok' };
    await expectRefused('no line items', () => createCheckoutSession(ctx, secret, { success_url: 'https://shop.test/ok' }), 'missing_param', 'line_items', snapshot);
    await expectRefused('unknown price', () => createCheckoutSession(ctx, secret, { ...base, line_items: [{ price: 'price_nope', quantity: 1 }] }), 'invalid_id', 'line_items[0][price]', snapshot);
    await expectRefused('quantity', () => createCheckoutSession(ctx, secret, { ...base, line_items: [{ price: price.id, quantity: 0 }] }), 'invalid_param_key', 'line_items[0][quantity]', snapshot);
    await expectRefused('total below 50 yen', () => createCheckoutSession(ctx, secret, { ...base, line_items: [{ price: price.id, quantity: 4 }] }), 'invalid_amount', 'line_items', snapshot);
    await expectRefused('no success_url', () => createCheckoutSession(ctx, secret, { line_items: base.line_items }), 'missing_param', 'success_url', snapshot);
    await expectRefused('bad success_url', () => createCheckoutSession(ctx, secret, { ...base, success_url: 'shop/ok' }), 'invalid_param_key', 'success_url', snapshot);
    await expectRefused('mode', () => createCheckoutSession(ctx, secret, { ...base, mode: 'subscription' }), 'invalid_param_key', 'mode', snapshot);
    await expectRefused('nested metadata', () => createCheckoutSession(ctx, secret, { ...base, payment_flow_data: { metadata: { k: { x: 1 } } } }), 'invalid_metadata_value', 'payment_flow_data[metadata][k]', snapshot);
    expect((await createCheckoutSession(ctx, secret, base)).amount_total).toBe(50);
  });

  it('a paid session never expires: flows confirmed in the browser whose buyer never returned complete their sessions when the expiry slot passes; a money-less session still expires', async () => {
    // Created at 2027-01-01T00:00:00Z: all expire at 2027-01-02T00:00:00Z.
    const paid = await session();
    const held = await session({ payment_flow_data: { capture_method: 'manual', metadata: {} } });
    const unpaid = await session();
    const byMerchant = await session();
    // The hosted page makes each flow; the browser confirms it with the client secret (v2 §4.8); the buyer never comes back.
    const confirmInBrowser = async (id: string, card: TestCardName) => {
      const flow = (await openHostedSession(ctx, id)).flow!;
      return confirmPaymentFlow(ctx, browser, { id: flow.payment_flow_id, client_secret: flow.client_secret, payment_method: await token(card), return_url: 'https://shop.test/back' });
    };
    expect((await confirmInBrowser(paid.id, 'visa')).status).toBe('succeeded');
    expect((await confirmInBrowser(held.id, 'mastercard')).status).toBe('requires_capture');
    expect((await confirmInBrowser(byMerchant.id, 'visa')).status).toBe('succeeded');
    const unpaidFlow = (await openHostedSession(ctx, unpaid.id)).flow!;
    expect((await retrieveCheckoutSession(ctx, secret, { id: paid.id })).status).toBe('open');
    // The merchant's expire of a paid session completes it (a paid session never expires).
    expect(await expireCheckoutSession(ctx, secret, { id: byMerchant.id })).toMatchObject({ status: 'complete', completed_at: '2027-01-01T00:00:00Z', redirect_url: `https://shop.test/thanks?session_id=${byMerchant.id}` });
    const slot = new Date('2027-01-02T01:00:00Z');
    const run = testContext(database.store, { seed: 501, at: slot });
    const outcome = await new Scheduler(run, [checkoutSessionExpiryJob], { owner: 'test-expiry' }).runSlot(checkoutSessionExpiryJob.name, slot);
    expect(outcome).toMatchObject({ status: 'succeeded', counts: { expired: 1, batches: 1 } });
    for (const id of [paid.id, held.id]) {
      expect(await retrieveCheckoutSession(ctx, secret, { id })).toMatchObject({ status: 'complete', completed_at: '2027-01-02T00:00:00Z', url: null });
      expect((await listEvents(db, ACCOUNT, { resourceId: id })).map((e) => [e.type, e.data.status])).toEqual([['checkout.session.completed', 'complete']]);
    }
    expect(await retrievePaymentFlow(ctx, secret, { id: (await retrieveCheckoutSession(ctx, secret, { id: held.id })).payment_flow! })).toMatchObject({ status: 'requires_capture', amount_capturable: 3200 });
    expect(await retrieveCheckoutSession(ctx, secret, { id: unpaid.id })).toMatchObject({ status: 'expired' });
    expect(await retrievePaymentFlow(ctx, secret, { id: unpaidFlow.payment_flow_id })).toMatchObject({ status: 'canceled', cancellation_reason: 'abandoned' });
    expect((await listEvents(db, ACCOUNT, { type: 'checkout.session.completed' })).map((e) => e.data.id).sort()).toEqual([paid.id, held.id, byMerchant.id].sort());
    expect((await listEvents(db, ACCOUNT, { type: 'checkout.session.expired' })).map((e) => e.data.id)).toEqual([unpaid.id]);
    // The buyer comes back late: the session is complete already; nothing is paid or completed twice.
    expect((await rejection(completeCheckoutSession(ctx, browser, { id: paid.id, payment_method: await token('visa') }))).code).toBe('invalid_status');
    expect((await listEvents(db, ACCOUNT, { type: 'checkout.session.completed' })).length).toBe(3);
  });

  it('is reachable through the operation registry', async () => {
    const price = (await runOperation(ctx, secret, 'prices.create', { unit_amount: 100 })) as { id: string };
    const created = (await runOperation(ctx, secret, 'checkout.sessions.create', { line_items: [{ price: price.id, quantity: 1 }], success_url: 'https://shop.test/ok' })) as { id: string };
    expect(await runOperation(ctx, browser, 'checkout.sessions.complete', { id: created.id, payment_method: await token('visa') })).toMatchObject({ status: 'complete' });
  });
});

describe('payment method configurations: display rules 1–6 of v2 §4.5', () => {
  async function defaults(caller: Caller) {
    return (await listPaymentMethodConfigurations(ctx, caller, {})).data[0]!;
  }
  const values = (config: { card: { display_preference: { value: string } }; paypay: { display_preference: { value: string } }; apple_pay: { display_preference: { value: string } } }) =>
    [config.card.display_preference.value, config.paypay.display_preference.value, config.apple_pay.display_preference.value];

  it('one default configuration per mode, pmc_, all preferences none; `available` is true exactly when value is on', async () => {
    const test = await defaults(secret);
    expect(test).toMatchObject({ object: 'payment_method_configuration', livemode: false, active: true, is_default: true });
    expect(test.id).toMatch(/^pmc_/);
    expect(test.card).toEqual({ available: true, display_preference: { preference: 'none', value: 'on' } });
    expect(await defaults(secret)).toEqual(test);
    // Rule 6: "test and live settings are separate".
    const liveConfig = await defaults(live);
    expect(liveConfig.id).not.toBe(test.id);
    await expectRefused('cross-mode id', () => retrievePaymentMethodConfiguration(ctx, live, { id: test.id }), 'invalid_id', 'id', snapshot);
    for (const config of [test, liveConfig]) {
      for (const method of ['card', 'paypay', 'apple_pay'] as const) expect(config[method].available).toBe(config[method].display_preference.value === 'on');
    }
  });

  it('rule 1: off is never shown; rule 2: on and none are shown when usable (none is not off)', async () => {
    const config = await defaults(live);
    await setPaymentMethodCapabilities(ctx, { accountId: ACCOUNT, livemode: true }, { paypayUsable: true });
    expect(values(await retrievePaymentMethodConfiguration(ctx, live, { id: config.id }))).toEqual(['on', 'on', 'on']);
    const off = await updatePaymentMethodConfiguration(ctx, live, { id: config.id, paypay: { display_preference: { preference: 'off' } }, apple_pay: { display_preference: { preference: 'off' } } });
    expect(values(off)).toEqual(['on', 'off', 'off']);
    expect(off.paypay).toEqual({ available: false, display_preference: { preference: 'off', value: 'off' } });
    const on = await updatePaymentMethodConfiguration(ctx, live, { id: config.id, paypay: { display_preference: { preference: 'on' } } });
    // "Methods not sent are unchanged": apple_pay stays off.
    expect(on.paypay.display_preference).toEqual({ preference: 'on', value: 'on' });
    expect(on.apple_pay.display_preference).toEqual({ preference: 'off', value: 'off' });
  });

  it('rule 3: usability — card needs a usable brand, apple_pay one of its three brands, paypay the account capability (live mode)', async () => {
    const config = await defaults(live);
    const onAll = { id: config.id, paypay: { display_preference: { preference: 'on' } }, apple_pay: { display_preference: { preference: 'on' } } };
    await updatePaymentMethodConfiguration(ctx, live, onAll);
    // PayPay not enabled for the account: hidden although preference is on.
    expect(values(await retrievePaymentMethodConfiguration(ctx, live, { id: config.id }))).toEqual(['on', 'off', 'on']);
    await setPaymentMethodCapabilities(ctx, { accountId: ACCOUNT, livemode: true }, { usableCardBrands: ['JCB', 'Diners Club'] });
    // Cards are usable (JCB), but none of Apple Pay's three brands is.
    expect(values(await retrievePaymentMethodConfiguration(ctx, live, { id: config.id }))).toEqual(['on', 'off', 'off']);
    await setPaymentMethodCapabilities(ctx, { accountId: ACCOUNT, livemode: true }, { usableCardBrands: [] });
    // No usable brand: card itself cannot be shown, whatever its preference (rule 4: computed).
    expect(values(await retrievePaymentMethodConfiguration(ctx, live, { id: config.id }))).toEqual(['off', 'off', 'off']);
  });

  it('rule 4: card visibility is computed automatically; card cannot be hidden by setting off (refused, nothing changes)', async () => {
    const config = await defaults(live);
    await expectRefused('card off', () => updatePaymentMethodConfiguration(ctx, live, { id: config.id, card: { display_preference: { preference: 'off' } } }), 'no_allowed_param', 'card[display_preference][preference]', snapshot);
    const on = await updatePaymentMethodConfiguration(ctx, live, { id: config.id, card: { display_preference: { preference: 'on' } } });
    expect(on.card).toEqual({ available: true, display_preference: { preference: 'on', value: 'on' } });
    await expectRefused('bad preference', () => updatePaymentMethodConfiguration(ctx, live, { id: config.id, paypay: { display_preference: { preference: 'maybe' } } }), 'invalid_param_key', 'paypay[display_preference][preference]', snapshot);
    await expectRefused('unknown method', () => updatePaymentMethodConfiguration(ctx, live, { id: config.id, konbini: {} }), 'invalid_param_key', 'konbini', snapshot);
  });

  it('rule 5: in test mode usability is not evaluated — everything except off is shown', async () => {
    const config = await defaults(secret);
    await setPaymentMethodCapabilities(ctx, { accountId: ACCOUNT, livemode: false }, { usableCardBrands: [], paypayUsable: false });
    expect(values(await retrievePaymentMethodConfiguration(ctx, secret, { id: config.id }))).toEqual(['on', 'on', 'on']);
    const updated = await updatePaymentMethodConfiguration(ctx, secret, { id: config.id, paypay: { display_preference: { preference: 'off' } } });
    expect(values(updated)).toEqual(['on', 'off', 'on']);
  });

  it('rule 6: a change in test mode leaves the live configuration as it was', async () => {
    const test = await defaults(secret);
    const liveBefore = await defaults(live);
    await updatePaymentMethodConfiguration(ctx, secret, { id: test.id, apple_pay: { display_preference: { preference: 'off' } } });
    expect(await retrievePaymentMethodConfiguration(ctx, live, { id: liveBefore.id })).toEqual(liveBefore);
  });
});

describe('checkout sessions: update, list, line items', () => {
  it('update merges metadata (v2 §2.6 rules 3–5) and writes no event; refused updates change nothing', async () => {
    const created = await session();
    const events = (await listEvents(db, ACCOUNT)).length;
    const updated = await runOperation(ctx, secret, 'checkout.sessions.update', { id: created.id, metadata: { cart: '', note: 'gift', n: 2 } });
    expect((updated as { metadata: unknown }).metadata).toEqual({ note: 'gift', n: 2 });
    expect((await retrieveCheckoutSession(ctx, secret, { id: created.id })).metadata).toEqual({ note: 'gift', n: 2 });
    expect((await listEvents(db, ACCOUNT)).length).toBe(events);
    const many = Object.fromEntries(Array.from({ length: 19 }, (_, i) => [`k${i}`, i]));
    await expectRefused('too many keys', () => runOperation(ctx, secret, 'checkout.sessions.update', { id: created.id, metadata: many }), 'too_many_metadata_keys', 'metadata', snapshot);
    await expectRefused('unknown', () => runOperation(ctx, secret, 'checkout.sessions.update', { id: 'cs_nope', metadata: {} }), 'invalid_id', 'id', snapshot);
    await expectRefused('success_url', () => runOperation(ctx, secret, 'checkout.sessions.update', { id: created.id, success_url: 'https://x.test' }), 'invalid_param_key', 'success_url', snapshot);
  });

  it('lists sessions newest first by status with cursors; line items in order with cursors both ways', async () => {
    const first = await session();
    ctx.clock.set(new Date(ctx.clock.now().getTime() + 1000));
    const second = await session();
    await expireCheckoutSession(ctx, secret, { id: first.id });
    const all = (await runOperation(ctx, secret, 'checkout.sessions.list', {})) as { url: string; data: { id: string; line_items: { data: unknown[] } }[] };
    expect([all.url, all.data.map((s) => s.id)]).toEqual(['/v2/checkout/sessions', [second.id, first.id]]);
    expect(all.data[0]!.line_items.data).toHaveLength(2);
    const open = (await runOperation(ctx, secret, 'checkout.sessions.list', { status: 'open' })) as { data: { id: string }[] };
    expect(open.data.map((s) => s.id)).toEqual([second.id]);
    const after = (await runOperation(ctx, secret, 'checkout.sessions.list', { starting_after: second.id })) as { data: { id: string }[] };
    expect(after.data.map((s) => s.id)).toEqual([first.id]);
    expect((await rejection(runOperation(ctx, secret, 'checkout.sessions.list', { status: 'paid' }))).param).toBe('status');
    expect((await rejection(runOperation(ctx, secret, 'checkout.sessions.list', { starting_after: 'cs_nope' }))).param).toBe('starting_after');

    type Items = { url: string; has_more: boolean; data: { id: string; price_id: string; quantity: number; amount_total: number }[] };
    const items = (await runOperation(ctx, secret, 'checkout.sessions.list_line_items', { id: second.id })) as Items;
    expect(items.url).toBe(`/v2/checkout/sessions/${second.id}/line_items`);
    expect(items.data.map((i) => [i.id, i.quantity, i.amount_total])).toEqual([
      [`${second.id}_li_0`, 2, 2400],
      [`${second.id}_li_1`, 1, 800],
    ]);
    const page1 = (await runOperation(ctx, secret, 'checkout.sessions.list_line_items', { id: second.id, limit: 1 })) as Items;
    expect([page1.data.map((i) => i.id), page1.has_more]).toEqual([[`${second.id}_li_0`], true]);
    const page2 = (await runOperation(ctx, secret, 'checkout.sessions.list_line_items', { id: second.id, limit: 1, starting_after: `${second.id}_li_0` })) as Items;
    expect([page2.data.map((i) => i.id), page2.has_more]).toEqual([[`${second.id}_li_1`], false]);
    const back = (await runOperation(ctx, secret, 'checkout.sessions.list_line_items', { id: second.id, ending_before: `${second.id}_li_1` })) as Items;
    expect([back.data.map((i) => i.id), back.has_more]).toEqual([[`${second.id}_li_0`], false]);
    expect((await rejection(runOperation(ctx, secret, 'checkout.sessions.list_line_items', { id: second.id, starting_after: 'li_x' }))).param).toBe('starting_after');
  });
});
