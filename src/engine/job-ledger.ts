/**
 * The run ledger as an operator reads it (the operator API, the console, the metrics): for each
 * job its last slot, next slot, how far behind it is, and its failed and abandoned slots. Reads
 * only what the ledger's partial indexes cover (claimable and abandoned slots), so it stays cheap
 * however long the ledger grows.
 */
import { sql } from 'kysely';
import type { JobRunStatus } from '../db/column-types';
import type { Context } from './context';
import { nextSlotAfter, slotsBetween } from './cron';
import type { JobDefinition } from './job';

export interface LedgerSlot {
  readonly job: string;
  readonly slot: Date;
  readonly status: JobRunStatus;
  readonly attempt: number;
  readonly attemptsWithoutProgress: number;
  readonly owner: string | null;
  readonly startedAt: Date | null;
  readonly finishedAt: Date | null;
  readonly durationMs: number | null;
  readonly counts: Readonly<Record<string, number>> | null;
  readonly error: string | null;
  readonly retryAt: Date | null;
}

export interface JobState {
  readonly job: string;
  readonly schedule: string;
  readonly description: string;
  readonly lastSlot: LedgerSlot | null;
  readonly nextSlot: Date;
  /** Slots due by now and not done: pending, running, failed (waiting for a retry), plus slots no worker scheduled yet. */
  readonly dueSlots: number;
  /** The oldest of those slots. */
  readonly oldestDueSlot: Date | null;
  /** Slots that failed and wait for a retry. */
  readonly failedSlots: number;
  /** Slots given up: they wait for an operator's re-run. */
  readonly abandonedSlots: number;
}

export const LEDGER_STATUSES = ['pending', 'running', 'succeeded', 'failed', 'abandoned'] as const;

/** Unscheduled slots counted at most per job (a worker down for long: "at least this many"). */
const UNSCHEDULED_COUNTED = 10_000;

type LedgerRow = { job: string; slot: Date; status: JobRunStatus; attempt: number; attempts_without_progress: number; owner: string | null; started_at: Date | null; finished_at: Date | null; duration_ms: number | null; counts: Record<string, number> | null; error: string | null; retry_at: Date | null };

const toSlot = (row: LedgerRow): LedgerSlot => ({
  job: row.job,
  slot: row.slot,
  status: row.status,
  attempt: row.attempt,
  attemptsWithoutProgress: row.attempts_without_progress,
  owner: row.owner,
  startedAt: row.started_at,
  finishedAt: row.finished_at,
  durationMs: row.duration_ms,
  counts: row.counts,
  error: row.error,
  retryAt: row.retry_at,
});

const LEDGER_COLUMNS = ['job', 'slot', 'status', 'attempt', 'attempts_without_progress', 'owner', 'started_at', 'finished_at', 'duration_ms', 'counts', 'error', 'retry_at'] as const;

/** Every job's state as of `now`, in the registry's order. */
export async function jobStates(ctx: Pick<Context, 'db'>, jobs: readonly JobDefinition[], now: Date): Promise<JobState[]> {
  const [open, abandoned, schedule] = await Promise.all([
    sql<{ job: string; due: number; oldest: Date | null; failed: number }>`
      SELECT job, count(*) FILTER (WHERE slot <= ${now})::int AS due, min(slot) FILTER (WHERE slot <= ${now}) AS oldest, count(*) FILTER (WHERE status = 'failed')::int AS failed
      FROM job_runs WHERE status IN ('pending', 'running', 'failed') GROUP BY job`.execute(ctx.db),
    sql<{ job: string; n: number }>`SELECT job, count(*)::int AS n FROM job_runs WHERE status = 'abandoned' GROUP BY job`.execute(ctx.db),
    ctx.db.selectFrom('job_schedule').select(['job', 'high_water']).execute(),
  ]);
  const openBy = new Map(open.rows.map((row) => [row.job, row]));
  const abandonedBy = new Map(abandoned.rows.map((row) => [row.job, row.n]));
  const highWater = new Map(schedule.map((row) => [row.job, row.high_water]));
  return Promise.all(
    jobs.map(async (job) => {
      const last = await ctx.db.selectFrom('job_runs').select(LEDGER_COLUMNS).where('job', '=', job.name).where('slot', '<=', now).orderBy('slot', 'desc').limit(1).executeTakeFirst();
      const mark = highWater.get(job.name);
      // Slots after the high-water mark that no worker has scheduled yet (a job never scheduled has none: it starts at its current slot).
      const unscheduled = mark === undefined ? [] : slotsBetween(job.schedule, mark, now, UNSCHEDULED_COUNTED);
      const row = openBy.get(job.name);
      const oldest = [row?.oldest ?? null, unscheduled[0] ?? null].filter((slot): slot is Date => slot !== null).sort((a, b) => a.getTime() - b.getTime())[0] ?? null;
      return {
        job: job.name,
        schedule: job.schedule,
        description: job.description,
        lastSlot: last ? toSlot(last as LedgerRow) : null,
        nextSlot: nextSlotAfter(job.schedule, now),
        dueSlots: (row?.due ?? 0) + unscheduled.length,
        oldestDueSlot: oldest,
        failedSlots: row?.failed ?? 0,
        abandonedSlots: abandonedBy.get(job.name) ?? 0,
      };
    }),
  );
}

/** A job's ledger rows, newest slot first, optionally of one status (every job's when `job` is undefined). */
export async function ledgerSlots(ctx: Pick<Context, 'db'>, options: { readonly job?: string; readonly status?: JobRunStatus; readonly limit?: number }): Promise<LedgerSlot[]> {
  let query = ctx.db.selectFrom('job_runs').select(LEDGER_COLUMNS);
  if (options.job !== undefined) query = query.where('job', '=', options.job);
  if (options.status !== undefined) query = query.where('status', '=', options.status);
  const rows = await query.orderBy('slot', 'desc').orderBy('job').limit(options.limit ?? 50).execute();
  return rows.map((row) => toSlot(row as LedgerRow));
}
