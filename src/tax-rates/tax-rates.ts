/**
 * v2 tax rates (official-sdks.md §2 "Tax rates"; v2 §6.1 `tax_rate.created|updated`): a named
 * percentage, inclusive or exclusive, that checkout line items may carry. Create, retrieve, update,
 * list; no delete (deactivate instead). **Decision:** `percentage` and `inclusive` are fixed at
 * creation (a rate already applied must not change under its past uses); a percentage is 0..100
 * with at most 4 decimals, kept as exact decimal text, never a float.
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database, TaxRatesTable } from '../db/schema';
import { reject } from '../domain/errors';
import { mergeMetadata, type Metadata } from '../domain/metadata';
import { toIsoSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { inV2Page, type V2Page } from '../operations/v2-pagination';

export type TaxRateRow = Selectable<TaxRatesTable>;

export const TAX_RATES_URL = '/v2/tax_rates';

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type TaxRateObject = {
  readonly id: string;
  readonly object: 'tax_rate';
  readonly livemode: boolean;
  readonly display_name: string;
  /** Decimal text as stored, e.g. "10.0000"; never a float. */
  readonly percentage: string;
  readonly inclusive: boolean;
  readonly active: boolean;
  readonly country: string | null;
  readonly description: string | null;
  readonly metadata: Metadata;
  readonly created_at: string;
  readonly updated_at: string;
};

export function renderTaxRate(row: TaxRateRow): TaxRateObject {
  return {
    id: row.tax_rate_id,
    object: 'tax_rate',
    livemode: row.livemode,
    display_name: row.display_name,
    percentage: row.percentage,
    inclusive: row.inclusive,
    active: row.active,
    country: row.country,
    description: row.description,
    metadata: row.metadata,
    created_at: toIsoSeconds(row.created_at),
    updated_at: toIsoSeconds(row.updated_at),
  };
}

function taxRateEvent(row: TaxRateRow, type: 'tax_rate.created' | 'tax_rate.updated', at: Date) {
  return { accountId: row.account_id, livemode: row.livemode, type, data: renderTaxRate(row), at, apiVersion: 'v2' as const };
}

async function findTaxRate(executor: Kysely<Database>, caller: Caller, id: string, options: { readonly param?: string; readonly lock?: boolean } = {}): Promise<TaxRateRow> {
  let query = executor.selectFrom('tax_rates').selectAll().where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('tax_rate_id', '=', id);
  if (options.lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) return reject('invalid_id', options.param ?? 'id', `No such tax rate: ${id}`);
  return row;
}

/** A tax rate to create (parameters read by the v2 codec, src/api/v2/tax-rates.ts). */
export interface CreateTaxRateCommand {
  readonly displayName: string;
  readonly percentage: string;
  readonly inclusive: boolean;
  readonly active: boolean;
  readonly country: string | null;
  readonly description: string | null;
  readonly metadata: Metadata;
}

export interface UpdateTaxRateCommand {
  readonly id: string;
  readonly changes: Partial<Pick<TaxRateRow, 'display_name' | 'active' | 'country' | 'description'>>;
  /** The metadata as sent, merged (and checked) against the rate's own once it is found; undefined when not sent. */
  readonly metadata?: unknown;
}

export interface ListTaxRatesCommand {
  readonly page: V2Page;
  readonly active?: boolean;
}

/** `tax_rates.create`: the rate and its `tax_rate.created`. */
export async function createTaxRate(ctx: Context, caller: Caller, command: CreateTaxRateCommand): Promise<TaxRateRow> {
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto('tax_rates')
      .values({ account_id: caller.accountId, livemode: caller.livemode, tax_rate_id: ctx.ids.next('taxRate'), display_name: command.displayName, percentage: command.percentage, inclusive: command.inclusive, active: command.active, country: command.country, description: command.description, metadata: JSON.stringify(command.metadata), created_at: now, updated_at: now })
      .returningAll()
      .executeTakeFirstOrThrow();
    await recordEvent(trx, ctx.ids, taxRateEvent(inserted, 'tax_rate.created', now));
    return inserted;
  });
}

export function retrieveTaxRate(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<TaxRateRow> {
  return findTaxRate(ctx.db, caller, command.id);
}

/** `tax_rates.update`: the sent fields, metadata merged (v2 §2.6); `tax_rate.updated`. */
export async function updateTaxRate(ctx: Context, caller: Caller, command: UpdateTaxRateCommand): Promise<TaxRateRow> {
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findTaxRate(trx, caller, command.id, { lock: true });
    const metadata = command.metadata === undefined ? current.metadata : mergeMetadata(current.metadata, command.metadata, 'v2');
    const updated = await trx
      .updateTable('tax_rates')
      .set({ ...command.changes, metadata: JSON.stringify(metadata), updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('tax_rate_id', '=', command.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    await recordEvent(trx, ctx.ids, taxRateEvent(updated, 'tax_rate.updated', now));
    return updated;
  });
}

/** `tax_rates.list`: newest first, cursors, optional `active` filter. */
export async function listTaxRates(ctx: Context, caller: Caller, command: ListTaxRatesCommand): Promise<TaxRateRow[]> {
  const { page, active } = command;
  const cursor = page.cursor === undefined ? undefined : await findTaxRate(ctx.db, caller, page.cursor.id, { param: page.cursor.param });
  return ctx.db
    .selectFrom('tax_rates')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(active !== undefined, (q) => q.where('active', '=', active!))
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.tax_rate_id }, 'tax_rate_id'))
    .execute();
}
