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
import { MAX_TEXT_LENGTH } from '../domain/limits';
import { createMetadata, mergeMetadata, type Metadata } from '../domain/metadata';
import { toIsoSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { defineOperation } from '../operations/define';
import { hasParam, optionalBoolean, optionalText, readParams, requireString, sentFields, type Params } from '../operations/params';
import { inV2Page, readV2Page, V2_PAGINATION_PARAMS, v2ListObject, type V2List } from '../operations/v2-pagination';

export type TaxRateRow = Selectable<TaxRatesTable>;

export const TAX_RATES_URL = '/v2/tax_rates';
/** 0 to 100 with at most four decimals, as a number or a string. */
const PERCENTAGE_TEXT = /^(?:100(?:\.0{1,4})?|\d{1,2}(?:\.\d{1,4})?)$/;

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

function readPercentage(params: Params): string {
  const raw = params.percentage;
  if (raw === undefined || raw === null) return reject('missing_param', 'percentage', 'percentage is required');
  const text = typeof raw === 'number' && Number.isFinite(raw) ? String(raw) : raw;
  if (typeof text !== 'string' || !PERCENTAGE_TEXT.test(text)) return reject('invalid_param_key', 'percentage', `percentage must be a number from 0 to 100 with at most 4 decimals, got ${JSON.stringify(raw)}`);
  return text;
}

function readCountry(params: Params): string | null | undefined {
  const country = optionalText(params, 'country', 2);
  if (country !== undefined && country !== null && !/^[A-Z]{2}$/.test(country)) reject('invalid_country', 'country', 'country must be a 2-letter ISO 3166-1 code in capitals');
  return country;
}

/** `tax_rates.create`: `display_name`, `percentage`, `inclusive` (all required), `active`, `country`, `description`, `metadata`. */
export async function createTaxRate(ctx: Context, caller: Caller, input: unknown): Promise<TaxRateObject> {
  const params = readParams(input, ['display_name', 'percentage', 'inclusive', 'active', 'country', 'description', 'metadata']);
  const displayName = optionalText(params, 'display_name', MAX_TEXT_LENGTH);
  if (displayName === undefined || displayName === null) return reject('missing_param', 'display_name', 'display_name is required');
  const percentage = readPercentage(params);
  const inclusive = optionalBoolean(params, 'inclusive');
  if (inclusive === undefined) return reject('missing_param', 'inclusive', 'inclusive is required');
  const active = optionalBoolean(params, 'active') ?? true;
  const country = readCountry(params) ?? null;
  const description = optionalText(params, 'description', MAX_TEXT_LENGTH) ?? null;
  const metadata = hasParam(params, 'metadata') ? createMetadata(params.metadata, 'v2') : {};
  const now = ctx.clock.now();
  const row = await ctx.db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto('tax_rates')
      .values({ account_id: caller.accountId, livemode: caller.livemode, tax_rate_id: ctx.ids.next('taxRate'), display_name: displayName, percentage, inclusive, active, country, description, metadata: JSON.stringify(metadata), created_at: now, updated_at: now })
      .returningAll()
      .executeTakeFirstOrThrow();
    await recordEvent(trx, ctx.ids, taxRateEvent(inserted, 'tax_rate.created', now));
    return inserted;
  });
  return renderTaxRate(row);
}

export async function retrieveTaxRate(ctx: Context, caller: Caller, input: unknown): Promise<TaxRateObject> {
  const params = readParams(input, ['id']);
  return renderTaxRate(await findTaxRate(ctx.db, caller, requireString(params, 'id')));
}

/** `tax_rates.update`: `display_name`, `active`, `country`, `description`, `metadata` (v2 §2.6 merge); `tax_rate.updated`. */
export async function updateTaxRate(ctx: Context, caller: Caller, input: unknown): Promise<TaxRateObject> {
  const params = readParams(input, ['id', 'display_name', 'active', 'country', 'description', 'metadata']);
  const id = requireString(params, 'id');
  const displayName = optionalText(params, 'display_name', MAX_TEXT_LENGTH);
  if (displayName === null) reject('missing_param', 'display_name', 'display_name cannot be emptied');
  const changes = sentFields({ display_name: displayName, active: optionalBoolean(params, 'active'), country: readCountry(params), description: optionalText(params, 'description', MAX_TEXT_LENGTH) });
  const now = ctx.clock.now();
  const row = await ctx.db.transaction().execute(async (trx) => {
    const current = await findTaxRate(trx, caller, id, { lock: true });
    const metadata = hasParam(params, 'metadata') ? mergeMetadata(current.metadata, params.metadata, 'v2') : current.metadata;
    const updated = await trx
      .updateTable('tax_rates')
      .set({ ...changes, metadata: JSON.stringify(metadata), updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('tax_rate_id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    await recordEvent(trx, ctx.ids, taxRateEvent(updated, 'tax_rate.updated', now));
    return updated;
  });
  return renderTaxRate(row);
}

/** `tax_rates.list`: newest first, cursors, optional `active` filter. */
export async function listTaxRates(ctx: Context, caller: Caller, input: unknown): Promise<V2List<TaxRateObject>> {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'active']);
  const page = readV2Page(params);
  const active = optionalBoolean(params, 'active');
  const cursor = page.cursor === undefined ? undefined : await findTaxRate(ctx.db, caller, page.cursor.id, { param: page.cursor.param });
  const rows = await ctx.db
    .selectFrom('tax_rates')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(active !== undefined, (q) => q.where('active', '=', active!))
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.tax_rate_id }, 'tax_rate_id'))
    .execute();
  return v2ListObject(rows, page, TAX_RATES_URL, renderTaxRate);
}

export const TAX_RATE_OPERATIONS = [
  defineOperation('tax_rates.create', createTaxRate),
  defineOperation('tax_rates.retrieve', retrieveTaxRate),
  defineOperation('tax_rates.update', updateTaxRate),
  defineOperation('tax_rates.list', listTaxRates),
] as const;
