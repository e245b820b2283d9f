/**
 * Prices (`price_`, v2 §2.1; official-sdks.md §2 "Prices"): an amount in yen of a product, what
 * checkout line items refer to. Create, retrieve, update (`active`, `nickname`, `lookup_key`,
 * metadata), list; `price.created` / `price.updated` in the same transaction. There is no delete
 * (the SDK has none): a price is deactivated. **Decision:** `product_id` is optional here (prices
 * made before products existed have none); when given it must name a product of the account.
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database, PricesTable } from '../db/schema';
import { reject } from '../domain/errors';
import { MAX_AMOUNT, MAX_LOOKUP_KEY_LENGTH, MAX_TEXT_LENGTH, MIN_PRICE_UNIT_AMOUNT } from '../domain/limits';
import { createMetadata, mergeMetadata } from '../domain/metadata';
import { toIsoSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { defineOperation } from '../operations/define';
import { hasParam, optionalBoolean, optionalFlexibleId, optionalInteger, optionalString, optionalText, readParams, requireString, sentFields } from '../operations/params';
import { inV2Page, readV2Page, V2_PAGINATION_PARAMS, v2ListObject, type V2List } from '../operations/v2-pagination';
import { findProduct } from '../products/products';

export type PriceRow = Selectable<PricesTable>;

export const PRICE_CURRENCY = 'jpy';

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type PriceObject = {
  readonly id: string;
  readonly object: 'price';
  readonly livemode: boolean;
  readonly product_id: string | null;
  readonly type: 'one_time';
  readonly unit_amount: number;
  readonly currency: string;
  readonly active: boolean;
  readonly nickname: string | null;
  readonly lookup_key: string | null;
  readonly metadata: Readonly<Record<string, string | number | boolean>>;
  readonly created_at: string;
  readonly updated_at: string;
};

export function renderPrice(row: PriceRow): PriceObject {
  return {
    id: row.price_id,
    object: 'price',
    livemode: row.livemode,
    product_id: row.product_id,
    // Recurring prices belong to v1 plans; every v2 price is paid once.
    type: 'one_time',
    unit_amount: row.unit_amount,
    currency: row.currency,
    active: row.active,
    nickname: row.nickname,
    lookup_key: row.lookup_key,
    metadata: row.metadata,
    created_at: toIsoSeconds(row.created_at),
    updated_at: toIsoSeconds(row.updated_at),
  };
}


function priceEvent(row: PriceRow, type: 'price.created' | 'price.updated', at: Date) {
  return { accountId: row.account_id, livemode: row.livemode, type, data: renderPrice(row), at, apiVersion: 'v2' as const };
}

/**
 * `prices.create`: `unit_amount` (integer yen, required), `currency` (jpy), `product_id`, `id`
 * (chosen), `active` (default true), `nickname`, `lookup_key`, `metadata`.
 */
export async function createPrice(ctx: Context, caller: Caller, input: unknown): Promise<PriceObject> {
  const params = readParams(input, ['unit_amount', 'currency', 'metadata', 'product_id', 'id', 'active', 'nickname', 'lookup_key']);
  const chosenId = optionalFlexibleId(params);
  const unitAmount = optionalInteger(params, 'unit_amount', { min: MIN_PRICE_UNIT_AMOUNT, max: MAX_AMOUNT, code: 'invalid_amount' });
  if (unitAmount === undefined) return reject('missing_param', 'unit_amount', 'unit_amount is required');
  const currency = optionalString(params, 'currency', { code: 'invalid_currency' }) ?? PRICE_CURRENCY;
  if (currency !== PRICE_CURRENCY) reject('invalid_currency', 'currency', `currency must be ${PRICE_CURRENCY}, got ${JSON.stringify(currency)}`);
  const productId = optionalString(params, 'product_id');
  const active = optionalBoolean(params, 'active') ?? true;
  const nickname = optionalText(params, 'nickname', MAX_TEXT_LENGTH) ?? null;
  const lookupKey = optionalText(params, 'lookup_key', MAX_LOOKUP_KEY_LENGTH) ?? null;
  const metadata = hasParam(params, 'metadata') ? createMetadata(params.metadata, 'v2') : {};
  const now = ctx.clock.now();
  const priceId = chosenId ?? ctx.ids.next('price');
  return ctx.db.transaction().execute(async (trx) => {
    // Locking the product orders this with products.delete, which refuses a product with prices.
    if (productId !== undefined) await findProduct(trx, caller, productId, { param: 'product_id', lock: true });
    const row = await trx
      .insertInto('prices')
      .values({
        account_id: caller.accountId,
        livemode: caller.livemode,
        price_id: priceId,
        unit_amount: unitAmount,
        currency,
        active,
        product_id: productId ?? null,
        nickname,
        lookup_key: lookupKey,
        metadata: JSON.stringify(metadata),
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) => oc.columns(['account_id', 'livemode', 'price_id']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!row) return reject('already_exist_id', 'id', `Price ${priceId} already exists.`);
    await recordEvent(trx, ctx.ids, priceEvent(row, 'price.created', now));
    return renderPrice(row);
  });
}

export async function findPrices(executor: Kysely<Database>, caller: Caller, priceIds: readonly string[]): Promise<Map<string, PriceRow>> {
  if (priceIds.length === 0) return new Map();
  const rows = await executor
    .selectFrom('prices')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('price_id', 'in', [...new Set(priceIds)])
    .execute();
  return new Map(rows.map((row) => [row.price_id, row]));
}

export async function retrievePrice(ctx: Context, caller: Caller, input: unknown): Promise<PriceObject> {
  const params = readParams(input, ['id']);
  const id = requireString(params, 'id');
  const row = (await findPrices(ctx.db, caller, [id])).get(id);
  if (!row) return reject('invalid_id', 'id', `No such price: ${id}`);
  return renderPrice(row);
}

/**
 * `prices.update`: `active`, `nickname`, `lookup_key`, `metadata` (v2 §2.6 merge); the amount of a
 * price never changes (open checkout sessions keep the amount they were created with anyway).
 * `price.updated`.
 */
export async function updatePrice(ctx: Context, caller: Caller, input: unknown): Promise<PriceObject> {
  const params = readParams(input, ['id', 'active', 'nickname', 'lookup_key', 'metadata']);
  const id = requireString(params, 'id');
  const changes = sentFields({ active: optionalBoolean(params, 'active'), nickname: optionalText(params, 'nickname', MAX_TEXT_LENGTH), lookup_key: optionalText(params, 'lookup_key', MAX_LOOKUP_KEY_LENGTH) });
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await trx.selectFrom('prices').selectAll().where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('price_id', '=', id).forUpdate().executeTakeFirst();
    if (!current) return reject('invalid_id', 'id', `No such price: ${id}`);
    const metadata = hasParam(params, 'metadata') ? mergeMetadata(current.metadata, params.metadata, 'v2') : current.metadata;
    const row = await trx
      .updateTable('prices')
      .set({ ...changes, metadata: JSON.stringify(metadata), updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('price_id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    await recordEvent(trx, ctx.ids, priceEvent(row, 'price.updated', now));
    return renderPrice(row);
  });
}

/** `prices.list`: newest first, cursors, optional `product_id` and `active` filters. */
export async function listPrices(ctx: Context, caller: Caller, input: unknown): Promise<V2List<PriceObject>> {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'product_id', 'active']);
  const page = readV2Page(params);
  const productId = optionalString(params, 'product_id', { code: 'invalid_querystring' });
  const active = optionalBoolean(params, 'active');
  let cursor: PriceRow | undefined;
  if (page.cursor !== undefined) {
    cursor = (await findPrices(ctx.db, caller, [page.cursor.id])).get(page.cursor.id);
    if (!cursor) return reject('invalid_id', page.cursor.param, `No such price: ${page.cursor.id}`);
  }
  const rows = await ctx.db
    .selectFrom('prices')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(productId !== undefined, (q) => q.where('product_id', '=', productId!))
    .$if(active !== undefined, (q) => q.where('active', '=', active!))
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.price_id }, 'price_id'))
    .execute();
  return v2ListObject(rows, page, PRICES_URL, renderPrice);
}

export const PRICES_URL = '/v2/prices';

export const PRICE_OPERATIONS = [
  defineOperation('prices.create', createPrice),
  defineOperation('prices.retrieve', retrievePrice),
  defineOperation('prices.update', updatePrice),
  defineOperation('prices.list', listPrices),
] as const;
