/**
 * The v1 codec of balances (service rules §4 "Balance"): `balances.retrieve` by id,
 * `balances.list` with v1 pagination and `state`, `owner`, `tenant`, and `balances.statement_urls`
 * (POST /v1/balances/{id}/statement_urls, the SDK's `balances.statementUrls`: `id` and
 * `platformer` as for statements, v1 §4.7); balance records → v1 balance objects, the issued URL →
 * the `statement_url` object (v1 §2.7).
 */
import { defineCommandOperation } from '../../operations/define';
import { listObject, PAGINATION_PARAMS, readPage, type Page } from '../../operations/pagination';
import { optionalEnum, optionalString, readParams } from '../../operations/params';
import { issueBalanceStatementUrl } from '../../settlement/balance-statement-urls';
import { BALANCE_OWNERS, BALANCE_STATES, BALANCES_URL, listBalances, renderBalanceRecord, retrieveBalance, type ListBalancesCommand } from '../../settlement/statements';
import { decodeId } from './codec';
import { decodeStatementUrl, renderStatementUrl } from './statements';

/** `balances.list`: pagination plus `state`, `owner` and `tenant`, checked in that order. */
export function decodeListBalances(input: unknown): ListBalancesCommand & { readonly page: Page } {
  const params = readParams(input, [...PAGINATION_PARAMS, 'state', 'owner', 'tenant']);
  const page = readPage(params);
  return {
    page,
    state: optionalEnum(params, 'state', BALANCE_STATES, { code: 'invalid_querystring', message: 'state must be collecting, transfer or claim' }),
    owner: optionalEnum(params, 'owner', BALANCE_OWNERS, { code: 'invalid_owner_type', message: 'owner must be merchant, tenant or platform' }),
    tenant: optionalString(params, 'tenant', { code: 'invalid_querystring' }),
  };
}

export const BALANCE_OPERATIONS = [
  defineCommandOperation('balances.retrieve', { decode: decodeId, execute: retrieveBalance, encode: renderBalanceRecord }),
  defineCommandOperation('balances.list', {
    decode: decodeListBalances,
    execute: listBalances,
    encode: (records, command) => listObject(records.map(renderBalanceRecord), command.page, BALANCES_URL),
  }),
  defineCommandOperation('balances.statement_urls', { decode: decodeStatementUrl, execute: issueBalanceStatementUrl, encode: renderStatementUrl }),
];
