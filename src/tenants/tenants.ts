/**
 * Tenants (platform mode, service rules §4 "Platform mode"; v1 §2.1 prefix `ten_`): the merchants
 * of a platform. A tenant has `platform_fee_rate` (percent, two decimals, at most 95),
 * `payjp_fee_included` (fixed at creation: it decides who bears the service fee of every charge
 * already made) and `minimum_transfer_amount` (default 10,000, at least 1,000). Create, retrieve,
 * update, delete (softly: statements and charges keep naming it), list; each change writes its
 * `tenant.*` event in the same transaction (service rules §5).
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { FLEXIBLE_ID_PATTERN, MAX_DESCRIPTION_LENGTH } from '../customers/customers';
import type { Database, TenantsTable } from '../db/schema';
import { TENANT_MINIMUM_TRANSFER_AMOUNT_DEFAULT, TENANT_MINIMUM_TRANSFER_AMOUNT_FLOOR } from '../domain/balance-rules';
import { reject } from '../domain/errors';
import { parsePlatformFeeRate } from '../domain/fees';
import { createMetadata, mergeMetadata } from '../domain/metadata';
import { formatRate } from '../domain/money';
import { toUnixSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { defineOperation } from '../operations/define';
import { inPage, listObject, PAGINATION_PARAMS, readPage, type ListObject } from '../operations/pagination';
import { hasParam, optionalBoolean, optionalInteger, optionalString, readParams, requireString, type Params } from '../operations/params';

export const TENANTS_URL = '/v1/tenants';
/** Largest minimum_transfer_amount accepted: the largest charge amount (v1 §4.2). */
export const MAX_MINIMUM_TRANSFER_AMOUNT = 9_999_999;

export type TenantRow = Selectable<TenantsTable>;

export type TenantObject = {
  readonly id: string;
  readonly object: 'tenant';
  readonly livemode: boolean;
  readonly created: number;
  readonly name: string | null;
  readonly platform_fee_rate: string;
  readonly payjp_fee_included: boolean;
  readonly minimum_transfer_amount: number;
  readonly metadata: Record<string, string>;
};

export function renderTenant(row: TenantRow): TenantObject {
  return {
    id: row.tenant_id,
    object: 'tenant',
    livemode: row.livemode,
    created: toUnixSeconds(row.created_at),
    name: row.name,
    platform_fee_rate: row.platform_fee_rate,
    payjp_fee_included: row.payjp_fee_included,
    minimum_transfer_amount: row.minimum_transfer_amount,
    metadata: row.metadata,
  };
}

/** A live tenant of the caller, or `invalid_id` on `param`. `lock` takes it FOR SHARE / UPDATE. */
export async function findTenant(executor: Kysely<Database>, caller: Pick<Caller, 'accountId' | 'livemode'>, tenantId: string, param: string, lock: false | 'share' | 'update' = false): Promise<TenantRow> {
  let query = executor
    .selectFrom('tenants')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('tenant_id', '=', tenantId)
    .where('deleted_at', 'is', null);
  if (lock === 'share') query = query.forShare();
  else if (lock === 'update') query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) return reject('invalid_id', param, `No such tenant: ${tenantId}`);
  return row;
}

/** `platform_fee_rate`: a percentage with at most two decimals, 0 to 95 (service rules §4). */
function readRate(params: Params): string | undefined {
  const raw = params.platform_fee_rate;
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'string' && typeof raw !== 'number') return reject('invalid_param_key', 'platform_fee_rate', 'platform_fee_rate must be a percentage such as 10.00');
  try {
    return formatRate(parsePlatformFeeRate(raw));
  } catch (error) {
    return reject('invalid_param_key', 'platform_fee_rate', (error as Error).message);
  }
}

function readName(params: Params): string | null | undefined {
  const name = optionalString(params, 'name', { code: 'invalid_string_length' });
  if (name === undefined) return undefined;
  if ([...name].length > MAX_DESCRIPTION_LENGTH) reject('invalid_string_length', 'name', `name must be at most ${MAX_DESCRIPTION_LENGTH} characters`);
  return name === '' ? null : name;
}

function readMinimum(params: Params): number | undefined {
  return optionalInteger(params, 'minimum_transfer_amount', { min: TENANT_MINIMUM_TRANSFER_AMOUNT_FLOOR, max: MAX_MINIMUM_TRANSFER_AMOUNT, code: 'invalid_amount' });
}

/**
 * `tenants.create`: `platform_fee_rate` (required), `payjp_fee_included` (default false),
 * `minimum_transfer_amount` (default 10,000), `id` (chosen id), `name`, `metadata`.
 */
export async function createTenant(ctx: Context, caller: Caller, input: unknown): Promise<TenantObject> {
  const params = readParams(input, ['id', 'name', 'platform_fee_rate', 'payjp_fee_included', 'minimum_transfer_amount', 'metadata']);
  const chosenId = optionalString(params, 'id', { code: 'invalid_flexible_id' });
  if (chosenId !== undefined && !FLEXIBLE_ID_PATTERN.test(chosenId)) reject('invalid_flexible_id', 'id', 'id must be 1 to 100 half-width letters, digits, underscores or hyphens');
  const name = readName(params) ?? null;
  const rate = readRate(params);
  if (rate === undefined) return reject('missing_param', 'platform_fee_rate', 'platform_fee_rate is required');
  const included = optionalBoolean(params, 'payjp_fee_included') ?? false;
  const minimum = readMinimum(params) ?? TENANT_MINIMUM_TRANSFER_AMOUNT_DEFAULT;
  const metadata = hasParam(params, 'metadata') ? (createMetadata(params.metadata, 'v1') as Record<string, string>) : {};
  const now = ctx.clock.now();
  const tenantId = chosenId ?? ctx.ids.next('tenant');
  return ctx.db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('tenants')
      .values({
        account_id: caller.accountId,
        livemode: caller.livemode,
        tenant_id: tenantId,
        name,
        platform_fee_rate: rate,
        payjp_fee_included: included,
        minimum_transfer_amount: minimum,
        metadata: JSON.stringify(metadata),
        created_at: now,
        updated_at: now,
      })
      // Deleted tenants keep their id: their statements and charges still name it.
      .onConflict((oc) => oc.columns(['account_id', 'livemode', 'tenant_id']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!row) return reject('already_exist_id', 'id', `Tenant ${tenantId} already exists.`);
    const tenant = renderTenant(row);
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'tenant.created', data: tenant, at: now });
    return tenant;
  });
}

export async function retrieveTenant(ctx: Context, caller: Caller, input: unknown): Promise<TenantObject> {
  const params = readParams(input, ['id']);
  return renderTenant(await findTenant(ctx.db, caller, requireString(params, 'id'), 'id'));
}

/**
 * `tenants.update`: `name`, `platform_fee_rate` (applies to charges created afterwards),
 * `minimum_transfer_amount` (applies from the next term close), `metadata`. `payjp_fee_included`
 * is fixed at creation (service rules §4): sending it is `invalid_param_key`.
 */
export async function updateTenant(ctx: Context, caller: Caller, input: unknown): Promise<TenantObject> {
  const params = readParams(input, ['id', 'name', 'platform_fee_rate', 'minimum_transfer_amount', 'metadata']);
  const tenantId = requireString(params, 'id');
  const name = readName(params);
  const rate = readRate(params);
  const minimum = readMinimum(params);
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findTenant(trx, caller, tenantId, 'id', 'update');
    const metadata = hasParam(params, 'metadata') ? (mergeMetadata(current.metadata, params.metadata, 'v1') as Record<string, string>) : current.metadata;
    const changes = {
      ...(name === undefined ? {} : { name }),
      ...(rate === undefined ? {} : { platform_fee_rate: rate }),
      ...(minimum === undefined ? {} : { minimum_transfer_amount: minimum }),
      updated_at: now,
    };
    await trx
      .updateTable('tenants')
      .set({ ...changes, metadata: JSON.stringify(metadata) })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('tenant_id', '=', tenantId)
      .execute();
    const tenant = renderTenant({ ...current, ...changes, metadata });
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'tenant.updated', data: tenant, at: now });
    return tenant;
  });
}

/** `tenants.delete`: soft delete; later charges cannot name it, settlement of earlier ones goes on. */
export async function deleteTenant(ctx: Context, caller: Caller, input: unknown): Promise<{ deleted: true; id: string; livemode: boolean }> {
  const params = readParams(input, ['id']);
  const tenantId = requireString(params, 'id');
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findTenant(trx, caller, tenantId, 'id', 'update');
    await trx
      .updateTable('tenants')
      .set({ deleted_at: now, updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('tenant_id', '=', tenantId)
      .execute();
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'tenant.deleted', data: renderTenant(current), at: now });
    return { deleted: true, id: tenantId, livemode: caller.livemode } as const;
  });
}

export async function listTenants(ctx: Context, caller: Caller, input: unknown): Promise<ListObject<TenantObject>> {
  const params = readParams(input, PAGINATION_PARAMS);
  const page = readPage(params);
  const rows = await ctx.db
    .selectFrom('tenants')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('deleted_at', 'is', null)
    .$call(inPage(page, 'tenant_id'))
    .execute();
  return listObject(rows.map(renderTenant), page, TENANTS_URL);
}

export const TENANT_OPERATIONS = [
  defineOperation('tenants.create', createTenant),
  defineOperation('tenants.retrieve', retrieveTenant),
  defineOperation('tenants.update', updateTenant),
  defineOperation('tenants.delete', deleteTenant),
  defineOperation('tenants.list', listTenants),
] as const;
