/**
 * The v1 codec of transfers and tenant transfers (the `payjp` SDK's `transfers.list|retrieve|
 * charges` and `tenant_transfers.list|retrieve|charges|statementUrls`). What they answer after the
 * settlement overhaul is in src/settlement/transfers.ts; here the parameters are read: pagination,
 * `status`, `since_scheduled_date` / `until_scheduled_date` (YYYY-MM-DD), and for tenant transfers
 * `tenant` and `transfer`; the charge list takes pagination; the statement URL `platformer`.
 */
import { reject } from '../../domain/errors';
import { assertCalendarDate } from '../../domain/time';
import { defineCommandOperation } from '../../operations/define';
import { listObject, PAGINATION_PARAMS, readPage } from '../../operations/pagination';
import { optionalBoolean, optionalString, readParams, requireString, type Params } from '../../operations/params';
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

function optionalDate(params: Params, key: string): string | undefined {
  const date = optionalString(params, key, { code: 'invalid_querystring' });
  if (date === undefined) return undefined;
  try {
    assertCalendarDate(date);
  } catch {
    reject('invalid_querystring', key, `${key} must be a date YYYY-MM-DD, got ${JSON.stringify(date)}`);
  }
  return date;
}

function decodeList(kind: TransferKind) {
  return (input: unknown): ListTransfersCommand => {
    const extra = kind === 'tenant_transfer' ? ['tenant', 'transfer'] : [];
    const params = readParams(input, [...PAGINATION_PARAMS, 'status', 'since_scheduled_date', 'until_scheduled_date', ...extra]);
    const page = readPage(params);
    const status = optionalString(params, 'status', { code: 'invalid_querystring' });
    if (status !== undefined && !(TRANSFER_STATUSES as readonly string[]).includes(status)) {
      reject('invalid_querystring', 'status', `status must be one of ${TRANSFER_STATUSES.join(', ')}, got ${JSON.stringify(status)}`);
    }
    return {
      kind,
      page,
      status: status as TransferStatus | undefined,
      sinceScheduledDate: optionalDate(params, 'since_scheduled_date'),
      untilScheduledDate: optionalDate(params, 'until_scheduled_date'),
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
    const params = readParams(input, ['id', ...PAGINATION_PARAMS]);
    return { kind, id: requireString(params, 'id'), page: readPage(params) };
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
