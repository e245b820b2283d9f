/**
 * The v2 codec of prices (official-sdks.md §2 "Prices"): parameters → typed commands of
 * src/prices/prices.ts, refusals named by parameter, rows → v2 price objects and lists.
 */
import { reject } from '../../domain/errors';
import { MAX_AMOUNT, MAX_LOOKUP_KEY_LENGTH, MAX_TEXT_LENGTH, MIN_PRICE_UNIT_AMOUNT } from '../../domain/limits';
import { createMetadata } from '../../domain/metadata';
import { defineCommandOperation } from '../../operations/define';
import { hasParam, optionalBoolean, optionalFlexibleId, optionalInteger, optionalString, optionalText, readParams, requireString, sentFields } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject } from '../../operations/v2-pagination';
import { createPrice, listPrices, PRICE_CURRENCY, PRICES_URL, renderPrice, retrievePrice, updatePrice, type CreatePriceCommand, type ListPricesCommand, type UpdatePriceCommand } from '../../prices/prices';

/** `unit_amount` (integer yen, required), `currency` (jpy), `product_id`, `id` (chosen), `active` (default true), `nickname`, `lookup_key`, `metadata`. */
function decodeCreate(input: unknown): CreatePriceCommand {
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
  return { chosenId, unitAmount, currency, productId, active, nickname, lookupKey, metadata };
}

/** `active`, `nickname`, `lookup_key`, `metadata`; the amount is fixed at creation. */
function decodeUpdate(input: unknown): UpdatePriceCommand {
  const params = readParams(input, ['id', 'active', 'nickname', 'lookup_key', 'metadata']);
  const id = requireString(params, 'id');
  const changes = sentFields({ active: optionalBoolean(params, 'active'), nickname: optionalText(params, 'nickname', MAX_TEXT_LENGTH), lookup_key: optionalText(params, 'lookup_key', MAX_LOOKUP_KEY_LENGTH) });
  return { id, changes, metadata: hasParam(params, 'metadata') ? params.metadata : undefined };
}

function decodeList(input: unknown): ListPricesCommand {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'product_id', 'active']);
  const page = readV2Page(params);
  const productId = optionalString(params, 'product_id', { code: 'invalid_querystring' });
  return { page, productId, active: optionalBoolean(params, 'active') };
}

export const PRICE_OPERATIONS = [
  defineCommandOperation('prices.create', { decode: decodeCreate, execute: createPrice, encode: renderPrice }),
  defineCommandOperation('prices.retrieve', { decode: (input) => ({ id: requireString(readParams(input, ['id']), 'id') }), execute: retrievePrice, encode: renderPrice }),
  defineCommandOperation('prices.update', { decode: decodeUpdate, execute: updatePrice, encode: renderPrice }),
  defineCommandOperation('prices.list', { decode: decodeList, execute: listPrices, encode: (rows, command) => v2ListObject(rows, command.page, PRICES_URL, renderPrice) }),
];
