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
import { mergeMetadata, type Metadata } from '../domain/metadata';
import { toIsoSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { inV2Page, type V2Page } from '../operations/v2-pagination';

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

/** A product to create (parameters read by the v2 codec, src/api/v2/products.ts). */
export interface CreateProductCommand {
  /** The id the merchant chose; undefined for a generated one. */
  readonly chosenId: string | undefined;
  readonly name: string;
  readonly active: boolean;
  readonly description: string | null;
  readonly unitLabel: string | null;
  readonly url: string | null;
  readonly metadata: Metadata;
}

export interface UpdateProductCommand {
  readonly id: string;
  /** The sent fields; `default_price_id` null clears it. */
  readonly changes: Partial<Pick<ProductRow, 'name' | 'active' | 'description' | 'unit_label' | 'url' | 'default_price_id'>>;
  /** The metadata as sent, merged (and checked) against the product's own once it is found; undefined when not sent. */
  readonly metadata?: unknown;
}

export interface ListProductsCommand {
  readonly page: V2Page;
  readonly active?: boolean;
}

/** `products.create`: the product (a chosen id taken is `already_exist_id`) and its `product.created`. */
export async function createProduct(ctx: Context, caller: Caller, command: CreateProductCommand): Promise<ProductRow> {
  const now = ctx.clock.now();
  const productId = command.chosenId ?? ctx.ids.next('product');
  return ctx.db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto('products')
      .values({
        account_id: caller.accountId,
        livemode: caller.livemode,
        product_id: productId,
        name: command.name,
        active: command.active,
        description: command.description,
        unit_label: command.unitLabel,
        url: command.url,
        default_price_id: null,
        metadata: JSON.stringify(command.metadata),
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
}

export function retrieveProduct(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<ProductRow> {
  return findProduct(ctx.db, caller, command.id);
}

/**
 * `products.update`: the sent fields, metadata merged (v2 §2.6), `default_price_id` an active
 * price of this product (`invalid_default_price` otherwise). `product.updated`.
 */
export async function updateProduct(ctx: Context, caller: Caller, command: UpdateProductCommand): Promise<ProductRow> {
  const { id, changes } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findProduct(trx, caller, id, { lock: true });
    const metadata = command.metadata === undefined ? current.metadata : mergeMetadata(current.metadata, command.metadata, 'v2');
    const defaultPrice = changes.default_price_id;
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
}

/** `products.delete`: only while no price names the product (`product_has_prices`); `product.deleted`; returns the deleted row. */
export async function deleteProduct(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<ProductRow> {
  const { id } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    // The product's lock orders this with prices.create of the same product, which locks it too.
    const current = await findProduct(trx, caller, id, { lock: true });
    const price = await trx.selectFrom('prices').select('price_id').where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('product_id', '=', id).executeTakeFirst();
    if (price) reject('product_has_prices', 'id', `product ${id} has prices (${price.price_id}); deactivate it instead`);
    await trx.deleteFrom('products').where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('product_id', '=', id).execute();
    await recordEvent(trx, ctx.ids, productEvent(current, 'product.deleted', now));
    return current;
  });
}

/** `products.list`: newest first, cursors, optional `active` filter. */
export async function listProducts(ctx: Context, caller: Caller, command: ListProductsCommand): Promise<ProductRow[]> {
  const { page, active } = command;
  const cursor = page.cursor === undefined ? undefined : await findProduct(ctx.db, caller, page.cursor.id, { param: page.cursor.param });
  return ctx.db
    .selectFrom('products')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(active !== undefined, (q) => q.where('active', '=', active!))
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.product_id }, 'product_id'))
    .execute();
}
