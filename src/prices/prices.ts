/**
 * Prices (`price_`, v2 §2.1): the minimal resource checkout line items refer to — an amount in yen
 * and its currency (v2 §2.7: other fields not shown). `prices.create` writes `price.created`.
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database, PricesTable } from '../db/schema';
import { reject } from '../domain/errors';
import { createMetadata } from '../domain/metadata';
import { toIsoSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { defineOperation } from '../operations/define';
import { hasParam, optionalInteger, optionalString, readParams, requireString } from '../operations/params';

export type PriceRow = Selectable<PricesTable>;

/** **Decision:** a price is at most what one payment may be (v1 §8: 9,999,999 yen), at least 1 yen. */
export const MAX_UNIT_AMOUNT = 9_999_999;
export const PRICE_CURRENCY = 'jpy';

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type PriceObject = {
  readonly id: string;
  readonly object: 'price';
  readonly livemode: boolean;
  readonly unit_amount: number;
  readonly currency: string;
  readonly active: boolean;
  readonly metadata: Readonly<Record<string, string | number | boolean>>;
  readonly created_at: string;
};

export function renderPrice(row: PriceRow): PriceObject {
  return {
    id: row.price_id,
    object: 'price',
    livemode: row.livemode,
    unit_amount: row.unit_amount,
    currency: row.currency,
    active: row.active,
    metadata: row.metadata,
    created_at: toIsoSeconds(row.created_at),
  };
}

/** `prices.create`: `unit_amount` (integer yen, required), `currency` (jpy), `metadata`. */
export async function createPrice(ctx: Context, caller: Caller, input: unknown): Promise<PriceObject> {
  const params = readParams(input, ['unit_amount', 'currency', 'metadata']);
  const unitAmount = optionalInteger(params, 'unit_amount', { min: 1, max: MAX_UNIT_AMOUNT, code: 'invalid_amount' });
  if (unitAmount === undefined) return reject('missing_param', 'unit_amount', 'unit_amount is required');
  const currency = optionalString(params, 'currency', { code: 'invalid_currency' }) ?? PRICE_CURRENCY;
  if (currency !== PRICE_CURRENCY) reject('invalid_currency', 'currency', `currency must be ${PRICE_CURRENCY}, got ${JSON.stringify(currency)}`);
  const metadata = hasParam(params, 'metadata') ? createMetadata(params.metadata, 'v2') : {};
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('prices')
      .values({ account_id: caller.accountId, livemode: caller.livemode, price_id: ctx.ids.next('price'), unit_amount: unitAmount, currency, metadata: JSON.stringify(metadata), created_at: now, updated_at: now })
      .returningAll()
      .executeTakeFirstOrThrow();
    const price = renderPrice(row);
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'price.created', data: price, at: now, apiVersion: 'v2' });
    return price;
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

export const PRICE_OPERATIONS = [defineOperation('prices.create', createPrice), defineOperation('prices.retrieve', retrievePrice)] as const;
