/**
 * Disputes end to end in the engine: the dispute cards of the simulated network,
 * the `disputes.open` job (due instant, amount captured minus refunded, exactly once, late slots,
 * nextDueAt), `dispute.created`, and the term close booking `chargeback`,
 * `chargeback_fee_offset`, `chargeback_platform_fee_offset` with conserved statements.
 */
import { decodeCreateToken } from '../../src/api/v1/tokens';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disputeOpeningJob } from '../../jobs/dispute-opening';
import { termCloseJob } from '../../jobs/term-close';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { createToken } from '../../src/customers/tokens';
import { nextDisputeDueAt } from '../../src/disputes/disputes';
import type { JobDefinition } from '../../src/engine/job';
import { Scheduler } from '../../src/engine/scheduler';
import { listEvents } from '../../src/events/outbox';
import { runOperation } from '../../src/api/operations';
import { TEST_CARDS, type TestCardName } from '../../src/processor/test-cards';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';

type Json = Record<string, unknown> & { id: string };
type Statement = Json & { net: number; type: string; tenant_id: string | null; items: { subject: string; amount: number }[] };

let database: TestDatabase;
let ctx: ReturnType<typeof testContext>;

/** An instant written in Japan time. */
const jst = (local: string): Date => new Date(`${local}+09:00`);
const DAY = 24 * 60 * 60 * 1000;

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 90, at: jst('2027-01-01T09:00:00') });
});
afterAll(async () => database?.drop());

async function account(name: string): Promise<Caller> {
  const { account: created } = await createAccount(ctx, { name, id: `acct_${name}` });
  return { accountId: created.id, livemode: false, kind: 'secret' };
}

async function op<T = Json>(caller: Caller, name: string, params?: unknown): Promise<T> {
  return (await runOperation(ctx, caller, name, params)) as T;
}

async function token(caller: Caller, card: TestCardName): Promise<string> {
  return (await createToken(ctx, { ...caller, kind: 'public' }, decodeCreateToken({ card: { number: TEST_CARDS[card].number, exp_month: 12, exp_year: 2030 } }))).id;
}

/** A v1 charge captured at `at` with a token of the card. */
async function charge(caller: Caller, card: TestCardName, amount: number, at: Date, extra: Record<string, unknown> = {}): Promise<string> {
  ctx.clock.set(at);
  return (await op(caller, 'charges.create', { amount, currency: 'jpy', card: await token(caller, card), ...extra })).id;
}

async function refund(caller: Caller, chargeId: string, amount: number, at: Date): Promise<void> {
  ctx.clock.set(at);
  await op(caller, 'charges.refund', { id: chargeId, amount });
}

let runs = 0;
/** Runs one slot of a job through the scheduler, with the clock at the slot (or later). */
async function runSlot(job: JobDefinition, slot: Date, options: { batchSize?: number } = {}): Promise<Record<string, number>> {
  runs += 1;
  const runCtx = testContext(database.store, { at: slot, seed: 900 + runs, config: options.batchSize ? { batchSize: options.batchSize } : {} });
  const outcome = await new Scheduler(runCtx, [job], { owner: `test-${runs}` }).runSlot(job.name, slot);
  expect(outcome.status, outcome.status === 'failed' ? outcome.error : '').toBe('succeeded');
  return outcome.status === 'succeeded' ? { ...outcome.counts } : {};
}

async function disputes(caller: Caller, params: Record<string, unknown> = {}): Promise<Json[]> {
  return (await op<{ data: Json[] }>(caller, 'payment_disputes.list', { limit: 100, ...params })).data;
}

async function salesStatements(caller: Caller): Promise<Statement[]> {
  return (await op<{ data: Statement[] }>(caller, 'statements.list', { limit: 100 })).data.filter((s) => s.type === 'sales');
}
const itemsOf = (s: Statement | undefined) => Object.fromEntries((s?.items ?? []).map((i) => [i.subject, i.amount]));

describe('disputes.open', () => {
  it('opens a dispute for a v1 charge of a dispute card at its own instant, for what was captured minus refunded, once', async () => {
    const caller = await account('dispute_v1');
    const capturedAt = jst('2027-01-10T10:00:00');
    const disputed = await charge(caller, 'disputedFraudulent', 10_000, capturedAt);
    await charge(caller, 'visa', 5_000, capturedAt);
    const refundedInFull = await charge(caller, 'disputedFraudulent', 2_000, capturedAt);
    await refund(caller, disputed, 3_000, jst('2027-01-11T10:00:00'));
    await refund(caller, refundedInFull, 2_000, jst('2027-01-11T10:00:00'));
    const due = new Date(capturedAt.getTime() + 3 * DAY);

    // The job knows when it has work: the dispute instant (the simulator jumps there).
    expect(await nextDisputeDueAt(ctx.db, capturedAt)).toEqual(due);
    expect(await runSlot(disputeOpeningJob, new Date(due.getTime() - 60_000))).toMatchObject({ opened: 0, skipped: 0, batches: 0 });
    expect(await disputes(caller)).toEqual([]);

    expect(await runSlot(disputeOpeningJob, due)).toMatchObject({ opened: 1, skipped: 1, batches: 1 });
    const [dispute, ...others] = await disputes(caller);
    expect(others).toEqual([]);
    // The whole object as the SDK reads it is checked in test/http/v2-disputes.test.ts.
    expect(dispute).toMatchObject({ id: expect.stringMatching(/^pydp_[0-9a-f]{30}$/), payment_flow_id: null, charge_id: disputed, amount: 7_000, status: 'needs_response', reason: 'fraudulent' });
    expect(dispute).toMatchObject({ due_by: '2027-01-27T01:00:00Z', created_at: '2027-01-13T01:00:00Z', updated_at: '2027-01-13T01:00:00Z' });
    expect(await op(caller, 'payment_disputes.retrieve', { id: dispute!.id })).toEqual(dispute);
    const events = await listEvents(ctx.db, caller.accountId, { resourceId: dispute!.id });
    expect(events.map((e) => ({ type: e.type, version: e.apiVersion, at: e.createdAt, data: e.data }))).toEqual([{ type: 'dispute.created', version: 'v2', at: due, data: dispute }]);

    // Exactly once: later slots (and a replay of the slot) find nothing left; the job idles.
    expect(await runSlot(disputeOpeningJob, new Date(due.getTime() + 60_000))).toMatchObject({ opened: 0, batches: 0 });
    expect(await runSlot(disputeOpeningJob, due)).toMatchObject({ opened: 0, skipped: 0, batches: 0 });
    expect(await disputes(caller)).toHaveLength(1);
    expect(await listEvents(ctx.db, caller.accountId, { type: 'dispute.created' })).toHaveLength(1);
    expect(await nextDisputeDueAt(ctx.db, capturedAt)).toBeNull();
    // The buyer has the rest back by chargeback: it cannot be refunded again.
    ctx.clock.set(new Date(due.getTime() + DAY));
    await expect(op(caller, 'charges.refund', { id: disputed, amount: 100 })).rejects.toMatchObject({ code: 'already_refunded', param: 'id' });

    // The open term counts it live; the term close books the chargeback; Σ items = net, and money in = nets + the service's fees.
    const [open] = (await op<{ data: Json[] }>(caller, 'terms.list', { limit: 100 })).data;
    expect(open).toMatchObject({ closed: false, charge_count: 3, refund_count: 2, dispute_count: 1 });
    expect(await runSlot(termCloseJob, jst('2027-02-01T00:00:00'))).toMatchObject({ terms_closed: 1 });
    const [sales, ...more] = await salesStatements(caller);
    expect(more).toEqual([]);
    expect(itemsOf(sales)).toEqual({
      gross_sales: 17_000,
      fee: -510,
      gross_refund: -5_000,
      refund_fee_offset: 150,
      chargeback: -7_000,
      chargeback_fee_offset: 210,
    });
    expect(sales!.net).toBe(sales!.items.reduce((sum, i) => sum + i.amount, 0));
    // 17,000 in − 5,000 refunded − 7,000 disputed = 5,000 = net 4,850 + the service's 510 − 150 − 210.
    expect(sales!.net).toBe(4_850);
    const [term] = (await op<{ data: Json[] }>(caller, 'terms.list', { limit: 100 })).data.filter((t) => t.closed === true);
    expect(term).toMatchObject({ charge_count: 3, refund_count: 2, dispute_count: 1 });
  });

  it('opens one for a v2 payment flow, dated at its own instant when the slot is late, and lists by flow and status', async () => {
    const caller = await account('dispute_v2');
    const capturedAt = jst('2027-01-05T12:00:00');
    ctx.clock.set(capturedAt);
    const flow = await op(caller, 'payment_flows.create', { amount: 8_000 });
    const paid = await op(caller, 'payment_flows.confirm', { id: flow.id, payment_method: await token(caller, 'disputedNotReceived') });
    expect(paid.status).toBe('succeeded');
    const other = await op(caller, 'payment_flows.create', { amount: 1_000, confirm: true, payment_method: await token(caller, 'visa') });
    expect(other.status).toBe('succeeded');

    // 30 days later, but the worker only runs a day after that: the dispute keeps its own instant.
    const due = new Date(capturedAt.getTime() + 30 * DAY);
    expect(await runSlot(disputeOpeningJob, new Date(due.getTime() + DAY))).toMatchObject({ opened: 1, skipped: 0 });
    const [dispute] = await disputes(caller);
    expect(dispute).toMatchObject({ payment_flow_id: flow.id, amount: 8_000, reason: 'product_not_received', created_at: '2027-02-04T03:00:00Z' });
    expect(await disputes(caller, { payment_flow_id: flow.id })).toEqual([dispute]);
    expect(await disputes(caller, { payment_flow_id: other.id })).toEqual([]);
    expect(await disputes(caller, { status: ['needs_response', 'lost'] })).toEqual([dispute]);
    expect(await disputes(caller, { status: 'lost' })).toEqual([]);
    await expect(op(caller, 'payment_disputes.list', { status: 'won' })).rejects.toMatchObject({ code: 'invalid_querystring', param: 'status' });
    // Nothing of the disputed flow is left to refund; the other flow still refunds.
    ctx.clock.set(new Date(due.getTime() + 2 * DAY));
    await expect(op(caller, 'payment_refunds.create', { payment_flow_id: flow.id, amount: 100 })).rejects.toMatchObject({ code: 'already_refunded', param: 'payment_flow_id' });
    expect(await op(caller, 'payment_refunds.create', { payment_flow_id: other.id, amount: 100 })).toMatchObject({ amount: 100, status: 'succeeded' });
    await expect(op(caller, 'payment_disputes.retrieve', { id: 'pydp_missing' })).rejects.toMatchObject({ code: 'invalid_id', param: 'id' });

    // January closes without it (captured in January, disputed in February); February books it.
    await runSlot(termCloseJob, jst('2027-02-01T00:00:00'));
    await runSlot(termCloseJob, jst('2027-03-01T00:00:00'));
    const [january, february] = (await salesStatements(caller)).reverse();
    expect(itemsOf(january)).toEqual({ gross_sales: 9_000, fee: -270 });
    expect(itemsOf(february)).toEqual({ gross_refund: -100, refund_fee_offset: 3, chargeback: -8_000, chargeback_fee_offset: 240 });
    expect(february!.net).toBe(-7_857);
  });

  it('opens one for a subscription charge too (the bulk charge path writes the dispute instant itself)', async () => {
    const caller = await account('dispute_subscription');
    const subscribedAt = jst('2027-01-12T09:00:00');
    ctx.clock.set(subscribedAt);
    const plan = await op(caller, 'plans.create', { amount: 1_500, currency: 'jpy', interval: 'month' });
    const customer = await op(caller, 'customers.create', { card: await token(caller, 'disputedFraudulent') });
    await op(caller, 'subscriptions.create', { customer: customer.id, plan: plan.id });
    const [first] = (await op<{ data: Json[] }>(caller, 'charges.list', { limit: 10 })).data;
    expect(first).toMatchObject({ amount: 1_500, captured: true });
    expect(await runSlot(disputeOpeningJob, new Date(subscribedAt.getTime() + 3 * DAY))).toMatchObject({ opened: 1 });
    expect(await disputes(caller)).toMatchObject([{ charge_id: first!.id, amount: 1_500, payment_flow_id: null, created_at: '2027-01-15T00:00:00Z' }]);
  });

  it('in platform mode the tenant gives back the amount and gets its platform fee back from the platform', async () => {
    const caller = await account('dispute_platform');
    const ten = (await op(caller, 'tenants.create', { platform_fee_rate: '10.00', payjp_fee_included: false })).id;
    const capturedAt = jst('2027-01-20T10:00:00');
    await charge(caller, 'disputedFraudulent', 10_000, capturedAt, { tenant: ten });
    expect(await runSlot(disputeOpeningJob, new Date(capturedAt.getTime() + 3 * DAY))).toMatchObject({ opened: 1 });
    await runSlot(termCloseJob, jst('2027-02-01T00:00:00'));
    const sales = await salesStatements(caller);
    const tenantSales = sales.find((s) => s.tenant_id === ten);
    const platformSales = sales.find((s) => s.tenant_id === null);
    expect(itemsOf(tenantSales)).toEqual({
      gross_sales: 10_000,
      fee: -300,
      platform_fee: -1_000,
      chargeback: -10_000,
      chargeback_fee_offset: 300,
      chargeback_platform_fee_offset: 1_000,
    });
    expect(itemsOf(platformSales)).toEqual({ platform_fee: 1_000, chargeback_platform_fee_offset: -1_000 });
    expect([tenantSales!.net, platformSales!.net]).toEqual([0, 0]);
  });

  it('two runs at once, one charge per batch: every dispute is opened exactly once', async () => {
    const caller = await account('dispute_race');
    const capturedAt = jst('2027-01-15T10:00:00');
    const charges = [];
    for (let i = 0; i < 6; i += 1) charges.push(await charge(caller, 'disputedFraudulent', 1_000 + i, capturedAt));
    const due = new Date(capturedAt.getTime() + 3 * DAY);
    const [a, b] = await Promise.all([runSlot(disputeOpeningJob, due, { batchSize: 1 }), runSlot(disputeOpeningJob, new Date(due.getTime() + 60_000), { batchSize: 1 })]);
    expect(a!.opened! + b!.opened!).toBe(6);
    const opened = await disputes(caller);
    expect(opened.map((d) => d.charge_id).sort()).toEqual([...charges].sort());
    expect(await listEvents(ctx.db, caller.accountId, { type: 'dispute.created' })).toHaveLength(6);
  });
});
