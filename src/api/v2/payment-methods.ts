/**
 * The v2 codec of payment methods (official-sdks.md §2 "Payment methods"): parameters → typed
 * commands of src/payment-methods/payment-methods.ts, refusals named by parameter, rows → v2
 * payment method objects and lists (also a customer's payment methods,
 * `GET /v2/customers/{id}/payment_methods`).
 */
import { reject } from '../../domain/errors';
import { createMetadata } from '../../domain/metadata';
import { defineCommandOperation, type DecodeRequest } from '../../operations/define';
import { hasParam, optionalString, optionalText, readParams, requireString, type Params } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject, type V2Page } from '../../operations/v2-pagination';
import {
  attachPaymentMethod,
  createPaymentMethod,
  detachPaymentMethod,
  listCustomerPaymentMethods,
  listPaymentMethods,
  PAYMENT_METHODS_URL,
  readBillingDetails,
  renderPaymentMethod,
  retrievePaymentMethod,
  retrievePaymentMethodByCard,
  updatePaymentMethod,
  type CreatePaymentMethodCommand,
  type PaymentMethodRow,
  type UpdatePaymentMethodCommand,
} from '../../payment-methods/payment-methods';
import { tokenizeTestCard } from '../../processor/test-cards';

/**
 * Test mode only (a live key is `no_allowed_param` on `type`): `type` `card` with `card` {number,
 * exp_month, exp_year, cvc}, run through the simulated network's tokenization, and
 * `billing_details` (an email or a phone required), or `paypay`; `customer_id`; `metadata`. Apple
 * Pay needs a wallet token and is refused here.
 */
function decodeCreate(input: unknown, { caller, clock }: DecodeRequest): CreatePaymentMethodCommand {
  const params = readParams(input, ['type', 'card', 'billing_details', 'customer_id', 'metadata']);
  const type = requireString(params, 'type');
  if (caller.livemode) return reject('no_allowed_param', 'type', 'payment methods are created from raw card data in test mode only');
  if (type !== 'card' && type !== 'paypay') return reject('invalid_param_key', 'type', `type must be card or paypay, got ${JSON.stringify(type)}`);
  const card = type === 'card' ? tokenizeTestCard(readParams(params.card ?? reject('missing_param', 'card', 'card is required for type card'), ['number', 'exp_month', 'exp_year', 'cvc'], 'card'), { livemode: caller.livemode, now: clock.now() }) : null;
  if (type === 'paypay' && hasParam(params, 'card')) reject('no_allowed_param', 'card', 'a PayPay payment method has no card');
  const billing = readBillingDetails(params.billing_details ?? {}, {}, type === 'card');
  const customerId = optionalString(params, 'customer_id') ?? null;
  const metadata = hasParam(params, 'metadata') ? createMetadata(params.metadata, 'v2') : {};
  return {
    type,
    card: card && { fingerprint: card.fingerprint, brand: card.brand, last4: card.last4, expMonth: card.expMonth, expYear: card.expYear, funding: card.funding, country: card.country, issuer: card.issuer },
    billing,
    customerId,
    metadata,
  };
}

/** `type` (its own, as the SDK sends it), `billing_details` and `metadata`, checked against the method once it is found. */
function decodeUpdate(input: unknown): UpdatePaymentMethodCommand {
  const params = readParams(input, ['id', 'type', 'billing_details', 'metadata']);
  const id = requireString(params, 'id');
  return {
    id,
    type: optionalString(params, 'type'),
    billingDetails: hasParam(params, 'billing_details') ? params.billing_details : undefined,
    metadata: hasParam(params, 'metadata') ? params.metadata : undefined,
  };
}

function decodeAttach(input: unknown) {
  const params = readParams(input, ['id', 'customer_id']);
  const id = requireString(params, 'id');
  return { id, customerId: requireString(params, 'customer_id') };
}

/** The page and the optional `type` filter (at most 20 characters). */
function readListFilters(params: Params): { readonly page: V2Page; readonly type: string | undefined } {
  const page = readV2Page(params);
  return { page, type: optionalText(params, 'type', 20) ?? undefined };
}

/** `customer_id` and `type` filters. */
function decodeList(input: unknown) {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'customer_id', 'type']);
  const customerId = optionalString(params, 'customer_id', { code: 'invalid_querystring' });
  return { customerId, ...readListFilters(params) };
}

function decodeCustomerList(input: unknown) {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'id', 'type']);
  const customerId = requireString(params, 'id');
  return { customerId, ...readListFilters(params) };
}

const decodeId = (input: unknown) => ({ id: requireString(readParams(input, ['id']), 'id') });
const listOf = (url: (command: { readonly customerId?: string }) => string) => (rows: readonly PaymentMethodRow[], command: { readonly page: V2Page; readonly customerId?: string }) => v2ListObject(rows, command.page, url(command), renderPaymentMethod);

export const PAYMENT_METHOD_OPERATIONS = [
  defineCommandOperation('payment_methods.create', { decode: decodeCreate, execute: createPaymentMethod, encode: renderPaymentMethod }),
  defineCommandOperation('payment_methods.retrieve', { decode: decodeId, execute: retrievePaymentMethod, encode: renderPaymentMethod }),
  defineCommandOperation('payment_methods.update', { decode: decodeUpdate, execute: updatePaymentMethod, encode: renderPaymentMethod }),
  defineCommandOperation('payment_methods.list', { decode: decodeList, execute: listPaymentMethods, encode: listOf(() => PAYMENT_METHODS_URL) }),
  defineCommandOperation('payment_methods.attach', { decode: decodeAttach, execute: attachPaymentMethod, encode: renderPaymentMethod }),
  defineCommandOperation('payment_methods.detach', { decode: decodeId, execute: detachPaymentMethod, encode: renderPaymentMethod }),
  defineCommandOperation('payment_methods.retrieve_by_card', { decode: (input) => ({ cardId: requireString(readParams(input, ['card_id']), 'card_id') }), execute: retrievePaymentMethodByCard, encode: renderPaymentMethod }),
  defineCommandOperation('customers.list_payment_methods', { decode: decodeCustomerList, execute: listCustomerPaymentMethods, encode: listOf((command) => `/v2/customers/${command.customerId}/payment_methods`) }),
];
