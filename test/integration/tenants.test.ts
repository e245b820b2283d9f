/**
 * Tenants (service rules §4 "Platform mode") and the platform parameters of a charge (v1 §4.2).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { listEvents } from '../../src/events/outbox';
import { runOperation } from '../../src/api/operations';
import { resolveChargeTenant } from '../../src/tenants/charge-tenant';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';
import { expectRefused, rejection } from '../support/rejections';

type Json = Record<string, unknown> & { id: string };

let database: TestDatabase;
let ctx: ReturnType<typeof testContext>;
let caller: Caller;

async function op<T = Json>(name: string, params?: unknown): Promise<T> {
  return (await runOperation(ctx, caller, name, params)) as T;
}
const snapshot = async () => ({
  tenants: await ctx.db.selectFrom('tenants').selectAll().orderBy('tenant_id').execute(),
  events: (await listEvents(ctx.db, caller.accountId)).length,
});
const refused = (name: string, params: unknown, code: string, param: string | undefined) => expectRefused(`${name} ${JSON.stringify(params)}`, () => op(name, params), code, param, snapshot);

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 91 });
  await createAccount(ctx, { name: 'Platform', id: 'acct_platform', liveEnabled: true });
  caller = { accountId: 'acct_platform', livemode: false, kind: 'secret' };
});
afterAll(async () => database?.drop());

describe('tenants.create|retrieve|update|delete|list', () => {
  it('creates a tenant with platform_fee_rate, payjp_fee_included and the default minimum_transfer_amount 10,000', async () => {
    const tenant = await op('tenants.create', { id: 'ten_shop', name: 'Shop', platform_fee_rate: '10', payjp_fee_included: 'True', metadata: { k: 'v' } });
    expect(tenant).toEqual({
      id: 'ten_shop',
      object: 'tenant',
      livemode: false,
      created: expect.any(Number),
      name: 'Shop',
      platform_fee_rate: '10.00',
      payjp_fee_included: true,
      minimum_transfer_amount: 10_000,
      metadata: { k: 'v' },
    });
    expect(await op('tenants.retrieve', { id: 'ten_shop' })).toEqual(tenant);
    expect((await listEvents(ctx.db, caller.accountId, { type: 'tenant.created' })).length).toBe(1);
  });

  it('"platform_fee_rate (percent, at most 95, 2 decimals)"; "minimum_transfer_amount (default 10,000, at least 1,000)"', async () => {
    await refused('tenants.create', {}, 'missing_param', 'platform_fee_rate');
    await refused('tenants.create', { platform_fee_rate: '95.01' }, 'invalid_param_key', 'platform_fee_rate');
    await refused('tenants.create', { platform_fee_rate: '1.234' }, 'invalid_param_key', 'platform_fee_rate');
    await refused('tenants.create', { platform_fee_rate: '5', minimum_transfer_amount: 999 }, 'invalid_amount', 'minimum_transfer_amount');
    await refused('tenants.create', { id: 'ten_shop', platform_fee_rate: '5' }, 'already_exist_id', 'id');
    expect((await op('tenants.create', { platform_fee_rate: '95.00', minimum_transfer_amount: '1000' })).minimum_transfer_amount).toBe(1_000);
  });

  it('"payjp_fee_included (fixed at creation)": update changes rate, minimum, name and metadata but refuses payjp_fee_included', async () => {
    await refused('tenants.update', { id: 'ten_shop', payjp_fee_included: 'false' }, 'invalid_param_key', 'payjp_fee_included');
    const updated = await op('tenants.update', { id: 'ten_shop', platform_fee_rate: '12.5', minimum_transfer_amount: 5_000, metadata: { k: '' } });
    expect(updated).toMatchObject({ platform_fee_rate: '12.50', minimum_transfer_amount: 5_000, payjp_fee_included: true, metadata: {} });
  });

  it('checks id, name, then platform_fee_rate, the same order on every request; an empty name clears it', async () => {
    await refused('tenants.create', { id: 'ten shop', name: 'x'.repeat(256) }, 'invalid_flexible_id', 'id');
    await refused('tenants.create', { name: 'x'.repeat(256) }, 'invalid_string_length', 'name');
    await refused('tenants.update', { id: 'ten_shop', name: 'x'.repeat(256), platform_fee_rate: '96' }, 'invalid_string_length', 'name');
    await refused('tenants.update', { id: 'ten_nope', name: 'Nope' }, 'invalid_id', 'id');
    expect((await op('tenants.update', { id: 'ten_shop', name: '' })).name).toBeNull();
    expect((await op('tenants.retrieve', { id: 'ten_shop' })).name).toBeNull();
  });

  it('lists newest first; delete is soft and the tenant becomes unknown', async () => {
    const list = await op<{ data: Json[]; count: number }>('tenants.list');
    expect(list.count).toBe(2);
    const gone = await op('tenants.create', { platform_fee_rate: '3' });
    expect(await op('tenants.delete', { id: gone.id })).toEqual({ deleted: true, id: gone.id, livemode: false });
    expect((await rejection(op('tenants.retrieve', { id: gone.id }))).code).toBe('invalid_id');
    await refused('tenants.create', { id: gone.id, platform_fee_rate: '5' }, 'already_exist_id', 'id');
  });
});

describe('platform parameters of charges.create (v1 §4.2)', () => {
  const resolve = (input: { tenant?: string; platformFee?: number; amount: number }) => ctx.db.transaction().execute((trx) => resolveChargeTenant(trx, caller, input));

  it('without platform_fee the fee is floor(amount × rate / 100) and platform_fee_rate is the tenant rate', async () => {
    expect(await resolve({ tenant: 'ten_shop', amount: 999 })).toEqual({
      tenant_id: 'ten_shop',
      platform_fee: 124,
      platform_fee_rate: '12.50',
      payjp_fee_included: true,
      total_platform_fee: 124,
    });
  });

  it('"if the tenant\'s payjp_fee_included is true, 5% to 100% of amount; if false, 0% to 95%"; a given fee makes platform_fee_rate null', async () => {
    expect(await resolve({ tenant: 'ten_shop', amount: 1_000, platformFee: 50 })).toMatchObject({ platform_fee: 50, platform_fee_rate: null });
    expect(await resolve({ tenant: 'ten_shop', amount: 1_000, platformFee: 1_000 })).toMatchObject({ platform_fee: 1_000 });
    expect((await rejection(resolve({ tenant: 'ten_shop', amount: 1_000, platformFee: 49 }))).param).toBe('platform_fee');
    const excluded = await op('tenants.create', { platform_fee_rate: '10', payjp_fee_included: false });
    expect(await resolve({ tenant: excluded.id, amount: 1_000, platformFee: 0 })).toMatchObject({ platform_fee: 0, payjp_fee_included: false });
    expect(await resolve({ tenant: excluded.id, amount: 1_000, platformFee: 950 })).toMatchObject({ platform_fee: 950 });
    const tooMuch = await rejection(resolve({ tenant: excluded.id, amount: 1_000, platformFee: 951 }));
    expect([tooMuch.code, tooMuch.param]).toEqual(['invalid_amount', 'platform_fee']);
  });

  it('an unknown tenant is invalid_id on tenant; platform_fee without a tenant is invalid_param_key', async () => {
    const unknown = await rejection(resolve({ tenant: 'ten_nope', amount: 1_000 }));
    expect([unknown.code, unknown.param]).toEqual(['invalid_id', 'tenant']);
    const alone = await rejection(resolve({ amount: 1_000, platformFee: 10 }));
    expect([alone.code, alone.param]).toEqual(['invalid_param_key', 'platform_fee']);
    expect(await resolve({ amount: 1_000 })).toEqual({ tenant_id: null, platform_fee: null, platform_fee_rate: null, payjp_fee_included: null, total_platform_fee: 0 });
  });
});
