/**
 * The account's paid plan and operator adjustments (v1 §2.6 `service_fee` and `misc`, service
 * rules §4) through their feature functions, the `service_fees.bill` job and the `kessai` command:
 * the plan is dated (a month is billed at the fee in force at its start, as a charge takes the fee
 * rate in force at its capture), a late slot bills every missed month once, adjustments refuse bad
 * input without booking anything, and a request key books once.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceFeeBillingJob } from '../../jobs/service-fee-billing';
import { termCloseJob } from '../../jobs/term-close';
import { createAccount } from '../../src/accounts/accounts';
import { openStore } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import { KessaiError } from '../../src/domain/errors';
import { seededIds } from '../../src/domain/ids';
import { FixedClock } from '../../src/engine/clock';
import { Scheduler } from '../../src/engine/scheduler';
import { runOperation } from '../../src/api/operations';
import { bookAdjustment } from '../../src/settlement/adjustments';
import { nextServiceFeeDueAt, setServicePlan } from '../../src/settlement/service-fees';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';

const jst = (local: string): Date => new Date(`${local}+09:00`);
let database: TestDatabase;
let ctx: ReturnType<typeof testContext>;

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 11, at: jst('2027-01-01T00:00:00') });
});
afterAll(async () => database?.drop());

/** Each run draws its ids from a seed of its own: two runs with one seed would draw the same ids. */
let seeds = 100;
async function runSlot(job: typeof serviceFeeBillingJob, at: Date) {
  seeds += 1;
  return new Scheduler(testContext(database.store, { at, seed: seeds }), [job], { owner: 'test' }).runSlot(job.name, at);
}

async function billed(accountId: string) {
  const rows = await ctx.db.selectFrom('service_fee_charges').select(['period_start', 'subject', 'amount', 'created_at']).where('account_id', '=', accountId).orderBy('period_start').execute();
  return rows.map((row) => ({ month: row.period_start.toISOString(), subject: row.subject, amount: row.amount, at: row.created_at.toISOString() }));
}

describe('the paid plan, dated, billed monthly by service_fees.bill', () => {
  it('a late slot bills every missed month once, each at the fee in force at its start; a replay bills nothing', async () => {
    const accountId = 'acct_plan_late';
    await createAccount(ctx, { name: accountId, id: accountId });
    const caller = { accountId, livemode: false };
    await setServicePlan(ctx, caller, { subject: 'proplan', monthlyFee: 10_000, from: jst('2027-01-01T00:00:00') });
    // "What if our plan fee rises in April": a later setting, in force from April 1.
    await setServicePlan(ctx, caller, { subject: 'proplan', monthlyFee: 12_000, from: jst('2027-04-01T00:00:00') });
    expect(await nextServiceFeeDueAt(ctx.db, jst('2026-12-31T00:00:00'))).toEqual(jst('2027-01-01T00:00:00'));
    // The worker was down until May: the May slot bills January to May, each dated at its own month start.
    expect(await runSlot(serviceFeeBillingJob, jst('2027-05-01T00:00:00'))).toMatchObject({ status: 'succeeded', counts: { billed: 5 } });
    const months = ['2027-01', '2027-02', '2027-03', '2027-04', '2027-05'].map((m) => jst(`${m}-01T00:00:00`).toISOString());
    expect(await billed(accountId)).toEqual(months.map((month, i) => ({ month, subject: 'proplan', amount: i < 3 ? 10_000 : 12_000, at: month })));
    expect(await runSlot(serviceFeeBillingJob, jst('2027-05-01T00:00:00'))).toMatchObject({ status: 'succeeded', counts: { billed: 0 } });
    expect(await billed(accountId)).toHaveLength(5);
    expect(await nextServiceFeeDueAt(ctx.db, jst('2027-05-01T00:00:00'))).toEqual(jst('2027-06-01T00:00:00'));
  });

  it('a setting of 0 ends the paid plan; a setting that would change a billed month is refused', async () => {
    const accountId = 'acct_plan_end';
    await createAccount(ctx, { name: accountId, id: accountId });
    const caller = { accountId, livemode: false };
    await setServicePlan(ctx, caller, { subject: 'plan_fee', monthlyFee: 3_000, from: jst('2027-01-15T00:00:00') });
    await setServicePlan(ctx, caller, { subject: 'plan_fee', monthlyFee: 0, from: jst('2027-03-10T00:00:00') });
    expect(await runSlot(serviceFeeBillingJob, jst('2027-06-01T00:00:00'))).toMatchObject({ status: 'succeeded' });
    // In force from Jan 15: February and March are billed (the month starts at or after it), not April on.
    expect((await billed(accountId)).map((row) => [row.month, row.amount])).toEqual([
      [jst('2027-02-01T00:00:00').toISOString(), 3_000],
      [jst('2027-03-01T00:00:00').toISOString(), 3_000],
    ]);
    const refusal = await setServicePlan(ctx, caller, { subject: 'plan_fee', monthlyFee: 5_000, from: jst('2027-03-05T00:00:00') }).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(KessaiError);
    expect(refusal).toMatchObject({ code: 'invalid_param_key', param: 'from' });
    for (const [input, param] of [
      [{ subject: 'gold', monthlyFee: 1 }, 'subject'],
      [{ subject: 'proplan', monthlyFee: -1 }, 'monthly_fee'],
      [{ subject: 'proplan', monthlyFee: 1.5 }, 'monthly_fee'],
    ] as const) {
      await expect(setServicePlan(ctx, caller, { ...input, from: jst('2027-09-01T00:00:00') })).rejects.toMatchObject({ param });
    }
    expect(await ctx.db.selectFrom('account_service_plans').select('monthly_fee').where('account_id', '=', accountId).execute()).toHaveLength(2);
  });
});

describe('operator adjustments', () => {
  it('bad input is refused with the parameter named and books nothing; a request key books once', async () => {
    const accountId = 'acct_adjust';
    await createAccount(ctx, { name: accountId, id: accountId });
    const caller = { accountId, livemode: false };
    for (const [input, code, param] of [
      [{ amount: 0, subject: 'other', reason: 'x' }, 'invalid_amount', 'amount'],
      [{ amount: 1.5, subject: 'other', reason: 'x' }, 'invalid_amount', 'amount'],
      [{ amount: 100, subject: 'gift', reason: 'x' }, 'invalid_param_key', 'subject'],
      [{ amount: 100, subject: 'other', reason: '   ' }, 'invalid_string_length', 'reason'],
      [{ amount: 100, subject: 'other', reason: 'x', owner: 'someone' }, 'invalid_param_key', 'owner'],
      [{ amount: 100, subject: 'other', reason: 'x', owner: 'ten_missing' }, 'invalid_id', 'owner'],
    ] as const) {
      await expect(bookAdjustment(ctx, caller, input)).rejects.toMatchObject({ code, param });
    }
    await expect(bookAdjustment(ctx, { accountId: 'acct_nobody', livemode: false }, { amount: 1, subject: 'other', reason: 'x' })).rejects.toMatchObject({ code: 'invalid_id', param: 'account' });
    expect(await ctx.db.selectFrom('adjustments').select('adjustment_id').where('account_id', '=', accountId).execute()).toEqual([]);

    const input = { amount: -700, subject: 'other', reason: 'bank charge', requestKey: 'op-2027-0001' } as const;
    const [first, second] = await Promise.all([bookAdjustment(ctx, caller, input), bookAdjustment(ctx, caller, input)]);
    expect(second).toEqual(first);
    await expect(bookAdjustment(ctx, caller, { ...input, amount: -701 })).rejects.toMatchObject({ code: 'invalid_param_key', param: 'request_key' });
    expect(await ctx.db.selectFrom('adjustments').select('amount').where('account_id', '=', accountId).execute()).toEqual([{ amount: -700 }]);
  });

  it("a tenant's adjustment becomes the tenant's misc statement, in the tenant's balance", async () => {
    const accountId = 'acct_adjust_tenant';
    await createAccount(ctx, { name: accountId, id: accountId });
    const caller = { accountId, livemode: false, kind: 'secret' as const };
    const tenant = (await runOperation(ctx, caller, 'tenants.create', { platform_fee_rate: '10.00' })) as { id: string };
    const booking = testContext(database.store, { at: jst('2027-02-10T10:00:00'), seed: 14 });
    await bookAdjustment(booking, caller, { amount: 12_000, subject: 'reallocation', reason: 'sales moved from another tenant', owner: tenant.id });
    expect(await runSlot(termCloseJob, jst('2027-03-01T00:00:00'))).toMatchObject({ status: 'succeeded' });
    const statements = await ctx.db.selectFrom('statements').select(['type', 'owner', 'tenant_id', 'net', 'balance_id']).where('account_id', '=', accountId).orderBy('type').execute();
    expect(statements.map(({ balance_id: _b, ...s }) => s)).toEqual([
      { type: 'misc', owner: 'tenant', tenant_id: tenant.id, net: 12_000 },
      { type: 'transfer_fee', owner: 'tenant', tenant_id: tenant.id, net: -250 },
    ]);
    const balance = await ctx.db.selectFrom('balances').selectAll().where('account_id', '=', accountId).executeTakeFirstOrThrow();
    expect(balance).toMatchObject({ owner: 'tenant', tenant_id: tenant.id, state: 'transfer', net: 11_750 });
  });

  it('a deleted tenant can still be named by an adjustment (its balances settle); another account\'s tenant cannot', async () => {
    const accountId = 'acct_adjust_deleted';
    await createAccount(ctx, { name: accountId, id: accountId });
    const caller = { accountId, livemode: false, kind: 'secret' as const };
    const tenant = (await runOperation(ctx, caller, 'tenants.create', { platform_fee_rate: '10.00' })) as { id: string };
    await runOperation(ctx, caller, 'tenants.delete', { id: tenant.id });
    const booked = await bookAdjustment(ctx, caller, { amount: 500, subject: 'other', reason: 'late correction', owner: tenant.id });
    expect(booked).toMatchObject({ owner: 'tenant', amount: 500 });
    await expect(bookAdjustment(ctx, { accountId: 'acct_adjust', livemode: false }, { amount: 500, subject: 'other', reason: 'x', owner: tenant.id })).rejects.toMatchObject({ code: 'invalid_id', param: 'owner' });
  });
});

describe('kessai adjustments add / accounts plan', () => {
  const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
  const dataDir = mkdtempSync(join(tmpdir(), 'kessai-adjustments-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));
  const kessai = (args: string[]) => {
    const { DATABASE_URL: _ignored, ...base } = process.env;
    const result = spawnSync(process.execPath, [BIN, ...args], { env: { ...base, KESSAI_DATA_DIR: dataDir }, encoding: 'utf8', timeout: 120_000 });
    return { code: result.status, stdout: result.stdout, stderr: result.stderr };
  };

  it('books a negative adjustment with its reason, sets a dated plan, and refuses a bad one with the parameter named', async () => {
    const store = await openStore({ dataDir });
    try {
      await migrate(store);
      await createAccount({ db: store.db, clock: new FixedClock(jst('2027-01-05T00:00:00')), ids: seededIds(3) }, { name: 'CLI', id: 'acct_cli_adj' });
    } finally {
      await store.close();
    }
    const added = kessai(['adjustments', 'add', 'acct_cli_adj', '--amount', '-1500', '--subject', 'other', '--reason', 'refund of an overpaid fee', '--json']);
    expect(added.code, added.stderr).toBe(0);
    expect(JSON.parse(added.stdout)).toMatchObject({ object: 'adjustment', owner: 'merchant', subject: 'other', amount: -1500, reason: 'refund of an overpaid fee', livemode: false });
    const refused = kessai(['adjustments', 'add', 'acct_cli_adj', '--amount', '0', '--subject', 'other', '--reason', 'nothing']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/invalid_amount \(amount\)/);
    const plan = kessai(['accounts', 'plan', 'acct_cli_adj', '--subject', 'proplan', '--fee', '9800', '--from', '2027-04-01']);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toMatch(/^set: from 2027-04-01 00:00 \+09:00\tproplan\t9800 yen\/month\tnext bill 2027-04-01 00:00 \+09:00/);
    const listed = kessai(['adjustments', 'list', 'acct_cli_adj']);
    expect(listed.stdout).toMatch(/\tmerchant\tother\t-1500\ttm_[0-9a-f]+\trefund of an overpaid fee\n$/);
  }, 120_000);
});
