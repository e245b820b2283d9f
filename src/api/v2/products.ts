/**
 * The v2 codec of products (official-sdks.md §2 "Products"): parameters → typed commands of
 * src/products/products.ts, refusals named by parameter, rows → v2 product objects and lists.
 */
import { reject } from '../../domain/errors';
import { MAX_TEXT_LENGTH, MAX_UNIT_LABEL_LENGTH, MAX_URL_LENGTH } from '../../domain/limits';
import { createMetadata } from '../../domain/metadata';
import { defineCommandOperation } from '../../operations/define';
import { hasParam, optionalBoolean, optionalFlexibleId, optionalText, readParams, requireString, sentFields, type Params } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject } from '../../operations/v2-pagination';
import {
  createProduct,
  deleteProduct,
  listProducts,
  PRODUCTS_URL,
  renderProduct,
  retrieveProduct,
  updateProduct,
  type CreateProductCommand,
  type ListProductsCommand,
  type ProductRow,
  type UpdateProductCommand,
} from '../../products/products';

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

/** `name` (required), `id` (chosen), `active` (default true), `description`, `unit_label`, `url`, `metadata`. */
function decodeCreate(input: unknown): CreateProductCommand {
  const params = readParams(input, ['id', 'name', 'active', 'description', 'unit_label', 'url', 'metadata']);
  const chosenId = optionalFlexibleId(params);
  const name = readName(params, true)!;
  const fields = readProductFields(params);
  const metadata = hasParam(params, 'metadata') ? createMetadata(params.metadata, 'v2') : {};
  return { chosenId, name, active: fields.active ?? true, description: fields.description ?? null, unitLabel: fields.unit_label ?? null, url: fields.url ?? null, metadata };
}

/** `name`, `active`, `description`, `unit_label`, `url`, `metadata`, `default_price_id` (the empty string clears it). */
function decodeUpdate(input: unknown): UpdateProductCommand {
  const params = readParams(input, ['id', 'name', 'active', 'description', 'unit_label', 'url', 'default_price_id', 'metadata']);
  const id = requireString(params, 'id');
  const name = readName(params, false);
  const fields = readProductFields(params);
  const defaultPrice = optionalText(params, 'default_price_id', MAX_TEXT_LENGTH);
  return { id, changes: sentFields({ ...fields, name, default_price_id: defaultPrice }), metadata: hasParam(params, 'metadata') ? params.metadata : undefined };
}

function decodeList(input: unknown): ListProductsCommand {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'active']);
  const page = readV2Page(params);
  return { page, active: optionalBoolean(params, 'active') };
}

const decodeId = (input: unknown) => ({ id: requireString(readParams(input, ['id']), 'id') });

/** A deleted product: `{ id, object, deleted, livemode }`. */
const encodeDeleted = (row: ProductRow) => ({ id: row.product_id, object: 'product', deleted: true, livemode: row.livemode }) as const;

export const PRODUCT_OPERATIONS = [
  defineCommandOperation('products.create', { decode: decodeCreate, execute: createProduct, encode: renderProduct }),
  defineCommandOperation('products.retrieve', { decode: decodeId, execute: retrieveProduct, encode: renderProduct }),
  defineCommandOperation('products.update', { decode: decodeUpdate, execute: updateProduct, encode: renderProduct }),
  defineCommandOperation('products.delete', { decode: decodeId, execute: deleteProduct, encode: encodeDeleted }),
  defineCommandOperation('products.list', { decode: decodeList, execute: listProducts, encode: (rows, command) => v2ListObject(rows, command.page, PRODUCTS_URL, renderProduct) }),
];
