import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { checkoutSessionExpiryJob } from '../../jobs/checkout-session-expiry';
import { ALL_JOBS } from '../../jobs/index';
import { paymentFlowExpiryJob } from '../../jobs/payment-flow-expiry';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { type CheckoutSessionObject } from '../../src/checkout/checkout-sessions';
import { decodeCreateToken } from '../../src/api/v1/tokens';
import { createToken } from '../../src/customers/tokens';
import type { Database } from '../../src/db/schema';
import type { Context } from '../../src/engine/context';
import type { JobDefinition } from '../../src/engine/job';
import { Scheduler } from '../../src/engine/scheduler';
import { listEvents } from '../../src/events/outbox';
import type { PriceObject } from '../../src/prices/prices';
import { simulatedCardNetwork, type CardNetwork, type SettlementRequest } from '../../src/processor/card-network';
import { cardFingerprint, TEST_CARDS, type TestCardName } from '../../src/processor/test-cards';
import { createTestDatabase, isPostgres, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { createPaymentFlow, confirmPaymentFlow, capturePaymentFlow } from '../support/payment-flows';
import { rejection } from '../support/rejections';
import { v2Operation } from '../support/operations';
import type { PaymentFlowObject } from '../../src/payment-flows/payment-flow-object';

const retrievePaymentFlow = v2Operation<PaymentFlowObject>('payment_flows.retrieve');
const completeCheckoutSession = v2Operation<CheckoutSessionObject>('checkout.sessions.complete');
const createCheckoutSession = v2Operation<CheckoutSessionObject>('checkout.sessions.create');
const retrieveCheckoutSession = v2Operation<CheckoutSessionObject>('checkout.sessions.retrieve');

const createPrice = v2Operation<PriceObject>('prices.create');

const ACCOUNT = 'acct_flowjobs';
const secret: Caller = { accountId: ACCOUNT, livemode: false, kind: 'secret' };
const browser: Caller = { accountId: ACCOUNT, livemode: false, kind: 'public' };
const DAY = 24 * 60 * 60 * 1000;
const t = (iso: string): Date => new Date(iso);
const iso = (at: Date): string => at.toISOString().replace('.000Z', 'Z');

let database: TestDatabase;
let db: Kysely<Database>;
let ctx: ReturnType<typeof testContext>;

beforeAll(async () => {
  database = await createTestDatabase();
  db = database.store.db;
  await createAccount(testContext(database.store), { name: 'Flow Jobs Shop', id: ACCOUNT });
});
afterAll(async () => database?.drop());
beforeEach(async () => {
  await sql`TRUNCATE payment_flows, checkout_sessions, checkout_session_line_items, prices, charges, tokens, events, job_runs, job_run_groups, job_schedule`.execute(db);
  ctx = testContext(database.store, { seed: 21 });
});

/** A card network that remembers every release it was asked for. */
function countingNetwork(): CardNetwork & { released: SettlementRequest[] } {
  const inner = simulatedCardNetwork();
  const released: SettlementRequest[] = [];
  return {
    ...inner,
    released,
    async release(requests) {
      released.push(...requests);
      return inner.release(requests);
    },
  };
}

let runs = 0;
/** Runs one slot of the job through the scheduler, with the clock at `now` (default: the slot). */
async function runSlot(job: JobDefinition, slot: Date, options: { now?: Date; batchSize?: number; processor?: CardNetwork; store?: TestDatabase['store'] } = {}) {
  runs += 1;
  const base = testContext(options.store ?? database.store, { at: options.now ?? slot, seed: 500 + runs, config: options.batchSize ? { batchSize: options.batchSize } : {} });
  const runCtx: Context = options.processor ? { ...base, processor: options.processor } : base;
  const outcome = await new Scheduler(runCtx, [job], { owner: `test-${runs}` }).runSlot(job.name, slot);
  expect(outcome.status, outcome.status === 'failed' ? outcome.error : '').toBe('succeeded');
  return outcome.status === 'succeeded' ? outcome.counts : {};
}

async function token(card: TestCardName): Promise<string> {
  return (await createToken(ctx, browser, decodeCreateToken({ card: { number: TEST_CARDS[card].number, exp_month: 12, exp_year: 2030 } }))).id;
}

/** A manual flow authorized at `at` with the card or PayPay. */
async function heldAt(at: Date, amount: number, method: TestCardName | 'paypay' = 'visa') {
  ctx.clock.set(at);
  const flow = await createPaymentFlow(ctx, secret, { amount, capture_method: 'manual', payment_method_types: ['card', 'paypay'] });
  const payment = method === 'paypay' ? { payment_method_type: 'paypay' } : { payment_method: await token(method) };
  return confirmPaymentFlow(ctx, browser, { id: flow.id, client_secret: flow.client_secret, ...payment });
}

const eventsOf = async (id: string) => (await listEvents(db, ACCOUNT, { resourceId: id })).map((e) => ({ type: e.type, at: iso(e.createdAt) }));

describe('payment_flows.expire_holds (service rules §3: "A hold that lapses cancels the flow with reason expired")', () => {
  it('is registered after the existing jobs and runs every minute', () => {
    const names = ALL_JOBS.map((job) => job.name);
    expect(names).toContain('payment_flows.expire_holds');
    expect(names).toContain('checkout_sessions.expire');
    expect(names.indexOf('payment_flows.expire_holds')).toBeGreaterThan(names.indexOf('subscriptions.renew'));
    expect(paymentFlowExpiryJob.schedule).toBe('* * * * *');
    expect(checkoutSessionExpiryJob.schedule).toBe('* * * * *');
  });

  it('cancels each lapsed flow at its own capture_before (a late slot gives the same rows), releasing the hold; not-yet-due flows stay', async () => {
    const a = await heldAt(t('2027-01-01T00:00:10Z'), 1000); // domestic card: 7 days
    const b = await heldAt(t('2027-01-01T03:30:00Z'), 2000, 'overseas'); // overseas: 5 days
    const c = await heldAt(t('2027-01-01T05:00:00Z'), 3000, 'paypay'); // PayPay: 30 days
    const network = countingNetwork();
    // Far later than both lapses: one late slot covering days of due work.
    const counts = await runSlot(paymentFlowExpiryJob, t('2027-01-20T00:00:00Z'), { processor: network });
    expect(counts).toEqual({ canceled: 2, remainder_released: 0, released: 2, batches: 1 });
    expect(await retrievePaymentFlow(ctx, secret, { id: a.id })).toMatchObject({ status: 'canceled', cancellation_reason: 'expired', amount_capturable: 0, canceled_at: a.capture_before, updated_at: a.capture_before });
    expect(await retrievePaymentFlow(ctx, secret, { id: b.id })).toMatchObject({ status: 'canceled', cancellation_reason: 'expired', canceled_at: '2027-01-06T03:30:00Z' });
    expect((await retrievePaymentFlow(ctx, secret, { id: c.id })).status).toBe('requires_capture');
    // The network was asked to release each hold once, at the hold's own lapse instant.
    expect(network.released.map((r) => [r.reference, r.amount, iso(r.at)]).sort()).toEqual(
      [
        [a.id, 1000, a.capture_before],
        [b.id, 2000, b.capture_before],
      ].sort(),
    );
    expect((await eventsOf(b.id)).at(-1)).toEqual({ type: 'payment_flow.canceled', at: '2027-01-06T03:30:00Z' });
    // Capture after the job ended the flow: wrong state.
    expect((await rejection(capturePaymentFlow(ctx, secret, { id: a.id }))).code).toBe('invalid_status');
  });

  it('runs once per item: the same slot again, or a later one, releases nothing twice', async () => {
    const a = await heldAt(t('2027-01-01T00:00:00Z'), 1000);
    const slot = t('2027-01-08T00:00:00Z');
    const network = countingNetwork();
    expect(await runSlot(paymentFlowExpiryJob, slot, { processor: network })).toMatchObject({ canceled: 1 });
    expect(await runSlot(paymentFlowExpiryJob, slot, { now: t('2027-01-08T00:09:00Z'), processor: network })).toEqual({ canceled: 0, remainder_released: 0, released: 0, batches: 0 });
    expect(await runSlot(paymentFlowExpiryJob, t('2027-01-09T00:00:00Z'), { processor: network })).toMatchObject({ canceled: 0, batches: 0 });
    expect(network.released).toHaveLength(1);
    expect((await eventsOf(a.id)).filter((e) => e.type === 'payment_flow.canceled')).toHaveLength(1);
  });

  it('the flow is due at capture_before: the slot at that instant takes it, the one a minute before does not', async () => {
    const a = await heldAt(t('2027-01-01T00:00:00Z'), 1000);
    expect(a.capture_before).toBe('2027-01-08T00:00:00Z');
    expect(await runSlot(paymentFlowExpiryJob, t('2027-01-07T23:59:00Z'))).toMatchObject({ canceled: 0, batches: 0 });
    expect(await runSlot(paymentFlowExpiryJob, t('2027-01-08T00:00:00Z'))).toMatchObject({ canceled: 1 });
  });

  it('a partially captured flow keeps what it received: the remainder is released and the flow succeeds', async () => {
    const a = await heldAt(t('2027-01-01T00:00:00Z'), 10_000);
    await capturePaymentFlow(ctx, secret, { id: a.id, amount_to_capture: 4000 });
    const network = countingNetwork();
    expect(await runSlot(paymentFlowExpiryJob, t('2027-01-08T00:01:00Z'), { processor: network })).toEqual({ canceled: 0, remainder_released: 1, released: 1, batches: 1 });
    expect(network.released.map((r) => r.amount)).toEqual([6000]);
    expect(await retrievePaymentFlow(ctx, secret, { id: a.id })).toMatchObject({ status: 'succeeded', amount_received: 4000, amount_capturable: 0, cancellation_reason: null });
    expect((await eventsOf(a.id)).at(-1)).toEqual({ type: 'payment_flow.succeeded', at: '2027-01-08T00:00:00Z' });
  });

  it('nextDueAt is the earliest capture_before strictly after the instant, null when nothing is held', async () => {
    expect(await paymentFlowExpiryJob.nextDueAt!(ctx, REFERENCE_INSTANT)).toBeNull();
    const a = await heldAt(t('2027-01-01T00:00:00Z'), 1000);
    await heldAt(t('2027-01-02T00:00:00Z'), 1000);
    expect(await paymentFlowExpiryJob.nextDueAt!(ctx, REFERENCE_INSTANT)).toEqual(t(a.capture_before!));
    expect(await paymentFlowExpiryJob.nextDueAt!(ctx, t(a.capture_before!))).toEqual(t('2027-01-09T00:00:00Z'));
  });

  it.runIf(isPostgres())('two workers on two connections, racing over many batches, release every hold exactly once', async () => {
    const rows = Array.from({ length: 300 }, (_, i) => {
      const authorized = new Date(REFERENCE_INSTANT.getTime() + i * 1000);
      return {
        account_id: ACCOUNT,
        livemode: false,
        payment_flow_id: `pfw_race_${String(i).padStart(4, '0')}`,
        status: 'requires_capture' as const,
        amount: 1000 + i,
        capture_method: 'manual' as const,
        payment_method_types: JSON.stringify(['card']),
        request_extended_authorization: null,
        client_secret: `pfw_race_${i}_secret`,
        customer_id: null,
        description: null,
        payment_method_type: 'card' as const,
        payment_method_id: `tok_race_${i}`,
        card_id: `car_race_${i}`,
        card_fingerprint: cardFingerprint(TEST_CARDS.visa.number),
        card_brand: 'Visa',
        card_last4: '4242',
        card_exp_month: 12,
        card_exp_year: 2030,
        card_funding: 'credit',
        card_issuer: 'domestic',
        authorization_code: '123456',
        authorized_at: authorized,
        capture_before: new Date(authorized.getTime() + 7 * DAY),
        amount_capturable: 1000 + i,
        three_d_secure_status: null,
        next_action: null,
        last_payment_error: null,
        cancellation_reason: null,
        canceled_at: null,
        checkout_session_id: null,
        metadata: '{}',
        created_at: authorized,
        updated_at: authorized,
      };
    });
    await db.insertInto('payment_flows').values(rows).execute();
    const other = await database.openAnother();
    const network = countingNetwork();
    // Two different slots, both after every lapse: both claims succeed, so only row locks keep them apart.
    const [first, second] = await Promise.all([
      runSlot(paymentFlowExpiryJob, t('2027-01-09T00:00:00Z'), { processor: network, batchSize: 7 }),
      runSlot(paymentFlowExpiryJob, t('2027-01-09T00:01:00Z'), { processor: network, batchSize: 7, store: other }),
    ]);
    expect((first.canceled ?? 0) + (second.canceled ?? 0)).toBe(300);
    expect(network.released).toHaveLength(300);
    expect(new Set(network.released.map((r) => r.reference)).size).toBe(300);
    const canceledEvents = await listEvents(db, ACCOUNT, { type: 'payment_flow.canceled' });
    expect(canceledEvents).toHaveLength(300);
    expect(await db.selectFrom('payment_flows').select('payment_flow_id').where('status', '!=', 'canceled').execute()).toEqual([]);
  });
});

describe('checkout_sessions.expire (service rules §3: "a session expires 24 hours after creation")', () => {
  async function openSession(at: Date) {
    ctx.clock.set(at);
    const price = await createPrice(ctx, secret, { unit_amount: 1500 });
    return createCheckoutSession(ctx, secret, { line_items: [{ price: price.id, quantity: 1 }], success_url: 'https://shop.test/ok?cs={CHECKOUT_SESSION_ID}' });
  }

  it('expires each open session at its own expires_at with checkout.session.expired, once; complete sessions stay', async () => {
    const a = await openSession(t('2027-01-01T00:00:00Z'));
    const b = await openSession(t('2027-01-01T07:15:30Z'));
    const done = await openSession(t('2027-01-01T08:00:00Z'));
    await completeCheckoutSession(ctx, browser, { id: done.id, payment_method: await token('visa') });
    const young = await openSession(t('2027-01-02T06:00:00Z'));
    const slot = t('2027-01-02T10:00:00Z');
    expect(await runSlot(checkoutSessionExpiryJob, slot)).toEqual({ expired: 2, batches: 1 });
    expect(await retrieveCheckoutSession(ctx, secret, { id: a.id })).toMatchObject({ status: 'expired', url: null });
    expect(await eventsOf(b.id)).toEqual([{ type: 'checkout.session.expired', at: '2027-01-02T07:15:30Z' }]);
    expect((await retrieveCheckoutSession(ctx, secret, { id: done.id })).status).toBe('complete');
    expect((await retrieveCheckoutSession(ctx, secret, { id: young.id })).status).toBe('open');
    // Once per item: the same slot again changes nothing.
    expect(await runSlot(checkoutSessionExpiryJob, slot, { now: t('2027-01-02T10:05:00Z') })).toEqual({ expired: 0, batches: 0 });
    expect((await listEvents(db, ACCOUNT, { type: 'checkout.session.expired' })).map((e) => e.data.id)).toEqual([a.id, b.id]);
    expect(await checkoutSessionExpiryJob.nextDueAt!(ctx, slot)).toEqual(t('2027-01-03T06:00:00Z'));
  });

  it('the unpaid payment flow of an expired session (a declined attempt) is canceled with reason abandoned', async () => {
    const s = await openSession(t('2027-01-01T00:00:00Z'));
    await rejection(completeCheckoutSession(ctx, browser, { id: s.id, payment_method: await token('declinesOnCharge') }));
    const flowId = (await retrieveCheckoutSession(ctx, secret, { id: s.id })).payment_flow!;
    expect(await runSlot(checkoutSessionExpiryJob, t('2027-01-02T00:00:00Z'))).toMatchObject({ expired: 1 });
    expect(await retrievePaymentFlow(ctx, secret, { id: flowId })).toMatchObject({ status: 'canceled', cancellation_reason: 'abandoned', canceled_at: '2027-01-02T00:00:00Z' });
    expect((await eventsOf(flowId)).at(-1)).toEqual({ type: 'payment_flow.canceled', at: '2027-01-02T00:00:00Z' });
  });
});
