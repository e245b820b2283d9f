/**
 * The v2 codec of payment disputes (official-sdks.md §2, `getPaymentDispute`,
 * `getAllPaymentDisputes`): parameters → typed commands of src/disputes/disputes.ts, refusals named
 * by parameter, rows → v2 payment dispute objects and lists. Read-only.
 */
import type { PaymentDisputeStatus } from '../../db/column-types';
import { reject } from '../../domain/errors';
import { listPaymentDisputes, renderPaymentDispute, retrievePaymentDispute, type ListPaymentDisputesCommand } from '../../disputes/disputes';
import { defineCommandOperation } from '../../operations/define';
import { optionalString, readParams, requireString, type Params } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject } from '../../operations/v2-pagination';

const PAYMENT_DISPUTES_URL = '/v2/payment_disputes';

const PAYMENT_DISPUTE_STATUSES = [
  'pre_warning_needs_response',
  'warning_needs_response',
  'warning_needs_refund',
  'warning_under_review',
  'needs_response',
  'under_review',
  'lost',
  'cancel',
] as const satisfies readonly PaymentDisputeStatus[];

/** `status`: one status or several (`status=lost&status=cancel`), each one of the SDK's. */
function readStatuses(params: Params): PaymentDisputeStatus[] | undefined {
  const raw = params.status;
  if (raw === undefined || raw === null) return undefined;
  const values = Array.isArray(raw) ? (raw as unknown[]) : [raw];
  return values.map((value) => {
    if (typeof value !== 'string' || !(PAYMENT_DISPUTE_STATUSES as readonly string[]).includes(value)) {
      return reject('invalid_querystring', 'status', `status must be one of ${PAYMENT_DISPUTE_STATUSES.join(', ')}, got ${JSON.stringify(value)}`);
    }
    return value as PaymentDisputeStatus;
  });
}

/** The pagination parameters, `payment_flow_id` and `status`. */
function decodeList(input: unknown): ListPaymentDisputesCommand {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'payment_flow_id', 'status']);
  const page = readV2Page(params);
  const flowId = optionalString(params, 'payment_flow_id', { code: 'invalid_querystring' });
  return { page, flowId, statuses: readStatuses(params) };
}

export const DISPUTE_OPERATIONS = [
  defineCommandOperation('payment_disputes.retrieve', { decode: (input) => ({ id: requireString(readParams(input, ['id']), 'id') }), execute: retrievePaymentDispute, encode: renderPaymentDispute }),
  defineCommandOperation('payment_disputes.list', { decode: decodeList, execute: listPaymentDisputes, encode: (rows, command) => v2ListObject(rows, command.page, PAYMENT_DISPUTES_URL, renderPaymentDispute) }),
];
