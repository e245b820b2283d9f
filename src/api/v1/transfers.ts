/**
 * The v1 codec of transfers and tenant transfers (the `payjp` SDK's `transfers.list|retrieve|
 * charges` and `tenant_transfers.list|retrieve|charges|statementUrls`). What they answer after the
 * settlement overhaul is in src/settlement/transfers.ts; here the parameters are read: pagination,
 * `status`, `since_scheduled_date` / `until_scheduled_date` (UNIX seconds, as the SDK types them), and for tenant transfers
 * `tenant` and `transfer`; the charge list takes pagination and `customer`; the statement URL `platformer`.
 */
import { fromUnixSeconds } from '../../domain/time';
import { defineCommandOperation } from '../../operations/define';
import { listObject, PAGINATION_PARAMS, readPage } from '../../operations/pagination';
import { optionalBoolean, optionalInteger, optionalEnum, optionalString, readParams, requireString, type Params } from '../../operations/params';
import {
  listTransfers,
  retrieveTransfer,
  tenantTransferStatementUrl,
  transferCharges,
  TRANSFER_STATUSES,
  type ListTransfersCommand,
  type TransferKind,
  type TransferStatus,
} from '../../settlement/transfers';

const URL_OF: Readonly<Record<TransferKind, string>> = { transfer: '/v1/transfers', tenant_transfer: '/v1/tenant_transfers' };

/** A scheduled-date bound: UNIX seconds, as the SDK types it (`invalid_timestamp` otherwise). */
function optionalTimestamp(params: Params, key: string): Date | undefined {
  const seconds = optionalInteger(params, key, { min: 0, code: 'invalid_timestamp' });
  return seconds === undefined ? undefined : fromUnixSeconds(seconds);
}

function decodeList(kind: TransferKind) {
  return (input: unknown): ListTransfersCommand => {
    const extra = kind === 'tenant_transfer' ? ['tenant', 'transfer'] : [];
    const params = readParams(input, [...PAGINATION_PARAMS, 'status', 'since_scheduled_date', 'until_scheduled_date', ...extra]);
    const page = readPage(params);
    const status = optionalEnum(params, 'status', TRANSFER_STATUSES, { code: 'invalid_querystring' });
    return {
      kind,
      page,
      status: status as TransferStatus | undefined,
      sinceScheduledDate: optionalTimestamp(params, 'since_scheduled_date'),
      untilScheduledDate: optionalTimestamp(params, 'until_scheduled_date'),
      tenant: optionalString(params, 'tenant', { code: 'invalid_querystring' }),
      transfer: optionalString(params, 'transfer', { code: 'invalid_querystring' }),
    };
  };
}

function decodeTransferId(kind: TransferKind) {
  return (input: unknown) => ({ kind, id: requireString(readParams(input, ['id']), 'id') });
}

function decodeCharges(kind: TransferKind) {
  return (input: unknown) => {
    const params = readParams(input, ['id', ...PAGINATION_PARAMS, 'customer']);
    return { kind, id: requireString(params, 'id'), page: readPage(params), customer: optionalString(params, 'customer', { code: 'invalid_querystring' }) };
  };
}

function transferOperations(kind: TransferKind, resource: string) {
  return [
    defineCommandOperation(`${resource}.list`, { decode: decodeList(kind), execute: listTransfers, encode: (rows, command) => listObject(rows, command.page, URL_OF[kind]) }),
    defineCommandOperation(`${resource}.retrieve`, { decode: decodeTransferId(kind), execute: retrieveTransfer, encode: (transfer) => transfer }),
    defineCommandOperation(`${resource}.charges`, { decode: decodeCharges(kind), execute: transferCharges, encode: (never) => never }),
  ];
}

export const TRANSFER_OPERATIONS = [
  ...transferOperations('transfer', 'transfers'),
  ...transferOperations('tenant_transfer', 'tenant_transfers'),
  defineCommandOperation('tenant_transfers.statement_urls', {
    decode: (input) => {
      const params = readParams(input, ['id', 'platformer']);
      return { kind: 'tenant_transfer' as const, id: requireString(params, 'id'), platformer: optionalBoolean(params, 'platformer') ?? false };
    },
    execute: tenantTransferStatementUrl,
    encode: (never) => never,
  }),
];
