/**
 * Settlement operations (v1 §4.7, §2.6, §2.7): statements.retrieve|list, statement URLs with their
 * CSV, balances.retrieve|list, terms.retrieve|list.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { termCloseJob } from '../../jobs/term-close';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import type { EngineConfig } from '../../src/engine/context';
import { Scheduler } from '../../src/engine/scheduler';
import { runOperation } from '../../src/api/operations';
import { statementCsv } from '../../src/settlement/statement-urls';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';
import { expectRefused, rejection } from '../support/rejections';
import { captureCharge, refundCharge } from '../support/settlement-seed';

type Json = Record<string, unknown> & { id: string };
type Statement = Json & { net: number; type: string; tenant_id: string | null; items: { subject: string; amount: number }[] };

const jst = (local: string): Date => new Date(`${local}+09:00`);
const CONFIG: Partial<EngineConfig> = { statementUrlSecret: 'test-secret-of-statement-urls' };

let database: TestDatabase;
let ctx: ReturnType<typeof testContext>;
let caller: Caller;
let tenantId: string;

async function op<T = Json>(name: string, params?: unknown): Promise<T> {
  return (await runOperation(ctx, caller, name, params)) as T;
}

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 77, at: jst('2027-01-05T09:00:00'), config: CONFIG });
  await createAccount(ctx, { name: 'Statements', id: 'acct_statements' });
  caller = { accountId: 'acct_statements', livemode: false, kind: 'secret' };
  tenantId = (await op('tenants.create', { platform_fee_rate: '10.00', payjp_fee_included: 'false' })).id;
  await captureCharge(ctx.db, ctx, { accountId: caller.accountId, chargeId: 'ch_ops_1', amount: 30_000, at: jst('2027-01-10T10:00:00') });
  await captureCharge(ctx.db, ctx, { accountId: caller.accountId, chargeId: 'ch_ops_2', amount: 20_000, at: jst('2027-01-11T10:00:00'), tenant: tenantId });
  await refundCharge(ctx.db, ctx, { accountId: caller.accountId, chargeId: 'ch_ops_2', refundId: 're_ops_1', amount: 5_000, at: jst('2027-01-12T10:00:00') });
  const runCtx = testContext(database.store, { at: jst('2027-02-01T00:00:00'), seed: 78 });
  const outcome = await new Scheduler(runCtx, [termCloseJob], { owner: 'test' }).runSlot(termCloseJob.name, jst('2027-02-01T00:00:00'));
  expect(outcome.status).toBe('succeeded');
  ctx.clock.set(jst('2027-02-02T10:00:00'));
});
afterAll(async () => database?.drop());

describe('statements (v1 §4.7)', () => {
  it('lists newest first with the filters owner, tenant, term and type; retrieve gives the same object', async () => {
    const all = await op<{ object: string; data: Statement[]; url: string }>('statements.list');
    expect(all.object).toBe('list');
    expect(all.url).toBe('/v1/statements');
    // merchant sales, platform sales, tenant sales, and a transfer fee for the merchant (30,000 − 900 ≥ 10,000) and tenant.
    expect(all.data.map((s) => `${s.type}:${s.tenant_id ?? 'own'}`).sort()).toEqual(
      ['sales:own', 'sales:own', `sales:${tenantId}`, 'transfer_fee:own', `transfer_fee:${tenantId}`].sort(),
    );
    const tenantSales = (await op<{ data: Statement[] }>('statements.list', { tenant: tenantId, type: 'sales' })).data;
    expect(tenantSales.length).toBe(1);
    expect(tenantSales[0]!.net).toBe(20_000 - 600 - 2_000 - 5_000 + 150 + 500);
    expect(await op('statements.retrieve', { id: tenantSales[0]!.id })).toEqual(tenantSales[0]);
    const termId = (tenantSales[0]!.term as Json).id;
    expect((await op<{ data: Statement[] }>('statements.list', { term: termId })).data.length).toBe(5);
    expect((await op<{ data: Statement[] }>('statements.list', { owner: 'tenant' })).data.every((s) => s.tenant_id === tenantId)).toBe(true);
    expect((await op<{ data: Statement[] }>('statements.list', { limit: 2 })).data.length).toBe(2);
  });

  it('an unknown statement is invalid_id on id; a bad filter is invalid_querystring and changes nothing', async () => {
    const snapshot = async () => ctx.db.selectFrom('statement_urls').selectAll().execute();
    await expectRefused('unknown', () => op('statements.retrieve', { id: 'st_nope' }), 'invalid_id', 'id', snapshot);
    await expectRefused('owner', () => op('statements.list', { owner: 'platformer' }), 'invalid_owner_type', 'owner', snapshot);
    await expectRefused('type', () => op('statements.list', { type: 'refund' }), 'invalid_querystring', 'type', snapshot);
    await expectRefused('url of unknown', () => op('statements.statement_urls', { id: 'st_nope' }), 'invalid_id', 'id', snapshot);
  });

  it('"A URL expires 1 hour after issue, or when a new URL is issued for the same object and platformer combination"', async () => {
    const [statement] = (await op<{ data: Statement[] }>('statements.list', { tenant: tenantId, type: 'sales' })).data;
    const first = await op<{ object: string; url: string; expires: number }>('statements.statement_urls', { id: statement!.id });
    expect(first.object).toBe('statement_url');
    expect(first.expires).toBe(ctx.clock.now().getTime() / 1000 + 3600);
    const token = (url: string) => new URL(url).searchParams.get('token')!;
    const csv = await statementCsv(ctx, token(first.url));
    expect(csv).toContain(`statement_id,${statement!.id}`);
    expect(csv).toContain('gross_sales,');
    expect(csv).toContain('platform_fee,');
    // The platformer version lists the platform-fee items only.
    const platformer = await op<{ url: string }>('statements.statement_urls', { id: statement!.id, platformer: 'true' });
    const platformCsv = await statementCsv(ctx, token(platformer.url));
    expect(platformCsv).not.toContain('gross_sales,');
    expect(platformCsv).toContain('refund_platform_fee_offset,');
    // The platformer URL did not invalidate the other one.
    expect(await statementCsv(ctx, token(first.url))).toBe(csv);
    ctx.clock.advance(60_000);
    const second = await op<{ url: string }>('statements.statement_urls', { id: statement!.id });
    expect((await rejection(statementCsv(ctx, token(first.url)))).code).toBe('not_found');
    expect(await statementCsv(ctx, token(second.url))).toBe(csv);
    // Forged: the signature no longer matches.
    const forged = token(second.url).replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
    expect((await rejection(statementCsv(ctx, forged))).code).toBe('not_found');
    ctx.clock.advance(60 * 60 * 1000);
    expect((await rejection(statementCsv(ctx, token(second.url)))).code).toBe('not_found');
  });
});

describe('balances and terms', () => {
  it('balances.list and retrieve show each owner\'s balance with its statements; net = Σ statements', async () => {
    const list = await op<{ data: (Json & { net: number; owner: string; statements: Statement[]; state: string })[] }>('balances.list');
    expect(list.data.map((b) => `${b.owner}:${b.state}`).sort()).toEqual(['merchant:transfer', 'platform:collecting', 'tenant:transfer']);
    for (const balance of list.data) {
      expect(balance.net).toBe(balance.statements.reduce((sum, s) => sum + s.net, 0));
      expect(await op('balances.retrieve', { id: balance.id })).toEqual(balance);
    }
    expect((await op<{ data: Json[] }>('balances.list', { state: 'collecting' })).data.length).toBe(1);
  });

  it('balances.list filters by owner and tenant; a bad owner is invalid_owner_type and an unknown balance invalid_id', async () => {
    const owners = async (params: Record<string, string>) => (await op<{ data: { owner: string }[] }>('balances.list', params)).data.map((b) => b.owner).sort();
    expect(await owners({ owner: 'platform' })).toEqual(['platform']);
    expect(await owners({ tenant: tenantId })).toEqual(['tenant']);
    const snapshot = async () => ctx.db.selectFrom('balances').selectAll().orderBy('balance_id').execute();
    await expectRefused('state', () => op('balances.list', { state: 'closed' }), 'invalid_querystring', 'state', snapshot);
    await expectRefused('owner', () => op('balances.list', { owner: 'platformer' }), 'invalid_owner_type', 'owner', snapshot);
    await expectRefused('unknown', () => op('balances.retrieve', { id: 'ba_nope' }), 'invalid_id', 'id', snapshot);
  });

  it('terms.list shows the closed term with its counts and the open term with end_at null', async () => {
    const list = await op<{ data: Json[] }>('terms.list');
    expect(list.data.map((t) => [t.closed, t.end_at === null, t.charge_count, t.refund_count])).toEqual([
      [false, true, 0, 0],
      [true, false, 2, 1],
    ]);
    expect((await rejection(op('terms.retrieve', { id: 'tm_nope' }))).code).toBe('invalid_id');
  });
});
