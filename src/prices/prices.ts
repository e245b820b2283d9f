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
import { mergeMetadata, type Metadata } from '../domain/metadata';
import { toIsoSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { inV2Page, type V2Page } from '../operations/v2-pagination';
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

/** A price to create (parameters read by the v2 codec, src/api/v2/prices.ts). */
export interface CreatePriceCommand {
  /** The id the merchant chose; undefined for a generated one. */
  readonly chosenId: string | undefined;
  readonly unitAmount: number;
  readonly currency: string;
  readonly productId: string | undefined;
  readonly active: boolean;
  readonly nickname: string | null;
  readonly lookupKey: string | null;
  readonly metadata: Metadata;
}

export interface UpdatePriceCommand {
  readonly id: string;
  readonly changes: Partial<Pick<PriceRow, 'active' | 'nickname' | 'lookup_key'>>;
  /** The metadata as sent, merged (and checked) against the price's own once it is found; undefined when not sent. */
  readonly metadata?: unknown;
}

export interface ListPricesCommand {
  readonly page: V2Page;
  readonly productId?: string;
  readonly active?: boolean;
}

/** `prices.create`: the price (its product, when named, must be the account's) and its `price.created`. */
export async function createPrice(ctx: Context, caller: Caller, command: CreatePriceCommand): Promise<PriceRow> {
  const { productId } = command;
  const now = ctx.clock.now();
  const priceId = command.chosenId ?? ctx.ids.next('price');
  return ctx.db.transaction().execute(async (trx) => {
    // Locking the product orders this with products.delete, which refuses a product with prices.
    if (productId !== undefined) await findProduct(trx, caller, productId, { param: 'product_id', lock: true });
    const row = await trx
      .insertInto('prices')
      .values({
        account_id: caller.accountId,
        livemode: caller.livemode,
        price_id: priceId,
        unit_amount: command.unitAmount,
        currency: command.currency,
        active: command.active,
        product_id: productId ?? null,
        nickname: command.nickname,
        lookup_key: command.lookupKey,
        metadata: JSON.stringify(command.metadata),
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) => oc.columns(['account_id', 'livemode', 'price_id']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!row) return reject('already_exist_id', 'id', `Price ${priceId} already exists.`);
    await recordEvent(trx, ctx.ids, priceEvent(row, 'price.created', now));
    return row;
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

export async function retrievePrice(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<PriceRow> {
  const row = (await findPrices(ctx.db, caller, [command.id])).get(command.id);
  if (!row) return reject('invalid_id', 'id', `No such price: ${command.id}`);
  return row;
}

/**
 * `prices.update`: the sent fields, metadata merged (v2 §2.6); the amount of a price never changes
 * (open checkout sessions keep the amount they were created with anyway). `price.updated`.
 */
export async function updatePrice(ctx: Context, caller: Caller, command: UpdatePriceCommand): Promise<PriceRow> {
  const { id } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await trx.selectFrom('prices').selectAll().where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('price_id', '=', id).forUpdate().executeTakeFirst();
    if (!current) return reject('invalid_id', 'id', `No such price: ${id}`);
    const metadata = command.metadata === undefined ? current.metadata : mergeMetadata(current.metadata, command.metadata, 'v2');
    const row = await trx
      .updateTable('prices')
      .set({ ...command.changes, metadata: JSON.stringify(metadata), updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('price_id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    await recordEvent(trx, ctx.ids, priceEvent(row, 'price.updated', now));
    return row;
  });
}

/** `prices.list`: newest first, cursors, optional `product_id` and `active` filters. */
export async function listPrices(ctx: Context, caller: Caller, command: ListPricesCommand): Promise<PriceRow[]> {
  const { page, productId, active } = command;
  let cursor: PriceRow | undefined;
  if (page.cursor !== undefined) {
    cursor = (await findPrices(ctx.db, caller, [page.cursor.id])).get(page.cursor.id);
    if (!cursor) return reject('invalid_id', page.cursor.param, `No such price: ${page.cursor.id}`);
  }
  return ctx.db
    .selectFrom('prices')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(productId !== undefined, (q) => q.where('product_id', '=', productId!))
    .$if(active !== undefined, (q) => q.where('active', '=', active!))
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.price_id }, 'price_id'))
    .execute();
}

export const PRICES_URL = '/v2/prices';
