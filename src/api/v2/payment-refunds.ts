/**
 * The v2 codec of payment refunds (official-sdks.md §2 "Refunds"): parameters → typed commands of
 * src/payment-refunds/payment-refunds.ts, refusals named by parameter, rows → v2 payment refund
 * objects and lists (the flow's refunds at `/v2/payment_flows/{id}/refunds`).
 */
import type { PaymentRefundReason } from '../../db/column-types';
import { MAX_AMOUNT } from '../../domain/limits';
import { createMetadata } from '../../domain/metadata';
import { defineCommandOperation } from '../../operations/define';
import { hasParam, optionalInteger, optionalEnum, readParams, requireString } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject } from '../../operations/v2-pagination';
import {
  createPaymentRefund,
  listPaymentFlowRefunds,
  listPaymentRefunds,
  renderPaymentRefund,
  retrievePaymentRefund,
  updatePaymentRefund,
  type CreatePaymentRefundCommand,
  type ListPaymentFlowRefundsCommand,
  type UpdatePaymentRefundCommand,
} from '../../payment-refunds/payment-refunds';

const PAYMENT_REFUNDS_URL = '/v2/payment_refunds';
const PAYMENT_REFUND_REASONS = ['duplicate', 'fraudulent', 'requested_by_customer'] as const satisfies readonly PaymentRefundReason[];

/** `payment_flow_id` (required), `amount` (1..; omitted = everything still refundable), `reason` (duplicate, fraudulent, requested_by_customer), `metadata`. */
function decodeCreate(input: unknown): CreatePaymentRefundCommand {
  const params = readParams(input, ['payment_flow_id', 'amount', 'reason', 'metadata']);
  const flowId = requireString(params, 'payment_flow_id');
  const amount = optionalInteger(params, 'amount', { min: 1, max: MAX_AMOUNT, code: 'invalid_refund_amount' });
  const reason = optionalEnum(params, 'reason', PAYMENT_REFUND_REASONS, { code: 'invalid_refund_reason' }) ?? null;
  const metadata = hasParam(params, 'metadata') ? createMetadata(params.metadata, 'v2') : {};
  return { flowId, amount, reason, metadata };
}

/** `metadata` only (v2 §2.6 rules 3–5). */
function decodeUpdate(input: unknown): UpdatePaymentRefundCommand {
  const params = readParams(input, ['id', 'metadata']);
  return { id: requireString(params, 'id'), metadata: hasParam(params, 'metadata') ? params.metadata : undefined };
}

function decodeFlowRefunds(input: unknown): ListPaymentFlowRefundsCommand {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'id']);
  return { flowId: requireString(params, 'id'), pageParams: params };
}

export const PAYMENT_REFUND_OPERATIONS = [
  defineCommandOperation('payment_refunds.create', { decode: decodeCreate, execute: createPaymentRefund, encode: renderPaymentRefund }),
  defineCommandOperation('payment_refunds.retrieve', { decode: (input) => ({ id: requireString(readParams(input, ['id']), 'id') }), execute: retrievePaymentRefund, encode: renderPaymentRefund }),
  defineCommandOperation('payment_refunds.update', { decode: decodeUpdate, execute: updatePaymentRefund, encode: renderPaymentRefund }),
  defineCommandOperation('payment_refunds.list', {
    decode: (input) => ({ page: readV2Page(readParams(input, V2_PAGINATION_PARAMS)) }),
    execute: listPaymentRefunds,
    encode: (rows, command) => v2ListObject(rows, command.page, PAYMENT_REFUNDS_URL, renderPaymentRefund),
  }),
  defineCommandOperation('payment_flows.list_refunds', {
    decode: decodeFlowRefunds,
    execute: listPaymentFlowRefunds,
    encode: (result, command) => v2ListObject(result.rows, result.page, `/v2/payment_flows/${command.flowId}/refunds`, renderPaymentRefund),
  }),
];
