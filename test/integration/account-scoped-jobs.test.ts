/**
 * Jobs work account by account (ARCHITECTURE.md, "Jobs, slots and exactly-once"): every
 * statement that locks rows of account data names one account (`account_id = $n`), so on Citus it
 * is routed to that account's shard (Citus refuses row locks across shards). Checked here on plain
 * PostgreSQL, without Citus, by recording every statement the engine sends while a simulation runs
 * each of the jobs over three accounts.
 *
 * PostgreSQL only: the recording listens on the pg driver (PGlite runs in-process without it); CI
 * always has PostgreSQL.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { idleJobs, simulateEveryJob } from '../support/every-job-accounts';
import { isPostgres } from '../support/database';
import { captureStatements, unscopedStatements, type SentStatement } from '../support/statement-capture';

const ENGINE_TABLES = /\b(job_runs|job_schedule|kessai_migrations)\b/;
const LOCKS = /\bFOR\s+(UPDATE|NO KEY UPDATE|SHARE|KEY SHARE)\b/i;
/** `account_id = $3`, `"account_id" = $1`, `"c"."account_id" = ANY($2::text[])`: the account, or a batch's accounts, bound as a parameter. */
const BOUND_ACCOUNT = /\baccount_id"?\s*=\s*(ANY\(\s*)?\$\d+/;

/** How many times the statement names one of `tables` after FROM or JOIN (a table function, a subquery, a LATERAL or `extract(epoch from c.x)` names none). */
function tableReferences(text: string, tables: ReadonlySet<string>): number {
  return [...text.matchAll(/\b(?:FROM|JOIN)\s+"?([a-z_]+)"?/gi)].filter((match) => tables.has(match[1]!.toLowerCase())).length;
}

/** Account filters bound as parameters (`account_id = $n`, `= ANY($n…)`). */
function boundAccounts(text: string): number {
  return [...text.matchAll(new RegExp(BOUND_ACCOUNT.source, 'g'))].length;
}

describe.runIf(isPostgres())('every statement on account rows names its accounts', () => {
  it('over a simulation in which every job works on three accounts', async () => {
    // The tables of account data: those with an account_id column (as `migrate --citus` finds them).
    const accountTables = new Set<string>();
    const stop = captureStatements();
    let idle: string[];
    let captured: SentStatement[];
    try {
      idle = await simulateEveryJob(process.env.DATABASE_URL!, async (world) => {
        const tables = await sql<{ table_name: string }>`
          SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' AND column_name = 'account_id'`.execute(world.ctx.db);
        for (const { table_name: table } of tables.rows) accountTables.add(table);
        return idleJobs(world);
      });
    } finally {
      captured = stop();
    }
    const sent = captured.map((statement) => statement.text);
    expect(accountTables.has('charges')).toBe(true);
    expect(idle).toEqual([]);
    const locking = [...new Set(sent.filter((text) => LOCKS.test(text) && !ENGINE_TABLES.test(text)))];
    // The jobs' claims and the operations' row locks were seen (the recording works)…
    expect(locking.length).toBeGreaterThan(8);
    // …and each names its account.
    expect(locking.filter((text) => !BOUND_ACCOUNT.test(text))).toEqual([]);
    // …and so does every table the statement reads (joined, or in a subquery): Citus carries the
    // account from one table to another through the join's equality for a single account, but not
    // for a batch's `= ANY` list, nor past a join together with a correlated subquery (measured
    // on Citus 13.2: "could not run distributed query with FOR UPDATE/SHARE commands").
    expect(locking.filter((text) => tableReferences(text, accountTables) > boundAccounts(text))).toEqual([]);
    // Statements addressing rows by tuple id must stay on one account's shard as well.
    expect(sent.filter((text) => /\bctid\b/.test(text) && !BOUND_ACCOUNT.test(text))).toEqual([]);
    // Every statement, locking or not, of every batch and every operation (inside a transaction)
    // names its accounts on every account table it reads or changes: on Citus one batch, one
    // request, is one shard's work and a one-phase commit. Only the lock-free look for the accounts
    // with due work, before the batches, reads across accounts.
    expect(captured.filter((statement) => statement.inTransaction).length).toBeGreaterThan(100);
    expect(unscopedStatements(captured, accountTables, { discovery: true })).toEqual([]);
  });
});
