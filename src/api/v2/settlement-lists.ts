/**
 * The v2 codec of the statement, balance and term lists (official-sdks.md §2 "Others (read)"): the
 * same executions, rows and objects as the v1 lists (src/settlement/statements.ts, terms.ts), paged
 * by cursor (`limit`, `starting_after`, `ending_before`), newest first. Their instants are shown in
 * ISO 8601 by the routes' `settlement()` encoding (./routes.ts), as for the retrieves they share with v1.
 */
import { defineCommandOperation } from '../../operations/define';
import { readParams } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject, type V2Page } from '../../operations/v2-pagination';
import { listBalances, listStatements, renderBalanceRecord, renderStatementRecord } from '../../settlement/statements';
import { listTerms, renderTermRecord } from '../../settlement/terms';

/** The cursor paging parameters, nothing else. */
function decodeV2Page(input: unknown): V2Page {
  return readV2Page(readParams(input, V2_PAGINATION_PARAMS));
}

export const V2_SETTLEMENT_LIST_OPERATIONS = [
  defineCommandOperation('v2.statements.list', {
    decode: (input) => ({ page: decodeV2Page(input) }),
    execute: listStatements,
    encode: (records, command) => v2ListObject(records, command.page, '/v2/statements', renderStatementRecord),
  }),
  defineCommandOperation('v2.balances.list', {
    decode: (input) => ({ page: decodeV2Page(input) }),
    execute: listBalances,
    encode: (records, command) => v2ListObject(records, command.page, '/v2/balances', renderBalanceRecord),
  }),
  defineCommandOperation('v2.terms.list', {
    decode: decodeV2Page,
    execute: listTerms,
    encode: (records, page) => v2ListObject(records, page, '/v2/terms', renderTermRecord),
  }),
];
