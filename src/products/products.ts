/**
 * v2 products (official-sdks.md §2 "Products"; v2 §6.1 `product.*`): what a merchant sells, the
 * parent of its prices. Create (own id allowed), retrieve, update, list, and delete while the
 * product has no prices (`product_has_prices` otherwise: a price names its product, and checkout
 * sessions name prices). Every change writes its event in the same transaction.
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database, ProductsTable } from '../db/schema';
import { reject } from '../domain/errors';
import { MAX_TEXT_LENGTH, MAX_UNIT_LABEL_LENGTH, MAX_URL_LENGTH } from '../domain/limits';
import { createMetadata, mergeMetadata, type Metadata } from '../domain/metadata';
import { toIsoSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { defineOperation } from '../operations/define';
import { hasParam, optionalBoolean, optionalFlexibleId, optionalText, readParams, requireString, sentFields, type Params } from '../operations/params';
import { inV2Page, readV2Page, V2_PAGINATION_PARAMS, v2ListObject, type V2List } from '../operations/v2-pagination';

export type ProductRow = Selectable<ProductsTable>;

export const PRODUCTS_URL = '/v2/products';

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type ProductObject = {
  readonly id: string;
  readonly object: 'product';
  readonly livemode: boolean;
  readonly name: string;
  readonly active: boolean;
  readonly description: string | null;
  readonly unit_label: string | null;
  readonly url: string | null;
  readonly default_price_id: string | null;
  readonly metadata: Metadata;
  readonly created_at: string;
  readonly updated_at: string;
};

export function renderProduct(row: ProductRow): ProductObject {
  return {
    id: row.product_id,
    object: 'product',
    livemode: row.livemode,
    name: row.name,
    active: row.active,
    description: row.description,
    unit_label: row.unit_label,
    url: row.url,
    default_price_id: row.default_price_id,
    metadata: row.metadata,
    created_at: toIsoSeconds(row.created_at),
    updated_at: toIsoSeconds(row.updated_at),
  };
}

function productEvent(row: ProductRow, type: 'product.created' | 'product.updated' | 'product.deleted', at: Date) {
  return { accountId: row.account_id, livemode: row.livemode, type, data: renderProduct(row), at, apiVersion: 'v2' as const };
}

/** The product `id` of the caller's account and mode, locked when `lock` is set; unknown: `invalid_id` on `param`. */
export async function findProduct(executor: Kysely<Database>, caller: Caller, id: string, options: { readonly param?: string; readonly lock?: boolean } = {}): Promise<ProductRow> {
  let query = executor.selectFrom('products').selectAll().where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('product_id', '=', id);
  if (options.lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) return reject('invalid_id', options.param ?? 'id', `No such product: ${id}`);
  return row;
}

function readUrl(params: Params): string | null | undefined {
  const url = optionalText(params, 'url', MAX_URL_LENGTH);
  if (url === undefined || url === null) return url;
  if (!/^https?:\/\/\S+$/.test(url)) reject('invalid_param_key', 'url', 'url must be an http or https URL');
  return url;
}

/** The fields create and update share, as sent (undefined when not sent). */
function readProductFields(params: Params) {
  return {
    active: optionalBoolean(params, 'active'),
    description: optionalText(params, 'description', MAX_TEXT_LENGTH),
    unit_label: optionalText(params, 'unit_label', MAX_UNIT_LABEL_LENGTH),
    url: readUrl(params),
  };
}

function readName(params: Params, required: boolean): string | undefined {
  const name = optionalText(params, 'name', MAX_TEXT_LENGTH);
  if (name === null || (name === undefined && required)) return reject('missing_param', 'name', 'name is required');
  return name;
}

/** `products.create`: `name` (required), `id` (chosen), `active` (default true), `description`, `unit_label`, `url`, `metadata`. */
export async function createProduct(ctx: Context, caller: Caller, input: unknown): Promise<ProductObject> {
  const params = readParams(input, ['id', 'name', 'active', 'description', 'unit_label', 'url', 'metadata']);
  const chosenId = optionalFlexibleId(params);
  const name = readName(params, true)!;
  const fields = readProductFields(params);
  const metadata = hasParam(params, 'metadata') ? createMetadata(params.metadata, 'v2') : {};
  const now = ctx.clock.now();
  const productId = chosenId ?? ctx.ids.next('product');
  const row = await ctx.db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto('products')
      .values({
        account_id: caller.accountId,
        livemode: caller.livemode,
        product_id: productId,
        name,
        active: fields.active ?? true,
        description: fields.description ?? null,
        unit_label: fields.unit_label ?? null,
        url: fields.url ?? null,
        default_price_id: null,
        metadata: JSON.stringify(metadata),
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) => oc.columns(['account_id', 'livemode', 'product_id']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!inserted) return reject('already_exist_id', 'id', `Product ${productId} already exists.`);
    await recordEvent(trx, ctx.ids, productEvent(inserted, 'product.created', now));
    return inserted;
  });
  return renderProduct(row);
}

export async function retrieveProduct(ctx: Context, caller: Caller, input: unknown): Promise<ProductObject> {
  const params = readParams(input, ['id']);
  return renderProduct(await findProduct(ctx.db, caller, requireString(params, 'id')));
}

/**
 * `products.update`: `name`, `active`, `description`, `unit_label`, `url`, `metadata` (v2 §2.6
 * merge), `default_price_id` (an active price of this product, `invalid_default_price` otherwise;
 * the empty string clears it). `product.updated`.
 */
export async function updateProduct(ctx: Context, caller: Caller, input: unknown): Promise<ProductObject> {
  const params = readParams(input, ['id', 'name', 'active', 'description', 'unit_label', 'url', 'default_price_id', 'metadata']);
  const id = requireString(params, 'id');
  const name = readName(params, false);
  const fields = readProductFields(params);
  const defaultPrice = optionalText(params, 'default_price_id', MAX_TEXT_LENGTH);
  const now = ctx.clock.now();
  const row = await ctx.db.transaction().execute(async (trx) => {
    const current = await findProduct(trx, caller, id, { lock: true });
    const metadata = hasParam(params, 'metadata') ? mergeMetadata(current.metadata, params.metadata, 'v2') : current.metadata;
    if (defaultPrice !== undefined && defaultPrice !== null) {
      const price = await trx
        .selectFrom('prices')
        .select(['active', 'product_id'])
        .where('account_id', '=', caller.accountId)
        .where('livemode', '=', caller.livemode)
        .where('price_id', '=', defaultPrice)
        .executeTakeFirst();
      if (!price || !price.active || price.product_id !== id) reject('invalid_default_price', 'default_price_id', `${defaultPrice} is not an active price of product ${id}`);
    }
    const changes = sentFields({ ...fields, name, default_price_id: defaultPrice });
    const updated = await trx
      .updateTable('products')
      .set({ ...changes, metadata: JSON.stringify(metadata), updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('product_id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    await recordEvent(trx, ctx.ids, productEvent(updated, 'product.updated', now));
    return updated;
  });
  return renderProduct(row);
}

/** `products.delete`: only while no price names the product (`product_has_prices`); `product.deleted`; answers `{ id, object, deleted }`. */
export async function deleteProduct(ctx: Context, caller: Caller, input: unknown): Promise<{ readonly id: string; readonly object: 'product'; readonly deleted: true; readonly livemode: boolean }> {
  const params = readParams(input, ['id']);
  const id = requireString(params, 'id');
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    // The product's lock orders this with prices.create of the same product, which locks it too.
    const current = await findProduct(trx, caller, id, { lock: true });
    const price = await trx.selectFrom('prices').select('price_id').where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('product_id', '=', id).executeTakeFirst();
    if (price) reject('product_has_prices', 'id', `product ${id} has prices (${price.price_id}); deactivate it instead`);
    await trx.deleteFrom('products').where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('product_id', '=', id).execute();
    await recordEvent(trx, ctx.ids, productEvent(current, 'product.deleted', now));
    return { id, object: 'product', deleted: true, livemode: caller.livemode } as const;
  });
}

/** `products.list`: newest first, cursors, optional `active` filter. */
export async function listProducts(ctx: Context, caller: Caller, input: unknown): Promise<V2List<ProductObject>> {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'active']);
  const page = readV2Page(params);
  const active = optionalBoolean(params, 'active');
  const cursor = page.cursor === undefined ? undefined : await findProduct(ctx.db, caller, page.cursor.id, { param: page.cursor.param });
  const rows = await ctx.db
    .selectFrom('products')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(active !== undefined, (q) => q.where('active', '=', active!))
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.product_id }, 'product_id'))
    .execute();
  return v2ListObject(rows, page, PRODUCTS_URL, renderProduct);
}

export const PRODUCT_OPERATIONS = [
  defineOperation('products.create', createProduct),
  defineOperation('products.retrieve', retrieveProduct),
  defineOperation('products.update', updateProduct),
  defineOperation('products.delete', deleteProduct),
  defineOperation('products.list', listProducts),
] as const;
