/**
 * Which accounts have due work, and how they are packed into batches, for the jobs' batch loop
 * (runBatches in job.ts).
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import { accountsByNode, accountShards } from '../db/citus';
import { isDatabaseUnavailable } from '../db/errors';
import type { Database } from '../db/schema';

/** An account with due rows, and how many (counted up to the cap asked for: the batch size). */
export interface DueAccount {
  readonly accountId: string;
  readonly due: number;
}

/**
 * The accounts having at least one row of `table` that matches `due` (SQL on the row as `d`), by
 * account id, each with its count of due rows up to `cap` (`due` may read the account as `a`): one capped index probe per account on
 * single PostgreSQL (the due indexes lead with account_id), a query every Citus shard answers for
 * its own accounts. No locks. With `among`, only those accounts (a slot's account group,
 * slot-groups.ts): on Citus the statement then reaches only their shards.
 */
export async function dueAccounts(db: Kysely<Database>, table: keyof Database & string, due: RawBuilder<unknown>, cap: number, among?: readonly string[]): Promise<DueAccount[]> {
  // The accounts named on both tables: Citus prunes the shards of each relation by its own conditions.
  const named = (alias: string) => (among === undefined ? sql`` : sql` AND ${sql.ref(`${alias}.account_id`)} = ANY(${[...among]}::text[])`);
  const result = await sql<{ account_id: string; due: number }>`
    SELECT a.account_id, n.due FROM accounts a
    CROSS JOIN LATERAL (SELECT count(*)::int AS due FROM (SELECT 1 FROM ${sql.table(table)} d WHERE d.account_id = a.account_id${named('d')} AND ${due} LIMIT ${cap}) x) n
    WHERE n.due > 0${named('a')}
    ORDER BY a.account_id`.execute(db);
  return result.rows.map((row) => ({ accountId: row.account_id, due: row.due }));
}

/**
 * The earliest `column` of the rows of `table` that match `due` (SQL on the row as `d`) and lie
 * after `after` (strictly; at or after with `inclusive`), or null: a job's nextDueAt, where the
 * simulator stops next. One probe of the due index per account, as dueAccounts: the due indexes
 * lead with account_id, so a min() over the whole table reads every entry of the index (every
 * active subscription, at every stop of a simulation — a cost of stops × book).
 */
export async function earliestDueAt(db: Kysely<Database>, table: keyof Database & string, column: string, due: RawBuilder<unknown>, after: Date, inclusive = false): Promise<Date | null> {
  const result = await earliestDueQuery(table, column, due, after, inclusive).execute(db);
  return result.rows[0]?.due ?? null;
}

/** earliestDueAt's statement. */
export function earliestDueQuery(table: keyof Database & string, column: string, due: RawBuilder<unknown>, after: Date, inclusive = false): RawBuilder<{ due: Date | null }> {
  const at = sql.ref(`d.${column}`);
  return sql<{ due: Date | null }>`
    SELECT min(n.due) AS due FROM accounts a
    CROSS JOIN LATERAL (SELECT min(${at}) AS due FROM ${sql.table(table)} d WHERE d.account_id = a.account_id AND ${due} AND ${at} ${inclusive ? sql`>=` : sql`>`} ${after}) n`;
}

/**
 * The batches of one round: every account whose due rows fill a batch (`due >= limit`) alone;
 * the others packed, in order, into groups of at most `limit` due rows, only ever with accounts of
 * the same shard (`shardOf`; one shard on single PostgreSQL), so that a statement naming a group
 * is still routed to one shard on Citus. Pure: the order of `accounts` decides the groups.
 */
export function packAccounts(accounts: readonly DueAccount[], limit: number, shardOf: (accountId: string) => string): string[][] {
  const batches: string[][] = [];
  const open = new Map<string, { accounts: string[]; due: number }>();
  for (const { accountId, due } of accounts) {
    if (due >= limit) {
      batches.push([accountId]);
      continue;
    }
    const shard = shardOf(accountId);
    let group = open.get(shard);
    if (group !== undefined && group.due + due > limit) group = undefined;
    if (group === undefined) {
      group = { accounts: [], due: 0 };
      open.set(shard, group);
      batches.push(group.accounts);
    }
    group.accounts.push(accountId);
    group.due += due;
  }
  return batches;
}

/** packAccounts with the shards of the database: Citus's shard of each account, or one shard on plain PostgreSQL. */
export async function packDueAccounts(db: Kysely<Database>, accounts: readonly DueAccount[], limit: number): Promise<string[][]> {
  const shards = accounts.length > 1 ? await accountShards(db, accounts.map((a) => a.accountId)) : null;
  return packAccounts(accounts, limit, (accountId) => shards?.get(accountId) ?? '');
}

/**
 * What `list` finds over every shard; on Citus, when a worker node cannot be reached, node by node
 * instead: the accounts known on the coordinator (`api_key_directory`, where every account has its
 * keys) put by the node of their shard, each node's listing naming only its own accounts. Returns
 * what the answering nodes listed, and the accounts of each node that did not answer. An account
 * with no key in the directory is not known there, so not listed then.
 */
export async function listOnReachableNodes<T>(db: Kysely<Database>, list: (among?: readonly string[]) => Promise<readonly T[]>): Promise<{ listed: T[]; unreachable: string[][] }> {
  try {
    return { listed: [...(await list())], unreachable: [] };
  } catch (error) {
    if (!isDatabaseUnavailable(error)) throw error;
    const nodes = await accountsByNode(db);
    if (nodes === null) throw error;
    const listed: T[] = [];
    const unreachable: string[][] = [];
    for (const accounts of nodes) {
      try {
        listed.push(...(await list(accounts)));
      } catch (nodeError) {
        if (!isDatabaseUnavailable(nodeError)) throw nodeError;
        unreachable.push(accounts);
      }
    }
    return { listed, unreachable };
  }
}

/**
 * The batches of a slot's first round, recorded as its account groups (slot-groups.ts): the due
 * accounts, listed (listOnReachableNodes) and packed. Every account of a node that does not answer
 * becomes one group, which fails as unreachable and is taken again on the slot's next attempt — so
 * the other nodes' accounts are processed meanwhile.
 */
export async function planDueGroups(
  db: Kysely<Database>,
  dueAccountsOf: (db: Kysely<Database>, cap: number, among?: readonly string[]) => Promise<readonly DueAccount[]>,
  limit: number,
): Promise<string[][]> {
  const { listed, unreachable } = await listOnReachableNodes(db, (among) => dueAccountsOf(db, limit, among));
  return [...(await packDueAccounts(db, listed, limit)), ...unreachable];
}
