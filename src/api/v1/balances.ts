/**
 * The v1 codec of `balances.statement_urls` (POST /v1/balances/{id}/statement_urls, the SDK's
 * `balances.statementUrls`): `id` (path) and `platformer` (boolean, default false, as for
 * statements, v1 §4.7) → command; the issued URL → the `statement_url` object (v1 §2.7).
 */
import { toUnixSeconds } from '../../domain/time';
import { defineCommandOperation } from '../../operations/define';
import { optionalBoolean, readParams, requireString } from '../../operations/params';
import { issueBalanceStatementUrl, type IssueBalanceStatementUrlCommand } from '../../settlement/balance-statement-urls';
import type { IssuedUrl, StatementUrlObject } from '../../settlement/statement-urls';

export function decodeBalanceStatementUrl(input: unknown): IssueBalanceStatementUrlCommand {
  const params = readParams(input, ['id', 'platformer']);
  return { id: requireString(params, 'id'), platformer: optionalBoolean(params, 'platformer') ?? false };
}

/** The `statement_url` object (v1 §2.7) of an issued URL. */
export function renderStatementUrl(issued: IssuedUrl): StatementUrlObject {
  return { object: 'statement_url', url: issued.url, expires: toUnixSeconds(issued.expires) };
}

export const BALANCE_URL_OPERATIONS = [
  defineCommandOperation('balances.statement_urls', { decode: decodeBalanceStatementUrl, execute: issueBalanceStatementUrl, encode: renderStatementUrl }),
];
