/**
 * The v1 codec of statements (v1 §2.6, §2.7, §4.7): `statements.retrieve` by id, `statements.list`
 * with v1 pagination and the filters of §4.7, `statements.statement_urls` (`platformer`); statement
 * records → v1 statement objects, an issued URL → the `statement_url` object.
 */
import { STATEMENT_TYPES } from '../../domain/sales-statements';
import { toUnixSeconds } from '../../domain/time';
import { defineCommandOperation } from '../../operations/define';
import { listObject, PAGINATION_PARAMS, readPage, type Page } from '../../operations/pagination';
import { optionalBoolean, optionalEnum, optionalString, readParams, requireString } from '../../operations/params';
import { issueStatementUrl, type IssuedUrl, type IssueStatementUrlCommand, type StatementUrlObject } from '../../settlement/statement-urls';
import {
  listStatements,
  renderStatementRecord,
  retrieveStatement,
  STATEMENT_OWNERS,
  STATEMENTS_URL,
  type ListStatementsCommand,
} from '../../settlement/statements';
import { decodeId } from './codec';

/**
 * `statements.list`: pagination plus `owner` (`merchant` or `tenant`), `type`, `tenant`, `term`
 * and `source_transfer`, checked in that order.
 */
export function decodeListStatements(input: unknown): ListStatementsCommand & { readonly page: Page } {
  const params = readParams(input, [...PAGINATION_PARAMS, 'owner', 'source_transfer', 'tenant', 'term', 'type']);
  const page = readPage(params);
  return {
    page,
    owner: optionalEnum(params, 'owner', STATEMENT_OWNERS, { code: 'invalid_owner_type', message: 'owner must be merchant or tenant' }),
    type: optionalEnum(params, 'type', STATEMENT_TYPES, { code: 'invalid_querystring', message: `type must be one of ${STATEMENT_TYPES.join(', ')}` }),
    tenant: optionalString(params, 'tenant', { code: 'invalid_querystring' }),
    term: optionalString(params, 'term', { code: 'invalid_querystring' }),
    sourceTransfer: optionalString(params, 'source_transfer', { code: 'invalid_querystring' }),
  };
}

/** A statement URL's parameters (statements and balances alike): `id` (path) and `platformer` (boolean, default false, v1 §4.7). */
export function decodeStatementUrl(input: unknown): IssueStatementUrlCommand {
  const params = readParams(input, ['id', 'platformer']);
  return { id: requireString(params, 'id'), platformer: optionalBoolean(params, 'platformer') ?? false };
}

/** The `statement_url` object (v1 §2.7) of an issued URL. */
export function renderStatementUrl(issued: IssuedUrl): StatementUrlObject {
  return { object: 'statement_url', url: issued.url, expires: toUnixSeconds(issued.expires) };
}

export const STATEMENT_OPERATIONS = [
  defineCommandOperation('statements.retrieve', { decode: decodeId, execute: retrieveStatement, encode: renderStatementRecord }),
  defineCommandOperation('statements.list', {
    decode: decodeListStatements,
    execute: listStatements,
    encode: (records, command) => listObject(records.map(renderStatementRecord), command.page, STATEMENTS_URL),
  }),
  defineCommandOperation('statements.statement_urls', { decode: decodeStatementUrl, execute: issueStatementUrl, encode: renderStatementUrl }),
];
