/**
 * The v2 codec of payment flows (v2 §4.2–4.4, §4.8): parameters → typed commands of
 * src/payment-flows/payment-flows.ts, refusals named by parameter, rows → the flow object and the
 * list. retrieve, confirm and complete_action take the public key with the flow's
 * `client_secret`. The wire names of the SDK (`customer_id`, …) and createPaymentFlow's required
 * `currency` are read by the routes (./routes.ts).
 */
import type { PaymentMethodType } from '../../db/column-types';
import { reject } from '../../domain/errors';
import { parseExtendedAuthorizationRequest, type ExtendedAuthorizationRequest } from '../../domain/hold-periods';
import { MAX_AMOUNT, MAX_TEXT_LENGTH, MIN_PAYMENT_FLOW_AMOUNT } from '../../domain/limits';
import { createMetadata } from '../../domain/metadata';
import { defineCommandOperation } from '../../operations/define';
import { hasParam, isPlainObject, optionalBoolean, optionalInteger, optionalEnum, optionalString, readParams, requireString, type Params } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject } from '../../operations/v2-pagination';
import { PAYMENT_FLOWS_URL, renderPaymentFlow } from '../../payment-flows/payment-flow-object';
import {
  assertMethodAllowed,
  cancelPaymentFlow,
  CANCELLATION_REASONS,
  capturePaymentFlow,
  completePaymentFlowAction,
  confirmPaymentFlow,
  createPaymentFlow,
  FLOW_CURRENCY,
  listPaymentFlows,
  retrievePaymentFlow,
  updatePaymentFlow,
  type CancelPaymentFlowCommand,
  type CapturePaymentFlowCommand,
  type ConfirmPaymentFlowCommand,
  type CreatePaymentFlowCommand,
  type ListPaymentFlowsCommand,
  type PaymentFlowRef,
  type UpdatePaymentFlowCommand,
} from '../../payment-flows/payment-flows';
import { isPaymentMethodType } from '../../payment-flows/payment-method';

function readAmount(params: Params, key: string, required: boolean): number | undefined {
  const amount = optionalInteger(params, key, { min: MIN_PAYMENT_FLOW_AMOUNT, max: MAX_AMOUNT, code: 'invalid_amount' });
  if (amount === undefined && required) return reject('missing_param', key, `${key} is required`);
  return amount;
}

/** `payment_method_types`: a non-empty array of distinct known methods (checkout sessions read it too). */
export function readPaymentMethodTypes(value: unknown, param = 'payment_method_types'): PaymentMethodType[] {
  if (!Array.isArray(value) || value.length === 0) return reject('invalid_param_key', param, `${param} must be a non-empty array of card, paypay or apple_pay`);
  const seen = new Set<PaymentMethodType>();
  value.forEach((entry, i) => {
    if (!isPaymentMethodType(entry)) reject('invalid_param_key', `${param}[${i}]`, `unknown payment method type ${JSON.stringify(entry)}; use card, paypay or apple_pay`);
    if (seen.has(entry)) reject('payment_method_duplicate', `${param}[${i}]`, `${entry} is listed twice`);
    seen.add(entry);
  });
  return [...seen];
}

/** A nested `*_data` object parameter, its fields checked against `allowed` (checkout sessions). */
export function readNestedObject(params: Params, key: string, allowed: readonly string[]): Params | undefined {
  if (!hasParam(params, key)) return undefined;
  if (!isPlainObject(params[key])) return reject('invalid_param_key', key, `${key} must be an object`);
  return readParams(params[key], allowed, key);
}

/** `payment_method_options[card][request_extended_authorization]`, the only option there is. */
function readExtendedAuthorization(params: Params): ExtendedAuthorizationRequest | undefined {
  if (!hasParam(params, 'payment_method_options')) return undefined;
  const options = readParams(params.payment_method_options, ['card'], 'payment_method_options');
  if (!hasParam(options, 'card')) return undefined;
  const card = readParams(options.card, ['request_extended_authorization', 'request_three_d_secure'], 'payment_method_options[card]');
  // The SDK's `request_three_d_secure`: `automatic` (the issuer decides, here the test card) is the
  // only behaviour the simulated network has; `any` (always authenticate) is refused, not ignored.
  const threeDSecure = card.request_three_d_secure;
  if (threeDSecure !== undefined && threeDSecure !== null && threeDSecure !== 'automatic') {
    reject('invalid_param_key', 'payment_method_options[card][request_three_d_secure]', 'request_three_d_secure must be automatic: 3-D Secure is asked for by the card (service rules §2.2)');
  }
  return parseExtendedAuthorizationRequest(card.request_extended_authorization ?? undefined);
}

function readCaptureMethod(params: Params): 'automatic' | 'manual' | undefined {
  const captureMethod = optionalString(params, 'capture_method');
  if (captureMethod === undefined || captureMethod === 'automatic' || captureMethod === 'manual') return captureMethod;
  return reject('invalid_param_key', 'capture_method', `capture_method must be automatic or manual, got ${JSON.stringify(captureMethod)}`);
}

function readDescription(params: Params): string | null | undefined {
  const description = optionalString(params, 'description', { code: 'invalid_string_length' });
  if (description === undefined) return undefined;
  if ([...description].length > MAX_TEXT_LENGTH) reject('invalid_string_length', 'description', `description must be at most ${MAX_TEXT_LENGTH} characters`);
  return description === '' ? null : description;
}

function readMethodType(params: Params): PaymentMethodType | undefined {
  const type = optionalString(params, 'payment_method_type');
  if (type === undefined) return undefined;
  if (!isPaymentMethodType(type)) return reject('invalid_param_key', 'payment_method_type', `payment_method_type must be card, paypay or apple_pay, got ${JSON.stringify(type)}`);
  return type;
}

/**
 * `amount` (required), `currency` (jpy), `capture_method`, `payment_method_types` (default
 * `[card]`), `payment_method_options[card]`, `metadata`, `customer`, `description`,
 * `payment_method` (+ `payment_method_type`), `confirm`, and `return_url` (only with confirm=true).
 */
function decodeCreate(input: unknown): CreatePaymentFlowCommand {
  const params = readParams(input, ['amount', 'currency', 'capture_method', 'payment_method_types', 'payment_method_options', 'metadata', 'customer', 'description', 'payment_method', 'payment_method_type', 'confirm', 'return_url']);
  const amount = readAmount(params, 'amount', true)!;
  const currency = optionalString(params, 'currency', { code: 'invalid_currency' }) ?? FLOW_CURRENCY;
  if (currency !== FLOW_CURRENCY) reject('invalid_currency', 'currency', `currency must be ${FLOW_CURRENCY}, got ${JSON.stringify(currency)}`);
  const captureMethod = readCaptureMethod(params) ?? 'automatic';
  const paymentMethodTypes = hasParam(params, 'payment_method_types') ? readPaymentMethodTypes(params.payment_method_types) : (['card'] as PaymentMethodType[]);
  const extendedAuthorization = readExtendedAuthorization(params);
  const metadata = hasParam(params, 'metadata') ? createMetadata(params.metadata, 'v2') : {};
  const customerId = optionalString(params, 'customer', { code: 'invalid_customer' }) ?? null;
  const description = readDescription(params) ?? null;
  const methodId = optionalString(params, 'payment_method');
  const methodType = readMethodType(params);
  if (methodType !== undefined) assertMethodAllowed(paymentMethodTypes, methodType);
  const confirm = optionalBoolean(params, 'confirm') ?? false;
  if (hasParam(params, 'return_url') && !confirm) reject('invalid_param_key', 'return_url', 'return_url is sent only with confirm=true');
  optionalString(params, 'return_url');
  return { amount, captureMethod, paymentMethodTypes, extendedAuthorization, metadata, customerId, description, methodId, methodType, confirm };
}

/** The flow and, with the public key, its `client_secret` (retrieve, complete_action). */
function decodeRef(input: unknown): PaymentFlowRef {
  const params = readParams(input, ['id', 'client_secret']);
  const id = requireString(params, 'id');
  return { id, clientSecret: optionalString(params, 'client_secret') };
}

/** `metadata`, `description`; before confirmation `amount`, `payment_method_types`, `payment_method_options`, `customer`, `payment_method`. */
function decodeUpdate(input: unknown): UpdatePaymentFlowCommand {
  const params = readParams(input, ['id', 'amount', 'metadata', 'description', 'payment_method_types', 'payment_method_options', 'customer', 'payment_method', 'return_url']);
  const id = requireString(params, 'id');
  const amount = readAmount(params, 'amount', false);
  const paymentMethodTypes = hasParam(params, 'payment_method_types') ? readPaymentMethodTypes(params.payment_method_types) : undefined;
  const extendedAuthorization = hasParam(params, 'payment_method_options') ? (readExtendedAuthorization(params) ?? null) : undefined;
  const description = readDescription(params);
  const customerId = optionalString(params, 'customer', { code: 'invalid_customer' });
  const methodId = optionalString(params, 'payment_method');
  optionalString(params, 'return_url');
  return { id, amount, paymentMethodTypes, extendedAuthorization, description, customerId, methodId, metadata: hasParam(params, 'metadata') ? params.metadata : undefined };
}

/** `client_secret`, `payment_method` (+ `payment_method_type`), `return_url`, and what an update before confirmation sets. */
function decodeConfirm(input: unknown): ConfirmPaymentFlowCommand {
  const params = readParams(input, ['id', 'client_secret', 'payment_method', 'payment_method_type', 'return_url', 'payment_method_types', 'payment_method_options', 'capture_method', 'description']);
  const id = requireString(params, 'id');
  const clientSecret = optionalString(params, 'client_secret');
  const methodId = optionalString(params, 'payment_method');
  const methodType = readMethodType(params);
  optionalString(params, 'return_url');
  // The SDK's confirm may also set what an update before confirmation sets (official-sdks.md §2).
  const paymentMethodTypes = hasParam(params, 'payment_method_types') ? readPaymentMethodTypes(params.payment_method_types) : undefined;
  const extendedAuthorization = hasParam(params, 'payment_method_options') ? (readExtendedAuthorization(params) ?? null) : undefined;
  const captureMethod = readCaptureMethod(params);
  const description = readDescription(params);
  return { id, clientSecret, methodId, methodType, paymentMethodTypes, extendedAuthorization, captureMethod, description };
}

/** `amount_to_capture` (optional: the whole remaining hold). */
function decodeCapture(input: unknown): CapturePaymentFlowCommand {
  const params = readParams(input, ['id', 'amount_to_capture']);
  const id = requireString(params, 'id');
  return { id, amountToCapture: optionalInteger(params, 'amount_to_capture', { min: 1, max: MAX_AMOUNT, code: 'invalid_amount' }) };
}

/** `cancellation_reason` (optional): duplicate, fraudulent, requested_by_customer, abandoned. */
function decodeCancel(input: unknown): CancelPaymentFlowCommand {
  const params = readParams(input, ['id', 'cancellation_reason']);
  const id = requireString(params, 'id');
  return { id, reason: optionalEnum(params, 'cancellation_reason', CANCELLATION_REASONS) ?? null };
}

/** `limit`, `starting_after` / `ending_before`, and the optional `customer` filter. */
function decodeList(input: unknown): ListPaymentFlowsCommand {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'customer']);
  const page = readV2Page(params);
  return { page, customer: optionalString(params, 'customer', { code: 'invalid_querystring' }) };
}

export const PAYMENT_FLOW_OPERATIONS = [
  defineCommandOperation('payment_flows.create', { decode: decodeCreate, execute: createPaymentFlow, encode: renderPaymentFlow }),
  defineCommandOperation('payment_flows.retrieve', { decode: decodeRef, execute: retrievePaymentFlow, encode: renderPaymentFlow }, { keys: 'secret_or_public' }),
  defineCommandOperation('payment_flows.update', { decode: decodeUpdate, execute: updatePaymentFlow, encode: renderPaymentFlow }),
  defineCommandOperation('payment_flows.list', { decode: decodeList, execute: listPaymentFlows, encode: (rows, command) => v2ListObject(rows, command.page, PAYMENT_FLOWS_URL, renderPaymentFlow) }),
  defineCommandOperation('payment_flows.confirm', { decode: decodeConfirm, execute: confirmPaymentFlow, encode: renderPaymentFlow }, { keys: 'secret_or_public' }),
  defineCommandOperation('payment_flows.complete_action', { decode: decodeRef, execute: completePaymentFlowAction, encode: renderPaymentFlow }, { keys: 'secret_or_public' }),
  defineCommandOperation('payment_flows.capture', { decode: decodeCapture, execute: capturePaymentFlow, encode: renderPaymentFlow }),
  defineCommandOperation('payment_flows.cancel', { decode: decodeCancel, execute: cancelPaymentFlow, encode: renderPaymentFlow }),
];
