/**
 * Settlement end to end (service rules §4): fees at capture, terms, the term close with its
 * statements and balances, the balance close, re-runs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { balanceCloseJob } from '../../jobs/balance-close';
import { ALL_JOBS } from '../../jobs/index';
import { termCloseJob } from '../../jobs/term-close';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { Scheduler } from '../../src/engine/scheduler';
import { listEvents } from '../../src/events/outbox';
import { runOperation } from '../../src/api/operations';
import { closeTermBatch } from '../../src/settlement/term-close';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';
import { rejection } from '../support/rejections';
import { captureCharge, refundCharge } from '../support/settlement-seed';

type Json = Record<string, unknown> & { id: string };
type Statement = Json & { net: number; type: string; tenant_id: string | null; items: { subject: string; amount: number; tax_rate: string }[]; balance_id: string; term: Json | null; created: number };
type Balance = Json & { net: number; state: string; closed: boolean; closed_date: string | null; due_date: string | null; owner: string; statements: Statement[] };

let database: TestDatabase;
let ctx: ReturnType<typeof testContext>;

/** An instant written in Japan time. */
const jst = (local: string): Date => new Date(`${local}+09:00`);

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 51, at: jst('2027-01-01T09:00:00') });
});
afterAll(async () => database?.drop());

let seq = 0;
const nextId = (prefix: string): string => `${prefix}_${String((seq += 1)).padStart(6, '0')}`;

async function account(name: string, termCycle: 'monthly' | 'semi_monthly' = 'monthly'): Promise<Caller> {
  const { account: created } = await createAccount(ctx, { name, id: `acct_${name}`, termCycle });
  return { accountId: created.id, livemode: false, kind: 'secret' };
}

async function op<T = Json>(caller: Caller, name: string, params?: unknown): Promise<T> {
  return (await runOperation(ctx, caller, name, params)) as T;
}

async function tenant(caller: Caller, rate: string, included: boolean, extra: Record<string, unknown> = {}): Promise<string> {
  return (await op(caller, 'tenants.create', { platform_fee_rate: rate, payjp_fee_included: included, ...extra })).id;
}

async function charge(caller: Caller, amount: number, at: Date, extra: { tenant?: string; platformFee?: number; feeRate?: string; captured?: number } = {}): Promise<string> {
  const chargeId = nextId('ch_s');
  await captureCharge(ctx.db, ctx, { accountId: caller.accountId, chargeId, amount, at, ...extra });
  return chargeId;
}

async function refund(caller: Caller, chargeId: string, amount: number, at: Date): Promise<string> {
  const refundId = nextId('re_s');
  await refundCharge(ctx.db, ctx, { accountId: caller.accountId, chargeId, refundId, amount, at });
  return refundId;
}

let runs = 0;
/** Runs a slot of a settlement job through the scheduler, with the clock at the slot (or later). */
async function runSlot(job: typeof termCloseJob, slot: Date, now: Date = slot): Promise<Record<string, number>> {
  runs += 1;
  const runCtx = testContext(database.store, { at: now, seed: 500 + runs });
  const outcome = await new Scheduler(runCtx, [job], { owner: 'test' }).runSlot(job.name, slot);
  expect(outcome.status, outcome.status === 'failed' ? outcome.error : '').toBe('succeeded');
  return outcome.status === 'succeeded' ? { ...outcome.counts } : {};
}
const closeTerms = (slot: Date, now?: Date) => runSlot(termCloseJob, slot, now);

async function statements(caller: Caller, params: Record<string, unknown> = {}): Promise<Statement[]> {
  return (await op<{ data: Statement[] }>(caller, 'statements.list', { limit: 100, ...params })).data;
}
async function balances(caller: Caller): Promise<Balance[]> {
  return (await op<{ data: Balance[] }>(caller, 'balances.list', { limit: 100 })).data;
}
const itemsOf = (s: Statement | undefined) => Object.fromEntries((s?.items ?? []).map((i) => [i.subject, i.amount]));
const salesOf = (list: Statement[], tenantId: string | null, title?: string) =>
  list.find((s) => s.type === 'sales' && s.tenant_id === tenantId && (title === undefined || s.title === title));

describe('fees at capture (service rules §4 "Fees", "Platform mode")', () => {
  it('"fee = floor(amount × fee_rate / 100)" and term_id on every captured charge', async () => {
    const caller = await account('fees');
    const id = await charge(caller, 1001, jst('2027-01-10T12:00:00'), { feeRate: '3.30' });
    const row = await ctx.db.selectFrom('charges').selectAll().where('charge_id', '=', id).executeTakeFirstOrThrow();
    // 1001 × 3.30 % = 33.033 → 33
    expect(row.fee).toBe(33);
    expect(row.term_id).toMatch(/^tm_/);
    const term = await op<Json>(caller, 'terms.retrieve', { id: row.term_id });
    expect(term).toMatchObject({ object: 'term', start_at: Math.floor(jst('2027-01-01T00:00:00').getTime() / 1000), end_at: null, closed: false, charge_count: 1 });
  });

  it('refund fee offsets on partial refunds: floor(refunded × fee_rate / 100) and floor(platform_fee × refunded / amount)', async () => {
    const caller = await account('partial');
    const ten = await tenant(caller, '10.00', false);
    const id = await charge(caller, 1001, jst('2027-01-10T12:00:00'), { feeRate: '3.30', tenant: ten });
    const c = await ctx.db.selectFrom('charges').selectAll().where('charge_id', '=', id).executeTakeFirstOrThrow();
    expect([c.fee, c.platform_fee, c.total_platform_fee, c.platform_fee_rate]).toEqual([33, 100, 100, '10.00']);
    const r1 = await refund(caller, id, 333, jst('2027-01-11T12:00:00'));
    const r2 = await refund(caller, id, 668, jst('2027-02-02T12:00:00'));
    const rows = await ctx.db.selectFrom('refunds').selectAll().where('refund_id', 'in', [r1, r2]).orderBy('refund_id').execute();
    // 333 × 3.30 % = 10.989 → 10; 100 × 333 / 1001 = 33.27 → 33; 668 × 3.3 % = 22.04 → 22; 100 × 668 / 1001 = 66.7 → 66
    expect(rows.map((r) => [r.refund_fee_offset, r.refund_platform_fee_offset])).toEqual([
      [10, 33],
      [22, 66],
    ]);
    // Each refund belongs to the term in which it is made.
    expect(rows[0]!.term_id).toBe(c.term_id);
    expect(rows[1]!.term_id).not.toBe(c.term_id);
  });

  it('a smaller capture pays fees on the captured amount only (the released rest is not a refund)', async () => {
    const caller = await account('smallcap');
    const ten = await tenant(caller, '10.00', false);
    const id = await charge(caller, 10_000, jst('2027-01-10T12:00:00'), { tenant: ten, captured: 5_001 });
    const c = await ctx.db.selectFrom('charges').selectAll().where('charge_id', '=', id).executeTakeFirstOrThrow();
    expect([c.fee, c.platform_fee]).toEqual([150, 500]);
  });
});

describe('through the charge operations (the settlement hooks on every capture and refund path)', () => {
  it('charges.create captures with fee and term_id; charges.refund writes the offsets; the close puts both on the statement', async () => {
    const caller = await account('ops_path');
    const token = await op(caller, 'tokens.create', { card: { number: '4242424242424242', exp_month: '12', exp_year: '2035', cvc: '123' } });
    ctx.clock.set(jst('2027-01-12T10:00:00'));
    const created = await op<Json & { term_id: string | null }>(caller, 'charges.create', { amount: 12_345, currency: 'jpy', card: token.id });
    await op(caller, 'charges.refund', { id: created.id, amount: 2_345 });
    const stored = await ctx.db.selectFrom('charges').selectAll().where('charge_id', '=', created.id).executeTakeFirstOrThrow();
    expect([stored.fee, stored.term_id === null]).toEqual([370, false]);
    const refunds = await ctx.db.selectFrom('refunds').selectAll().where('charge_id', '=', created.id).execute();
    expect(refunds.map((r) => [r.amount, r.refund_fee_offset, r.term_id])).toEqual([[2_345, 70, stored.term_id]]);
    expect((await op<Json>(caller, 'charges.retrieve', { id: created.id })).term_id).toBe(stored.term_id);
    await closeTerms(jst('2027-02-01T00:00:00'));
    const [sales] = await statements(caller, { type: 'sales' });
    expect(itemsOf(sales)).toEqual({ gross_sales: 12_345, fee: -370, gross_refund: -2_345, refund_fee_offset: 70 });
  });
});

describe('subscription charges and their pro-rata refunds are settled too', () => {
  it('subscriptions.create charges with fee and term_id; subscriptions.delete with prorate writes the refund offsets', async () => {
    const caller = await account('subs_path');
    ctx.clock.set(jst('2027-01-14T10:00:00'));
    const token = await op(caller, 'tokens.create', { card: { number: '4242424242424242', exp_month: '12', exp_year: '2035', cvc: '123' } });
    const customer = await op(caller, 'customers.create', { card: token.id });
    const plan = await op(caller, 'plans.create', { amount: '3000', currency: 'jpy', interval: 'month' });
    const sub = await op(caller, 'subscriptions.create', { customer: customer.id, plan: plan.id, prorate: 'true' });
    const [charged] = await ctx.db.selectFrom('charges').selectAll().where('account_id', '=', caller.accountId).execute();
    expect([charged!.fee, charged!.term_id]).toEqual([90, expect.stringMatching(/^tm_/)]);
    ctx.clock.set(jst('2027-01-29T10:00:00'));
    await op(caller, 'subscriptions.delete', { id: sub.id, prorate: 'true' });
    const refunds = await ctx.db.selectFrom('refunds').selectAll().where('account_id', '=', caller.accountId).execute();
    expect(refunds.length).toBe(1);
    expect(refunds[0]!.term_id).toBe(charged!.term_id);
    expect(refunds[0]!.refund_fee_offset).toBe(Math.floor((refunds[0]!.amount * 3) / 100));
  });
});

describe('charges.create in platform mode (v1 §4.2 tenant, platform_fee)', () => {
  it('stores the tenant and platform fee; the charge object shows them; an out-of-range platform_fee changes nothing', async () => {
    const caller = await account('ops_platform');
    const ten = await tenant(caller, '10.00', true);
    const card = async () => (await op(caller, 'tokens.create', { card: { number: '4242424242424242', exp_month: '12', exp_year: '2035', cvc: '123' } })).id;
    ctx.clock.set(jst('2027-01-13T10:00:00'));
    const byRate = await op<Json>(caller, 'charges.create', { amount: 10_000, currency: 'jpy', card: await card(), tenant: ten });
    const stored = await op<Json>(caller, 'charges.retrieve', { id: byRate.id });
    expect(stored).toMatchObject({ tenant: ten, platform_fee: 1_000, platform_fee_rate: '10.00', total_platform_fee: 1_000, term_id: expect.stringMatching(/^tm_/) });
    const given = await op<Json>(caller, 'charges.create', { amount: 10_000, currency: 'jpy', card: await card(), tenant: ten, platform_fee: '500' });
    expect(await op<Json>(caller, 'charges.retrieve', { id: given.id })).toMatchObject({ platform_fee: 500, platform_fee_rate: null, total_platform_fee: 500 });
    const token = await card();
    const count = async () => (await ctx.db.selectFrom('charges').select('charge_id').where('account_id', '=', caller.accountId).execute()).length;
    const before = await count();
    // "if the tenant's payjp_fee_included is true, 5% to 100% of amount"
    const error = await rejection(op(caller, 'charges.create', { amount: 10_000, currency: 'jpy', card: token, tenant: ten, platform_fee: 499 }));
    expect([error.code, error.param]).toEqual(['invalid_amount', 'platform_fee']);
    const unknown = await rejection(op(caller, 'charges.create', { amount: 10_000, currency: 'jpy', card: token, tenant: 'ten_unknown' }));
    expect([unknown.code, unknown.param]).toEqual(['invalid_id', 'tenant']);
    expect(await count()).toBe(before);
    // The token was not used up by the refused calls.
    expect((await op<Json>(caller, 'charges.create', { amount: 10_000, currency: 'jpy', card: token })).paid).toBe(true);
  });
});

describe('the worked platform example (service rules §4: amount 10,000, platform rate 10 %, fee 3 %)', () => {
  for (const [included, tenantNet, platformNet] of [
    [false, 8_700, 1_000],
    [true, 9_000, 700],
  ] as const) {
    it(`payjp_fee_included = ${included} → tenant ${tenantNet}, platform ${platformNet}, through to the statements`, async () => {
      const caller = await account(`worked_${included}`);
      const ten = await tenant(caller, '10.00', included);
      const id = await charge(caller, 10_000, jst('2027-01-15T10:00:00'), { tenant: ten });
      const c = await ctx.db.selectFrom('charges').selectAll().where('charge_id', '=', id).executeTakeFirstOrThrow();
      // "total_platform_fee is the platform fee the tenant pays (1,000 in both cases)"
      expect([c.fee, c.platform_fee, c.total_platform_fee]).toEqual([300, 1_000, 1_000]);
      await closeTerms(jst('2027-02-01T00:00:00'));
      const list = await statements(caller);
      const tenantSales = salesOf(list, ten)!;
      const platformSales = list.find((s) => s.type === 'sales' && s.tenant_id === null)!;
      expect(tenantSales.net).toBe(tenantNet);
      expect(platformSales.net).toBe(platformNet);
      expect(itemsOf(tenantSales)).toEqual(included ? { gross_sales: 10_000, platform_fee: -1_000 } : { gross_sales: 10_000, fee: -300, platform_fee: -1_000 });
      expect(itemsOf(platformSales)).toEqual(included ? { platform_fee: 1_000, fee: -300 } : { platform_fee: 1_000 });
      // "Tax rate 0.00 on sales items"
      expect(new Set(tenantSales.items.map((i) => i.tax_rate))).toEqual(new Set(['0.00']));
      // Conservation: money in = owners' nets + the service's fee.
      expect(tenantSales.net + platformSales.net + 300).toBe(10_000);
      // owner filter: tenant statements vs the account's own.
      expect((await statements(caller, { owner: 'tenant' })).every((s) => s.tenant_id === ten)).toBe(true);
      expect((await statements(caller, { owner: 'merchant' })).every((s) => s.tenant_id === null)).toBe(true);
      expect((await statements(caller, { tenant: ten, type: 'sales' })).map((s) => s.id)).toEqual([tenantSales.id]);
    });
  }
});

describe('terms (service rules §4 "Term")', () => {
  it('monthly: a charge captured at 23:59:59 JST on the last day lands in that term, one at 00:00:00 JST in the next', async () => {
    const caller = await account('monthly_edge');
    const late = await charge(caller, 1_000, jst('2027-01-31T23:59:59'));
    const next = await charge(caller, 1_000, jst('2027-02-01T00:00:00'));
    const rows = await ctx.db.selectFrom('charges').select(['charge_id', 'term_id']).where('charge_id', 'in', [late, next]).execute();
    const termOf = (id: string) => rows.find((r) => r.charge_id === id)!.term_id!;
    const [a, b] = await Promise.all([op<Json>(caller, 'terms.retrieve', { id: termOf(late) }), op<Json>(caller, 'terms.retrieve', { id: termOf(next) })]);
    expect(a.start_at).toBe(jst('2027-01-01T00:00:00').getTime() / 1000);
    expect(b.start_at).toBe(jst('2027-02-01T00:00:00').getTime() / 1000);
  });

  it('semi-monthly: 23:59:59 JST on the 15th is in 1st–15th, 00:00:00 JST on the 16th in 16th–month end', async () => {
    const caller = await account('semi', 'semi_monthly');
    const late = await charge(caller, 2_000, jst('2027-01-15T23:59:59'));
    const next = await charge(caller, 3_000, jst('2027-01-16T00:00:00'));
    const rows = await ctx.db.selectFrom('charges').select(['charge_id', 'term_id']).where('charge_id', 'in', [late, next]).execute();
    const first = rows.find((r) => r.charge_id === late)!.term_id!;
    const second = rows.find((r) => r.charge_id === next)!.term_id!;
    expect(first).not.toBe(second);
    await closeTerms(jst('2027-01-16T00:00:00'));
    const closed = await op<Json>(caller, 'terms.retrieve', { id: first });
    expect(closed).toMatchObject({ closed: true, end_at: jst('2027-01-16T00:00:00').getTime() / 1000, charge_count: 1 });
    expect(await op<Json>(caller, 'terms.retrieve', { id: second })).toMatchObject({ closed: false, end_at: null, charge_count: 1 });
    const list = await statements(caller, { term: first });
    expect(list.map((s) => [s.type, s.net])).toEqual([['sales', 2_000 - 60]]);
    // Semi-monthly due date (Decision): the 1st–15th term is paid on the last day of the same month.
    const [balance] = await balances(caller);
    expect(balance).toMatchObject({ state: 'collecting', net: 1_940 });
    const termsList = await op<{ data: Json[] }>(caller, 'terms.list');
    expect(termsList.data.length).toBe(2);
  });
});

describe('balances (service rules §4 "Balance")', () => {
  it('0 ≤ net < 10,000 is deferred; the next term merges into it and pays out with a -250 transfer_fee statement once it crosses 10,000', async () => {
    const caller = await account('deferral');
    await charge(caller, 6_000, jst('2027-01-20T10:00:00'));
    await closeTerms(jst('2027-02-01T00:00:00'));
    let [balance] = await balances(caller);
    expect(balance).toMatchObject({ state: 'collecting', net: 5_820, due_date: null, closed: false });
    await charge(caller, 5_000, jst('2027-02-20T10:00:00'));
    await closeTerms(jst('2027-03-01T00:00:00'));
    const all = await balances(caller);
    expect(all.length).toBe(1);
    balance = all[0]!;
    // 5,820 + 4,850 = 10,670 ≥ 10,000 → transfer, then the 250-yen fee.
    expect(balance).toMatchObject({ state: 'transfer', net: 10_420, closed: false });
    // "monthly cycle → the last day of the following month": Feb term → 2027-03-31 (a Wednesday).
    expect(balance.due_date).toBe('2027-03-31');
    const fee = balance.statements.find((s) => s.type === 'transfer_fee')!;
    expect(fee).toMatchObject({ net: -250, balance_id: balance.id });
    expect(fee.items).toEqual([{ subject: 'transfer_fee', name: expect.any(String), amount: -250, tax_rate: '10.00' }]);
    expect(balance.statements.map((s) => s.type)).toEqual(['sales', 'sales', 'transfer_fee']);
    expect(balance.net).toBe(balance.statements.reduce((sum, s) => sum + s.net, 0));
    const balanceEvents = (await listEvents(ctx.db, caller.accountId)).filter((e) => e.type.startsWith('balance.'));
    // Each in v1, then its v2 twin (v2 §6.1 "other").
    expect(balanceEvents.map((e) => `${e.apiVersion} ${e.type}`)).toEqual(['v1 balance.created', 'v2 balance.created', 'v1 balance.merged', 'v2 balance.merged', 'v1 balance.fixed', 'v2 balance.fixed']);
    // The balance close job closes it on its due date (00:00 JST), with balance.closed.
    await runSlot(balanceCloseJob, jst('2027-03-30T00:00:00'));
    expect((await balances(caller))[0]).toMatchObject({ closed: false });
    await runSlot(balanceCloseJob, jst('2027-03-31T00:00:00'));
    expect((await balances(caller))[0]).toMatchObject({ closed: true, closed_date: '2027-03-31' });
    const closedEvent = (await listEvents(ctx.db, caller.accountId, { type: 'balance.closed' }))[0]!;
    expect(closedEvent.createdAt).toEqual(jst('2027-03-31T00:00:00'));
  });

  it('past the 1-year deadline a balance below 1,000 is forfeited: a forfeit statement of -net, transfer, closed', async () => {
    const caller = await account('forfeit');
    await charge(caller, 500, jst('2027-01-20T10:00:00'));
    // One slot, late by a whole year: each term is closed at its own end, one after the other.
    await closeTerms(jst('2028-01-01T00:00:00'));
    expect((await balances(caller))[0]).toMatchObject({ state: 'collecting', net: 485 });
    await closeTerms(jst('2028-02-01T00:00:00'));
    const [balance] = await balances(caller);
    expect(balance).toMatchObject({ state: 'transfer', net: 0, closed: true, closed_date: '2028-02-01' });
    const forfeit = balance!.statements.find((s) => s.type === 'forfeit')!;
    expect(forfeit.net).toBe(-485);
    expect(forfeit.created).toBe(jst('2028-02-01T00:00:00').getTime() / 1000);
    const terms = await ctx.db.selectFrom('terms').select(['closed']).where('account_id', '=', caller.accountId).execute();
    expect(terms.filter((t) => t.closed).length).toBe(13);
  });

  it('refunds exceeding sales make a claim (no transfer fee)', async () => {
    const caller = await account('claim');
    const id = await charge(caller, 20_000, jst('2027-01-20T10:00:00'));
    await closeTerms(jst('2027-02-01T00:00:00'));
    await refund(caller, id, 5_000, jst('2027-02-03T10:00:00'));
    await closeTerms(jst('2027-03-01T00:00:00'));
    const claim = (await balances(caller)).find((b) => b.state === 'claim')!;
    expect(claim.net).toBe(-5_000 + 150);
    expect(claim.statements.map((s) => s.type)).toEqual(['sales']);
    expect(itemsOf(claim.statements[0])).toEqual({ gross_refund: -5_000, refund_fee_offset: 150 });
  });

  it('due_date on a weekend moves to the previous business day: June 2027 term → 07-31 (Sat) → 07-30 (Fri)', async () => {
    const caller = await account('weekend');
    await charge(caller, 50_000, jst('2027-06-10T10:00:00'));
    await closeTerms(jst('2027-07-01T00:00:00'));
    const [balance] = await balances(caller);
    expect(balance).toMatchObject({ state: 'transfer', due_date: '2027-07-30' });
  });

  it('due_date on a national holiday around the New Year: Nov 2027 term → Dec 31 (bank holiday) → 2027-12-30', async () => {
    const caller = await account('newyear');
    await charge(caller, 50_000, jst('2027-11-10T10:00:00'));
    await closeTerms(jst('2027-12-01T00:00:00'));
    expect((await balances(caller))[0]).toMatchObject({ state: 'transfer', due_date: '2027-12-30' });
  });

  it('due_date in Golden Week: March 2029 term → Apr 30 (substitute holiday) → Fri 2029-04-27; semi-monthly Dec 1–15, 2029 → Dec 31 (Mon, bank holiday) → Fri 12-28', async () => {
    const caller = await account('goldenweek');
    await charge(caller, 50_000, jst('2029-03-10T10:00:00'));
    await closeTerms(jst('2029-04-01T00:00:00'));
    expect((await balances(caller)).find((b) => b.state === 'transfer')).toMatchObject({ due_date: '2029-04-27' });
    const semi = await account('semi_newyear', 'semi_monthly');
    await charge(semi, 50_000, jst('2029-12-03T10:00:00'));
    await closeTerms(jst('2029-12-16T00:00:00'));
    expect((await balances(semi))[0]).toMatchObject({ state: 'transfer', due_date: '2029-12-28' });
  });

  it('a tenant is paid out from its own minimum_transfer_amount', async () => {
    const caller = await account('tenantmin');
    const ten = await tenant(caller, '10.00', false, { minimum_transfer_amount: 1_000 });
    await charge(caller, 2_000, jst('2027-01-20T10:00:00'), { tenant: ten });
    await closeTerms(jst('2027-02-01T00:00:00'));
    const list = await balances(caller);
    expect(list.find((b) => b.owner === 'tenant')).toMatchObject({ state: 'transfer', net: 2_000 - 60 - 200 - 250 });
    // The platform's own balance uses the merchant minimum (10,000): 200 is deferred.
    expect(list.find((b) => b.owner === 'platform')).toMatchObject({ state: 'collecting', net: 200 });
  });
});

describe('exactly once and at the item\'s own instant', () => {
  it('a late slot writes the close at the term end; re-running the slot, or a close of a closed term, creates nothing', async () => {
    const caller = await account('rerun');
    const ten = await tenant(caller, '7.50', true);
    await charge(caller, 12_345, jst('2027-01-05T10:00:00'), { tenant: ten });
    await charge(caller, 54_321, jst('2027-01-06T10:00:00'));
    // The slot of Feb 5 runs on Feb 5 at noon: the term still closes at Feb 1 00:00 JST.
    await closeTerms(jst('2027-02-05T00:00:00'), jst('2027-02-05T12:00:00'));
    const count = async () => {
      const tables = ['statements', 'statement_items', 'balances', 'terms', 'events'] as const;
      const out: Record<string, number> = {};
      for (const table of tables) {
        const row = await ctx.db.selectFrom(table).select(({ fn }) => fn.countAll<number>().as('n')).where('account_id', '=', caller.accountId).executeTakeFirstOrThrow();
        out[table] = Number(row.n);
      }
      return out;
    };
    const before = await count();
    const list = await statements(caller);
    expect(list.length).toBeGreaterThan(0);
    for (const s of list) expect(s.created).toBe(jst('2027-02-01T00:00:00').getTime() / 1000);
    const closedEvents = await listEvents(ctx.db, caller.accountId, { type: 'term.closed' });
    expect(closedEvents.map((e) => [e.apiVersion, e.createdAt])).toEqual([
      ['v1', jst('2027-02-01T00:00:00')],
      ['v2', jst('2027-02-01T00:00:00')],
    ]);
    await closeTerms(jst('2027-02-05T00:00:00'), jst('2027-02-06T00:00:00'));
    await closeTerms(jst('2027-02-05T00:00:00'), jst('2027-02-06T00:00:00'));
    expect(await ctx.db.transaction().execute((trx) => closeTermBatch(trx, ctx, [caller.accountId], jst('2027-02-05T00:00:00'), 100))).toMatchObject({ selected: 0 });
    expect(await count()).toEqual(before);
    // Each statement's net is the sum of its items.
    for (const s of list) expect(s.net).toBe(s.items.reduce((sum, i) => sum + i.amount, 0));
  });

  it('a capture recorded after its term was closed lands in the next open term (closed statements never change)', async () => {
    const caller = await account('latecapture');
    await charge(caller, 1_000, jst('2027-01-10T10:00:00'));
    await closeTerms(jst('2027-02-01T00:00:00'));
    const late = await charge(caller, 2_000, jst('2027-01-31T23:00:00'));
    const row = await ctx.db.selectFrom('charges').select('term_id').where('charge_id', '=', late).executeTakeFirstOrThrow();
    const term = await op<Json>(caller, 'terms.retrieve', { id: row.term_id });
    expect(term).toMatchObject({ closed: false, start_at: jst('2027-02-01T00:00:00').getTime() / 1000 });
  });

  it('test and live mode have terms of their own', async () => {
    const caller = await account('modes');
    await ctx.db.updateTable('accounts').set({ live_enabled: true }).where('account_id', '=', caller.accountId).execute();
    await charge(caller, 1_000, jst('2027-01-10T10:00:00'));
    await captureCharge(ctx.db, ctx, { accountId: caller.accountId, livemode: true, chargeId: nextId('ch_live'), amount: 3_000, at: jst('2027-01-10T10:00:00') });
    const terms = await ctx.db.selectFrom('terms').select(['livemode', 'term_id']).where('account_id', '=', caller.accountId).execute();
    expect(terms.map((t) => t.livemode).sort()).toEqual([false, true]);
    await closeTerms(jst('2027-02-01T00:00:00'));
    const live = await runOperation(ctx, { ...caller, livemode: true }, 'statements.list', {});
    expect((live as { data: Statement[] }).data.map((s) => s.net)).toEqual([3_000 - 90]);
  });

  it('registers terms.close and balances.close after every other job but webhook delivery (which sends what they write), daily at 00:00 JST', () => {
    const names = ALL_JOBS.map((job) => job.name);
    expect(names.slice(-4)).toEqual(['terms.close', 'service_fees.bill', 'balances.close', 'webhooks.deliver']);
    expect(termCloseJob.schedule).toBe('0 0 * * *');
  });
});
