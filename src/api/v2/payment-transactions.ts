/**
 * The v2 codec of payment transactions (official-sdks.md §2 "Others (read)": getPaymentTransaction,
 * getAllPaymentTransactions): parameters → typed commands of src/settlement/payment-transactions.ts,
 * refusals named by parameter, the view's rows → v2 payment transaction objects and lists.
 */
import { toIsoSeconds } from '../../domain/time';
import { defineCommandOperation } from '../../operations/define';
import { optionalEnum, optionalString, readParams, requireString } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject } from '../../operations/v2-pagination';
import {
  listPaymentTransactions,
  PAYMENT_TRANSACTION_TYPES,
  retrievePaymentTransaction,
  type ListPaymentTransactionsCommand,
  type PaymentTransactionRow,
  type PaymentTransactionType,
} from '../../settlement/payment-transactions';

const PAYMENT_TRANSACTIONS_URL = '/v2/payment_transactions';
const PAYMENT_METHOD_TYPES = ['card', 'paypay', 'apple_pay'] as const;

// A type alias, not an interface: like the other v2 objects.
export type PaymentTransactionObject = {
  readonly id: string;
  readonly object: 'payment_transaction';
  readonly livemode: boolean;
  readonly resource_id: string;
  readonly amount: number;
  readonly currency: 'jpy';
  readonly fee_rate: string;
  readonly fee: number;
  readonly type: PaymentTransactionType;
  readonly payment_method_type: string;
  readonly term_id: string;
  readonly created_at: string;
  readonly updated_at: string;
};

function renderPaymentTransaction(row: PaymentTransactionRow): PaymentTransactionObject {
  const at = toIsoSeconds(row.created_at);
  return {
    id: row.id,
    object: 'payment_transaction',
    livemode: row.livemode,
    resource_id: row.resource_id,
    amount: Number(row.amount),
    currency: 'jpy',
    fee_rate: row.fee_rate,
    fee: Number(row.fee),
    type: row.type,
    payment_method_type: row.payment_method_type,
    term_id: row.term_id,
    // A settled row never changes: the transaction is as it was made.
    created_at: at,
    updated_at: at,
  };
}

/** The pagination parameters and the SDK's filters `term_id`, `type`, `payment_method_type`. */
function decodeList(input: unknown): ListPaymentTransactionsCommand {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'term_id', 'type', 'payment_method_type']);
  const page = readV2Page(params);
  const filter = {
    termId: optionalString(params, 'term_id', { code: 'invalid_querystring' }),
    type: optionalEnum(params, 'type', PAYMENT_TRANSACTION_TYPES, { code: 'invalid_querystring' }),
    paymentMethodType: optionalEnum(params, 'payment_method_type', PAYMENT_METHOD_TYPES, { code: 'invalid_querystring' }),
  };
  return { page, filter };
}

export const PAYMENT_TRANSACTION_OPERATIONS = [
  defineCommandOperation('payment_transactions.retrieve', { decode: (input) => ({ id: requireString(readParams(input, ['id']), 'id') }), execute: retrievePaymentTransaction, encode: renderPaymentTransaction }),
  defineCommandOperation('payment_transactions.list', { decode: decodeList, execute: listPaymentTransactions, encode: (rows, command) => v2ListObject(rows, command.page, PAYMENT_TRANSACTIONS_URL, renderPaymentTransaction) }),
];
