/**
 * A job built the way every kessai job is built, for testing the scheduler's exactly-once
 * guarantees without business rules in the way: it takes due items in batches (FOR UPDATE SKIP
 * LOCKED), writes one "effect" per item under a natural unique key and marks the items done, one
 * transaction per batch that also records its counts in the ledger. It writes its own loop (rather
 * than `runBatches`) to offer hooks after each commit: a pause to be killed in, a callback.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Kysely } from 'kysely';
import type { Context } from '../../src/engine/context';
import { checkpoint, type JobDefinition } from '../../src/engine/job';

export const BATCH_WRITER_TABLES = `
  CREATE TABLE IF NOT EXISTS test_items (
    account_id text NOT NULL, item_id text NOT NULL, due_at timestamptz NOT NULL,
    amount bigint NOT NULL, processed_at timestamptz,
    PRIMARY KEY (account_id, item_id));
  CREATE TABLE IF NOT EXISTS test_effects (
    account_id text NOT NULL, item_id text NOT NULL, slot timestamptz NOT NULL, owner text NOT NULL,
    amount bigint NOT NULL, PRIMARY KEY (account_id, item_id));
  CREATE TABLE IF NOT EXISTS test_slot_runs (
    job text NOT NULL, slot timestamptz NOT NULL, owner text NOT NULL, attempt integer NOT NULL);
`;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function createBatchWriterTables(db: Kysely<any>): Promise<void> {
  for (const statement of BATCH_WRITER_TABLES.split(';').map((s) => s.trim()).filter(Boolean)) {
    await sql.raw(statement).execute(db);
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function seedItems(db: Kysely<any>, count: number, dueAt: Date): Promise<void> {
  await sql`
    INSERT INTO test_items (account_id, item_id, due_at, amount)
    SELECT 'acct_' || (i % 7), 'item_' || lpad(i::text, 7, '0'), ${dueAt}, 100 + i
    FROM generate_series(1, ${count}) AS i`.execute(db);
}

export interface BatchWriterOptions {
  readonly name?: string;
  readonly schedule?: string;
  readonly owner: string;
  /** Pause after each committed batch (lets a test kill the process mid-slot). */
  readonly pauseMs?: number;
  /** Called after each committed batch. */
  readonly onBatch?: (batch: number, rows: number) => void;
  /** Throw instead of working, for this many attempts of every slot. */
  readonly failAttempts?: number;
  /** Throw after committing this many batches, in every attempt. */
  readonly failAfterBatches?: number;
}

export function batchWriterJob(options: BatchWriterOptions): JobDefinition {
  const name = options.name ?? 'test.batch-writer';
  return {
    name,
    schedule: options.schedule ?? '* * * * *',
    description: 'writes one effect per due test item, in batches',
    async run(ctx: Context, run) {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const db = ctx.db as unknown as Kysely<any>;
      await sql`INSERT INTO test_slot_runs (job, slot, owner, attempt) VALUES (${name}, ${run.slot}, ${options.owner}, ${run.attempt})`.execute(db);
      if (run.attempt <= (options.failAttempts ?? 0)) throw new Error(`planned failure on attempt ${run.attempt}`);
      let processed = 0;
      let batch = 0;
      for (;;) {
        checkpoint(run);
        const rows = await db.transaction().execute(async (trx) => {
          await run.assertClaim(trx as never);
          const due = await sql<{ account_id: string; item_id: string; amount: number }>`
            SELECT account_id, item_id, amount FROM test_items
            WHERE processed_at IS NULL AND due_at <= ${run.slot}
            ORDER BY due_at, account_id, item_id LIMIT ${ctx.config.batchSize}
            FOR UPDATE SKIP LOCKED`.execute(trx);
          if (due.rows.length === 0) return 0;
          await sql`
            INSERT INTO test_effects (account_id, item_id, slot, owner, amount)
            SELECT a, i, ${run.slot}, ${options.owner}, m
            FROM unnest(${due.rows.map((r) => r.account_id)}::text[], ${due.rows.map((r) => r.item_id)}::text[], ${due.rows.map((r) => r.amount)}::bigint[]) AS t(a, i, m)
            ON CONFLICT (account_id, item_id) DO NOTHING`.execute(trx);
          await sql`
            UPDATE test_items SET processed_at = ${run.slot}
            FROM unnest(${due.rows.map((r) => r.account_id)}::text[], ${due.rows.map((r) => r.item_id)}::text[]) AS t(a, i)
            WHERE account_id = t.a AND item_id = t.i`.execute(trx);
          await run.recordBatch(trx as never, { processed: due.rows.length, batches: 1 });
          return due.rows.length;
        });
        if (rows === 0) break;
        processed += rows;
        batch += 1;
        options.onBatch?.(batch, rows);
        if (batch === options.failAfterBatches) throw new Error(`planned failure after batch ${batch} of attempt ${run.attempt}`);
        if (options.pauseMs) await sleep(options.pauseMs);
      }
      return { processed, batches: batch };
    },
  };
}
