/**
 * Tenants (platform mode, service rules §4 "Platform mode"; v1 §2.1 prefix `ten_`): the merchants
 * of a platform. A tenant has `platform_fee_rate` (percent, two decimals, at most 95),
 * `payjp_fee_included` (fixed at creation: it decides who bears the service fee of every charge
 * already made) and `minimum_transfer_amount` (default 10,000, at least 1,000). Create, retrieve,
 * update, delete (softly: statements and charges keep naming it), list; each change writes its
 * `tenant.*` event in the same transaction (service rules §5). Commands and their executions
 * here; the v1 codec (parameters, checks, objects) is src/api/v1/tenants.ts.
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database, TenantsTable } from '../db/schema';
import { reject } from '../domain/errors';
import { mergeMetadata, type MetadataFlavour } from '../domain/metadata';
import { toUnixSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { inPage, type Page } from '../operations/pagination';

export const TENANTS_URL = '/v1/tenants';

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

/** How `findTenant` reads: `lock` takes the row FOR SHARE / UPDATE; `deleted: 'accepted'` also finds a deleted tenant. */
export interface FindTenantOptions {
  readonly lock?: 'share' | 'update';
  readonly deleted?: 'refused' | 'accepted';
}

/** A tenant of the caller (a live one unless `deleted: 'accepted'`), or `invalid_id` on `param`. */
export async function findTenant(executor: Kysely<Database>, caller: Pick<Caller, 'accountId' | 'livemode'>, tenantId: string, param: string, options: FindTenantOptions = {}): Promise<TenantRow> {
  const { lock, deleted = 'refused' } = options;
  let query = executor
    .selectFrom('tenants')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('tenant_id', '=', tenantId);
  if (deleted === 'refused') query = query.where('deleted_at', 'is', null);
  if (lock === 'share') query = query.forShare();
  else if (lock === 'update') query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) return reject('invalid_id', param, `No such tenant: ${tenantId}`);
  return row;
}

/** `tenants.create` as a command: every value checked by the codec that built it. */
export interface CreateTenantCommand {
  /** A chosen id, or undefined for a generated one. */
  readonly id: string | undefined;
  readonly name: string | null;
  /** The platform fee rate as stored (formatRate: two decimals). */
  readonly platformFeeRate: string;
  readonly payjpFeeIncluded: boolean;
  readonly minimumTransferAmount: number;
  readonly metadata: Readonly<Record<string, string>>;
}

/** Creates a tenant and writes `tenant.created`. A chosen id already taken is `already_exist_id`. */
export async function createTenant(ctx: Context, caller: Caller, command: CreateTenantCommand): Promise<TenantRow> {
  const now = ctx.clock.now();
  const tenantId = command.id ?? ctx.ids.next('tenant');
  return ctx.db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('tenants')
      .values({
        account_id: caller.accountId,
        livemode: caller.livemode,
        tenant_id: tenantId,
        name: command.name,
        platform_fee_rate: command.platformFeeRate,
        payjp_fee_included: command.payjpFeeIncluded,
        minimum_transfer_amount: command.minimumTransferAmount,
        metadata: JSON.stringify(command.metadata),
        created_at: now,
        updated_at: now,
      })
      // Deleted tenants keep their id: their statements and charges still name it.
      .onConflict((oc) => oc.columns(['account_id', 'livemode', 'tenant_id']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!row) return reject('already_exist_id', 'id', `Tenant ${tenantId} already exists.`);
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'tenant.created', data: renderTenant(row), at: now });
    return row;
  });
}

export async function retrieveTenant(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<TenantRow> {
  return findTenant(ctx.db, caller, command.id, 'id');
}

/** `tenants.update` as a command: each field undefined when not sent; a metadata change under its API's rules. */
export interface UpdateTenantCommand {
  readonly id: string;
  /** null clears it. */
  readonly name: string | null | undefined;
  readonly platformFeeRate: string | undefined;
  readonly minimumTransferAmount: number | undefined;
  /** The metadata parameter as sent, merged into the stored metadata by `flavour`'s rules. */
  readonly metadata: { readonly update: unknown; readonly flavour: MetadataFlavour } | undefined;
}

/**
 * Changes `name`, `platform_fee_rate` (applies to charges created afterwards),
 * `minimum_transfer_amount` (applies from the next term close) and `metadata`.
 * `payjp_fee_included` is fixed at creation (service rules §4).
 */
export async function updateTenant(ctx: Context, caller: Caller, command: UpdateTenantCommand): Promise<TenantRow> {
  const { id: tenantId, name, platformFeeRate: rate, minimumTransferAmount: minimum } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findTenant(trx, caller, tenantId, 'id', { lock: 'update' });
    const metadata = command.metadata === undefined ? current.metadata : (mergeMetadata(current.metadata, command.metadata.update, command.metadata.flavour) as Record<string, string>);
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
    const row = { ...current, ...changes, metadata } satisfies TenantRow;
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'tenant.updated', data: renderTenant(row), at: now });
    return row;
  });
}

/** The deleted-object response (v1 §2.9). */
export type DeletedTenant = { readonly deleted: true; readonly id: string; readonly livemode: boolean };

/** `tenants.delete`: soft delete; later charges cannot name it, settlement of earlier ones goes on. */
export async function deleteTenant(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<DeletedTenant> {
  const tenantId = command.id;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findTenant(trx, caller, tenantId, 'id', { lock: 'update' });
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

/** One page of live tenants (v1 §4.1), newest first, one past the limit. */
export async function listTenants(ctx: Context, caller: Caller, page: Page): Promise<TenantRow[]> {
  return ctx.db
    .selectFrom('tenants')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('deleted_at', 'is', null)
    .$call(inPage(page, 'tenant_id'))
    .execute();
}
