/**
 * The v2 codec of checkout sessions (v2 §4.1, official-sdks.md §2 "Checkout sessions"):
 * parameters → typed commands of src/checkout/checkout-sessions.ts, refusals named by parameter,
 * sessions → v2 checkout session objects, lists and line item objects. The SDK's field names
 * (`customer_id`, `line_items[].price_id`) and one-value fields are read by the routes (./routes.ts).
 */
import type { PaymentMethodType } from '../../db/column-types';
import { KessaiError, reject } from '../../domain/errors';
import { createMetadata } from '../../domain/metadata';
import {
  CHECKOUT_SESSIONS_URL,
  completeCheckoutSession,
  createCheckoutSession,
  expireCheckoutSession,
  lineItemId,
  listCheckoutSessionLineItems,
  listCheckoutSessions,
  MAX_LINE_ITEMS,
  MAX_QUANTITY,
  renderCheckoutSession,
  retrieveCheckoutSession,
  SESSION_STATUSES,
  sessionKey,
  updateCheckoutSession,
  type CheckoutSessionView,
  type CompleteCheckoutSessionCommand,
  type CreateCheckoutSessionCommand,
  type LineItemInput,
  type LineItemPage,
  type ListCheckoutSessionsCommand,
  type SessionLineItemsCommand,
  type UpdateCheckoutSessionCommand,
} from '../../checkout/checkout-sessions';
import { defineCommandOperation } from '../../operations/define';
import { hasParam, optionalInteger, optionalEnum, optionalString, readParams, requireString, type Params } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject, type V2List } from '../../operations/v2-pagination';
import { readNestedObject, readPaymentMethodTypes } from './payment-flows';
import { isPaymentMethodType } from '../../payment-flows/payment-method';

function readUrl(params: Params, key: string, required: boolean): string | undefined {
  const value = optionalString(params, key);
  if (value === undefined) return required ? reject('missing_param', key, `${key} is required`) : undefined;
  let parsed: URL | undefined;
  try {
    parsed = new URL(value);
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')) return reject('invalid_param_key', key, `${key} must be an http or https URL`);
  return value;
}

function readLineItems(value: unknown): LineItemInput[] {
  if (value === undefined || value === null) return reject('missing_param', 'line_items', 'line_items is required');
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_LINE_ITEMS) {
    return reject('invalid_param_key', 'line_items', `line_items must be an array of 1 to ${MAX_LINE_ITEMS} items`);
  }
  return value.map((entry, i) => {
    const parent = `line_items[${i}]`;
    const item = readParams(entry, ['price', 'quantity'], parent);
    const price = requireString(item, 'price', { parent });
    const quantity = optionalInteger(item, 'quantity', { parent, min: 1, max: MAX_QUANTITY }) ?? 1;
    return { price, quantity };
  });
}

/** Metadata errors inside `payment_flow_data` name the nested parameter (`payment_flow_data[metadata][k]`). */
function prefixed<T>(read: () => T, parent: string): T {
  try {
    return read();
  } catch (error) {
    if (error instanceof KessaiError && error.param !== undefined) {
      throw new KessaiError(error.code, { param: error.param.replace(/^metadata/, `${parent}[metadata]`), message: error.message });
    }
    throw error;
  }
}

/**
 * `checkout.sessions.create` (v2 §4.1): `mode` (`payment`, the default, or `setup`), `line_items`
 * (`price` + `quantity`, required in payment mode), `payment_method_types` (default `[card]`),
 * `success_url` (required; may hold `{CHECKOUT_SESSION_ID}`), `cancel_url`, `metadata`,
 * `customer`, `payment_flow_data` (`metadata`, `capture_method`), `setup_flow_data` (`metadata`).
 */
function decodeCreate(input: unknown): CreateCheckoutSessionCommand {
  const params = readParams(input, ['mode', 'line_items', 'payment_method_types', 'success_url', 'cancel_url', 'metadata', 'customer', 'payment_flow_data', 'setup_flow_data']);
  const mode = optionalString(params, 'mode') ?? 'payment';
  if (mode !== 'payment' && mode !== 'setup') return reject('invalid_param_key', 'mode', `mode must be payment or setup, got ${JSON.stringify(mode)}`);
  // A setup session saves a card and pays nothing: no line items, no payment flow data, cards only.
  if (mode === 'setup') {
    for (const key of ['line_items', 'payment_flow_data'] as const) {
      if (hasParam(params, key)) reject('no_allowed_param', key, `${key} is not sent with mode setup: a setup session saves a card and charges nothing`);
    }
  }
  const items = mode === 'setup' ? [] : readLineItems(params.line_items);
  const types = hasParam(params, 'payment_method_types') ? readPaymentMethodTypes(params.payment_method_types) : (['card'] as PaymentMethodType[]);
  if (mode === 'setup' && types.some((type) => type !== 'card')) reject('no_allowed_param', 'payment_method_types', 'a setup session saves cards only');
  const successUrl = readUrl(params, 'success_url', true)!;
  const cancelUrl = readUrl(params, 'cancel_url', false) ?? null;
  const metadata = hasParam(params, 'metadata') ? createMetadata(params.metadata, 'v2') : {};
  const customerId = optionalString(params, 'customer', { code: 'invalid_customer' }) ?? null;
  const flowData = readNestedObject(params, 'payment_flow_data', ['metadata', 'capture_method']) ?? {};
  const setupData = readNestedObject(params, 'setup_flow_data', ['metadata']) ?? {};
  const flowMetadata = hasParam(flowData, 'metadata') ? prefixed(() => createMetadata(flowData.metadata, 'v2'), 'payment_flow_data') : {};
  const setupMetadata = hasParam(setupData, 'metadata') ? prefixed(() => createMetadata(setupData.metadata, 'v2'), 'setup_flow_data') : {};
  const captureMethod = optionalString(flowData, 'capture_method', { parent: 'payment_flow_data' }) ?? 'automatic';
  if (captureMethod !== 'automatic' && captureMethod !== 'manual') return reject('invalid_param_key', 'payment_flow_data[capture_method]', 'capture_method must be automatic or manual');
  return { mode, items, paymentMethodTypes: types, successUrl, cancelUrl, metadata, customerId, flowMetadata, setupMetadata, captureMethod };
}

function decodeId(input: unknown): { readonly id: string } {
  return { id: requireString(readParams(input, ['id']), 'id') };
}

/** `metadata` (v2 §2.6 rules 3–5), merged into the session's by the execution. */
function decodeUpdate(input: unknown): UpdateCheckoutSessionCommand {
  const params = readParams(input, ['id', 'metadata']);
  const id = requireString(params, 'id');
  return { id, metadata: hasParam(params, 'metadata') ? params.metadata : undefined };
}

/** Cursor paging, optional `status` and `customer` filters. */
function decodeList(input: unknown): ListCheckoutSessionsCommand {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'status', 'customer']);
  const page = readV2Page(params);
  const status = optionalEnum(params, 'status', SESSION_STATUSES, { code: 'invalid_querystring' });
  const customer = optionalString(params, 'customer', { code: 'invalid_querystring' });
  return { page, status, customer };
}

function decodeLineItems(input: unknown): SessionLineItemsCommand {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'id']);
  const id = requireString(params, 'id');
  return { id, page: readV2Page(params) };
}

/** The hosted page's payment: `payment_method` (a card token or method) and `payment_method_type` (default card). */
function decodeComplete(input: unknown): CompleteCheckoutSessionCommand {
  const params = readParams(input, ['id', 'payment_method', 'payment_method_type']);
  const id = requireString(params, 'id');
  const methodId = optionalString(params, 'payment_method');
  const methodType = optionalString(params, 'payment_method_type') ?? 'card';
  if (!isPaymentMethodType(methodType)) return reject('invalid_param_key', 'payment_method_type', 'payment_method_type must be card, paypay or apple_pay');
  return { id, methodId, methodType };
}

const encodeSession = (view: CheckoutSessionView) => renderCheckoutSession(view.row, view.items, view.pageBase);

/** A line item as its own object: its id is the session's id and its position (`<cs_…>_li_<n>`), stable and unique. */
export type LineItemObject = { readonly id: string; readonly object: 'checkout.session.line_item'; readonly price_id: string; readonly quantity: number; readonly unit_amount: number; readonly amount_total: number; readonly currency: string };

function encodeLineItems(page: LineItemPage): V2List<LineItemObject> {
  const { session } = page;
  return {
    object: 'list',
    url: `${CHECKOUT_SESSIONS_URL}/${session.checkout_session_id}/line_items`,
    has_more: page.hasMore,
    data: page.items.map((item) => ({ id: lineItemId(session.checkout_session_id, item.position), object: 'checkout.session.line_item', price_id: item.price_id, quantity: item.quantity, unit_amount: item.unit_amount, amount_total: item.amount_total, currency: session.currency })),
  };
}

export const CHECKOUT_SESSION_OPERATIONS = [
  defineCommandOperation('checkout.sessions.create', { decode: decodeCreate, execute: createCheckoutSession, encode: encodeSession }),
  defineCommandOperation('checkout.sessions.retrieve', { decode: decodeId, execute: retrieveCheckoutSession, encode: encodeSession }),
  defineCommandOperation('checkout.sessions.update', { decode: decodeUpdate, execute: updateCheckoutSession, encode: encodeSession }),
  defineCommandOperation('checkout.sessions.list', {
    decode: decodeList,
    execute: listCheckoutSessions,
    encode: (found, command) => v2ListObject(found.rows, command.page, CHECKOUT_SESSIONS_URL, (row) => renderCheckoutSession(row, found.items.get(sessionKey(row)) ?? [], found.pageBase)),
  }),
  defineCommandOperation('checkout.sessions.list_line_items', { decode: decodeLineItems, execute: listCheckoutSessionLineItems, encode: encodeLineItems }),
  defineCommandOperation('checkout.sessions.complete', { decode: decodeComplete, execute: completeCheckoutSession, encode: encodeSession }, { keys: 'secret_or_public' }),
  defineCommandOperation('checkout.sessions.expire', { decode: decodeId, execute: expireCheckoutSession, encode: encodeSession }),
];
