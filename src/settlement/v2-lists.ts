/**
 * The v2 lists of statements, balances and terms (official-sdks.md §2 "Others (read)"): the same
 * rows and objects as the v1 lists, paged by cursor (`limit`, `starting_after`, `ending_before`),
 * newest first. The v2 codec shows their instants in ISO 8601 (src/api/v2/routes.ts).
 */
import type { Caller } from '../accounts/accounts';
import { reject } from '../domain/errors';
import type { Context } from '../engine/context';
import { defineOperation } from '../operations/define';
import { readParams } from '../operations/params';
import { inV2Page, readV2Page, V2_PAGINATION_PARAMS, v2ListObject, type V2List } from '../operations/v2-pagination';
import { balanceObjects, findStatement, statementObjects, type BalanceObject, type StatementObject } from './statements';
import { listTerms, renderTermRecord, type TermObject } from './terms';

export async function listV2Statements(ctx: Context, caller: Caller, input: unknown): Promise<V2List<StatementObject>> {
  const page = readV2Page(readParams(input, V2_PAGINATION_PARAMS));
  const cursor = page.cursor === undefined ? undefined : await findStatement(ctx.db, caller, page.cursor.id, page.cursor.param);
  const rows = await ctx.db
    .selectFrom('statements')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.statement_id }, 'statement_id'))
    .execute();
  const objects = await statementObjects(ctx.db, rows);
  return v2ListObject(objects, page, '/v2/statements', (object) => object);
}

export async function listV2Balances(ctx: Context, caller: Caller, input: unknown): Promise<V2List<BalanceObject>> {
  const page = readV2Page(readParams(input, V2_PAGINATION_PARAMS));
  let cursor: { created_at: Date; id: string } | undefined;
  if (page.cursor !== undefined) {
    const row = await ctx.db.selectFrom('balances').select(['created_at', 'balance_id']).where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('balance_id', '=', page.cursor.id).executeTakeFirst();
    if (!row) return reject('invalid_id', page.cursor.param, `No such balance: ${page.cursor.id}`);
    cursor = { created_at: row.created_at, id: row.balance_id };
  }
  const rows = await ctx.db
    .selectFrom('balances')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$call(inV2Page(page, cursor, 'balance_id'))
    .execute();
  return v2ListObject(await balanceObjects(ctx.db, rows), page, '/v2/balances', (object) => object);
}

export async function listV2Terms(ctx: Context, caller: Caller, input: unknown): Promise<V2List<TermObject>> {
  const page = readV2Page(readParams(input, V2_PAGINATION_PARAMS));
  return v2ListObject(await listTerms(ctx, caller, page), page, '/v2/terms', renderTermRecord);
}

export const V2_SETTLEMENT_LIST_OPERATIONS = [
  defineOperation('v2.statements.list', listV2Statements),
  defineOperation('v2.balances.list', listV2Balances),
  defineOperation('v2.terms.list', listV2Terms),
] as const;
