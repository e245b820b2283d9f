/**
 * Which accounts have due work, for the jobs' batch loop (runBatches in job.ts, which works
 * account by account).
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from '../db/schema';

/**
 * The accounts having at least one row of `table` that matches `due` (SQL on the row as `d`, and
 * on its account as `a`), by account id: one index probe per account on single PostgreSQL (the due
 * indexes lead with account_id), a query every Citus shard answers for its own accounts. No locks.
 */
export async function accountsWithDueRows(db: Kysely<Database>, table: keyof Database & string, due: RawBuilder<unknown>): Promise<string[]> {
  const result = await sql<{ account_id: string }>`
    SELECT a.account_id FROM accounts a
    WHERE EXISTS (SELECT 1 FROM ${sql.table(table)} d WHERE d.account_id = a.account_id AND ${due})
    ORDER BY a.account_id`.execute(db);
  return result.rows.map((row) => row.account_id);
}
