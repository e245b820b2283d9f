/**
 * Statements on account data name the accounts they touch (`account_id = $1`, or
 * `account_id = ANY($1)` for a group of accounts, bound constants): on Citus, where account tables
 * are distributed by account_id, such a statement is routed whole to the one shard holding those
 * accounts, so any SQL runs there (row locks, LATERAL … LIMIT/OFFSET probes). A request holds one
 * account; a job batch holds one account or a group of small accounts that live on one shard
 * (runBatches in src/engine/job.ts), so a statement over a batch's rows is one statement.
 *
 * In a statement that locks rows, EVERY account table it names (joined, or in a subquery) carries
 * the filter itself, not only the locked one: Citus 13.2 carries a single account's equality
 * through join conditions, but not a batch's `= ANY` list, and not past a join combined with a
 * correlated subquery ("could not run distributed query with FOR UPDATE/SHARE commands").
 * test/integration/account-scoped-jobs.test.ts checks it on the SQL the jobs send.
 */
import { sql, type RawBuilder, type SqlBool } from 'kysely';

/** The distinct accounts of `items`, in order of first appearance (at least one item). */
export function accountsOf<T>(items: readonly T[], accountOf: (item: T) => string): string[] {
  if (items.length === 0) throw new Error('an account-scoped statement needs at least one row');
  return [...new Set(items.map(accountOf))];
}

/**
 * `column = $1` for one account, `column = ANY($1::text[])` for several. One account stays an
 * equality so that PostgreSQL can walk a (account_id, due instant) index in order for a huge
 * account (an `= ANY` on the leading column gives up that order).
 */
export function inAccounts(column: string, accountIds: readonly string[]): RawBuilder<SqlBool> {
  if (accountIds.length === 0) throw new Error('an account-scoped statement needs at least one account');
  return accountIds.length === 1 ? sql<SqlBool>`${sql.ref(column)} = ${accountIds[0]}` : sql<SqlBool>`${sql.ref(column)} = ANY(${accountIds}::text[])`;
}

/**
 * `JOIN accounts <alias> ON <alias>.account_id <in the accounts> AND <alias>.account_id = <column>`:
 * the rows of a FROM item that is no table (a JSON document, unnest) tied to their named accounts.
 * An `INSERT … SELECT` from such rows takes its `account_id` from `<alias>.account_id`: Citus then
 * routes the statement whole to the accounts' shard; with the account read from the document it
 * copies the rows through the coordinator, and that copy commits in two phases.
 */
export function joinAccounts(alias: string, column: RawBuilder<unknown>, accountIds: readonly string[]): RawBuilder<unknown> {
  return sql`JOIN accounts ${sql.raw(alias)} ON ${inAccounts(`${alias}.account_id`, accountIds)} AND ${sql.ref(`${alias}.account_id`)} = ${column}`;
}
