/**
 * The v1 codec of charges (v1 §4.2, §4.3): form parameters → charge commands, charge records → v1
 * charge objects. The checks run here, in the order v1 has always given them, before anything is
 * read or written; what needs the stored charge (its state, the metadata merge) is checked by the
 * operation.
 */
import {
  authenticateCharge,
  captureCharge,
  CHARGE_CURRENCY,
  CHARGES_URL,
  createCharge,
  finishThreeDSecure,
  listCharges,
  reauthCharge,
  refundCharge,
  retrieveCharge,
  updateCharge,
  type CreateChargeCommand,
  type ListChargesCommand,
  type RefundChargeCommand,
  type UpdateChargeCommand,
} from '../../charges/charge-operations';
import { renderChargeRecord } from '../../charges/charge-record';
import { reject } from '../../domain/errors';
import { ID_PREFIX } from '../../domain/ids';
import { V1_EXPIRY_DAYS } from '../../domain/hold-periods';
import { MAX_AMOUNT, MAX_REFUND_REASON_LENGTH, MAX_TEXT_LENGTH, MIN_CHARGE_AMOUNT, MIN_REFUND_AMOUNT } from '../../domain/limits';
import { createMetadata } from '../../domain/metadata';
import { defineCommandOperation } from '../../operations/define';
import { listObject, PAGINATION_PARAMS, readPage } from '../../operations/pagination';
import { hasParam, optionalBoolean, optionalInteger, optionalString, readParams, requireString, type Params } from '../../operations/params';
import { decodeId } from './codec';

function characterCount(text: string): number {
  return [...text].length;
}

/** `description`: at most 255 characters (the customers' rule); empty clears it. */
function readDescription(params: Params): string | null | undefined {
  const description = optionalString(params, 'description', { code: 'invalid_string_length' });
  if (description === undefined) return undefined;
  if (characterCount(description) > MAX_TEXT_LENGTH) reject('invalid_string_length', 'description', `description must be at most ${MAX_TEXT_LENGTH} characters`);
  return description === '' ? null : description;
}

function requireAmount(params: Params, min: number): number {
  const amount = optionalInteger(params, 'amount', { min, max: MAX_AMOUNT, code: 'invalid_amount' });
  if (amount === undefined) return reject('missing_param', 'amount', 'amount is required');
  return amount;
}

const readExpiryDays = (params: Params): number | undefined => optionalInteger(params, 'expiry_days', { min: V1_EXPIRY_DAYS.min, max: V1_EXPIRY_DAYS.max, code: 'invalid_expiry_days' });

/**
 * `charges.create`: `amount`, `currency`, `card` (token) or `customer` (+ `card`), `description`,
 * `capture`, `expiry_days`, `three_d_secure`, `metadata`, `tenant`, `platform_fee`.
 */
export function decodeCreateCharge(input: unknown): CreateChargeCommand {
  const params = readParams(input, ['amount', 'currency', 'card', 'customer', 'description', 'capture', 'expiry_days', 'three_d_secure', 'metadata', 'tenant', 'platform_fee']);
  const amount = requireAmount(params, MIN_CHARGE_AMOUNT);
  const currency = requireString(params, 'currency', { code: 'invalid_currency' });
  if (currency !== CHARGE_CURRENCY) reject('invalid_currency', 'currency', `currency must be ${CHARGE_CURRENCY}, got ${JSON.stringify(currency)}`);
  // v1 §4.2: "Passing card details directly in place of a token is no longer accepted": a `card[…]`
  // object is a parameter that cannot be specified (invalid_param_key on `card`).
  const card = optionalString(params, 'card');
  const customer = optionalString(params, 'customer');
  if (card === undefined && customer === undefined) reject('no_payment_method', 'card', 'one of card or customer is required');
  // With `customer`, `card` selects one of the customer's cards (v1 §4.2); a token there is a
  // second payment method beside the customer's.
  if (card !== undefined && customer !== undefined && card.startsWith(ID_PREFIX.token)) {
    reject('payment_method_duplicate_including_customer', 'card', `with customer, card names one of the customer's cards (car_…), not a token (${card})`);
  }
  const description = readDescription(params) ?? null;
  const capture = optionalBoolean(params, 'capture') ?? true;
  const expiryDays = readExpiryDays(params);
  if (expiryDays !== undefined && capture) reject('unnecessary_expiry_days', 'expiry_days', 'expiry_days applies only with capture=false');
  const threeDSecure = optionalBoolean(params, 'three_d_secure') ?? false;
  const metadata = hasParam(params, 'metadata') ? (createMetadata(params.metadata, 'v1') as Record<string, string>) : {};
  const tenant = optionalString(params, 'tenant');
  const platformFee = optionalInteger(params, 'platform_fee', { code: 'invalid_amount' });
  return { amount, currency: CHARGE_CURRENCY, card, customer, description, capture, expiryDays, threeDSecure, metadata, tenant, platformFee };
}

/** `charges.update`: `description` and `metadata` (merged under the v1 rules). */
export function decodeUpdateCharge(input: unknown): UpdateChargeCommand {
  const params = readParams(input, ['id', 'description', 'metadata']);
  const id = requireString(params, 'id');
  const description = readDescription(params);
  return { id, description, metadata: hasParam(params, 'metadata') ? { update: params.metadata, flavour: 'v1' } : undefined };
}

/** `charges.list`: the pagination parameters, `customer` and `subscription`. */
export function decodeListCharges(input: unknown): ListChargesCommand {
  const params = readParams(input, [...PAGINATION_PARAMS, 'customer', 'subscription']);
  const page = readPage(params);
  const customer = optionalString(params, 'customer', { code: 'invalid_querystring' });
  const subscription = optionalString(params, 'subscription', { code: 'invalid_querystring' });
  return { page, customer, subscription };
}

/** `charges.capture`: `amount` (50 to 9,999,999; at most the held amount, checked on the charge). */
export function decodeCaptureCharge(input: unknown): { readonly id: string; readonly amount: number | undefined } {
  const params = readParams(input, ['id', 'amount']);
  const id = requireString(params, 'id');
  return { id, amount: optionalInteger(params, 'amount', { min: MIN_CHARGE_AMOUNT, max: MAX_AMOUNT, code: 'invalid_amount' }) };
}

/** `charges.refund`: `amount` (1 to 9,999,999), `refund_reason` (up to 255 characters). */
export function decodeRefundCharge(input: unknown): RefundChargeCommand {
  const params = readParams(input, ['id', 'amount', 'refund_reason']);
  const id = requireString(params, 'id');
  const amount = optionalInteger(params, 'amount', { min: MIN_REFUND_AMOUNT, max: MAX_AMOUNT, code: 'invalid_refund_amount' });
  const reason = optionalString(params, 'refund_reason', { code: 'invalid_refund_reason' });
  if (reason !== undefined && characterCount(reason) > MAX_REFUND_REASON_LENGTH) {
    reject('invalid_refund_reason', 'refund_reason', `refund_reason must be at most ${MAX_REFUND_REASON_LENGTH} characters`);
  }
  return { id, amount, reason };
}

/** `charges.reauth`: `expiry_days` (1 to 60). */
export function decodeReauthCharge(input: unknown): { readonly id: string; readonly expiryDays: number | undefined } {
  const params = readParams(input, ['id', 'expiry_days']);
  const id = requireString(params, 'id');
  return { id, expiryDays: readExpiryDays(params) };
}

export const CHARGE_OPERATIONS = [
  defineCommandOperation('charges.create', { decode: decodeCreateCharge, execute: createCharge, encode: (object) => object }),
  defineCommandOperation('charges.retrieve', { decode: decodeId, execute: retrieveCharge, encode: (object) => object }),
  defineCommandOperation('charges.update', { decode: decodeUpdateCharge, execute: updateCharge, encode: renderChargeRecord }),
  defineCommandOperation('charges.list', {
    decode: decodeListCharges,
    execute: listCharges,
    encode: (records, command) => listObject(records.map(renderChargeRecord), command.page, CHARGES_URL),
  }),
  defineCommandOperation('charges.capture', { decode: decodeCaptureCharge, execute: captureCharge, encode: renderChargeRecord }),
  defineCommandOperation('charges.refund', { decode: decodeRefundCharge, execute: refundCharge, encode: renderChargeRecord }),
  defineCommandOperation('charges.reauth', { decode: decodeReauthCharge, execute: reauthCharge, encode: renderChargeRecord }),
  defineCommandOperation('charges.tds_finish', { decode: decodeId, execute: finishThreeDSecure, encode: renderChargeRecord }),
  // The buyer's step of v1 §4.3 (in-page, redirect or sub-window flow), run with the public key as the client library would.
  defineCommandOperation('charges.tds_authenticate', { decode: decodeId, execute: authenticateCharge, encode: renderChargeRecord }, { keys: 'secret_or_public' }),
];
