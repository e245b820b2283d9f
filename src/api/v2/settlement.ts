/**
 * The v2 codec of statements, balances and terms (official-sdks.md §2 "Others (read)"): the same
 * executions and records as the v1 operations (src/settlement/statements.ts, terms.ts,
 * statement-urls.ts), shown in v2's shape — every UNIX-seconds instant an ISO 8601 string under
 * its v2 name (`v2Instants`) — and listed by cursor (`limit`, `starting_after`, `ending_before`),
 * newest first. A balance's download URL is the statement URL answered as `object: "balance_url"`.
 */
import { defineCommandOperation } from '../../operations/define';
import { readParams, requireString } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject, type V2Page } from '../../operations/v2-pagination';
import { issueBalanceStatementUrl } from '../../settlement/balance-statement-urls';
import { issueStatementUrl, type IssuedUrl } from '../../settlement/statement-urls';
import { listBalances, listStatements, renderBalanceRecord, renderStatementRecord, retrieveBalance, retrieveStatement } from '../../settlement/statements';
import { listTerms, renderTermRecord, retrieveTerm } from '../../settlement/terms';
import { v2Instants } from '../../settlement/v2-settlement-objects';
import { decodeStatementUrl, renderStatementUrl } from '../v1/statements';

/** The cursor paging parameters, nothing else. */
function decodeV2Page(input: unknown): V2Page {
  return readV2Page(readParams(input, V2_PAGINATION_PARAMS));
}

/** The object's id (the path parameter), nothing else. */
function decodeId(input: unknown): { readonly id: string } {
  return { id: requireString(readParams(input, ['id']), 'id') };
}

/** A v1-shaped settlement object in v2's shape. */
const inV2 = (object: object): object => v2Instants(object) as object;

const renderUrl = (issued: IssuedUrl): object => inV2(renderStatementUrl(issued));

export const V2_SETTLEMENT_OPERATIONS = [
  defineCommandOperation('v2.statements.retrieve', { decode: decodeId, execute: retrieveStatement, encode: (record) => inV2(renderStatementRecord(record)) }),
  defineCommandOperation('v2.statements.list', {
    decode: (input) => ({ page: decodeV2Page(input) }),
    execute: listStatements,
    encode: (records, command) => inV2(v2ListObject(records, command.page, '/v2/statements', renderStatementRecord)),
  }),
  defineCommandOperation('v2.statements.statement_urls', { decode: decodeStatementUrl, execute: issueStatementUrl, encode: renderUrl }),
  defineCommandOperation('v2.balances.retrieve', { decode: decodeId, execute: retrieveBalance, encode: (record) => inV2(renderBalanceRecord(record)) }),
  defineCommandOperation('v2.balances.list', {
    decode: (input) => ({ page: decodeV2Page(input) }),
    execute: listBalances,
    encode: (records, command) => inV2(v2ListObject(records, command.page, '/v2/balances', renderBalanceRecord)),
  }),
  // The SDK's createBalanceUrl: the balance's statements by the one URL mechanism, as `balance_url`.
  defineCommandOperation('v2.balances.balance_urls', { decode: decodeStatementUrl, execute: issueBalanceStatementUrl, encode: (issued) => ({ ...renderUrl(issued), object: 'balance_url' }) }),
  defineCommandOperation('v2.terms.retrieve', { decode: decodeId, execute: retrieveTerm, encode: (record) => inV2(renderTermRecord(record)) }),
  defineCommandOperation('v2.terms.list', {
    decode: decodeV2Page,
    execute: listTerms,
    encode: (records, page) => inV2(v2ListObject(records, page, '/v2/terms', renderTermRecord)),
  }),
];
