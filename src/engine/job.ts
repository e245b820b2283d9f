/**
 * What a scheduled job is: a name, a cron schedule in Asia/Tokyo, and a run function that
 * processes everything due as of its slot. Jobs live one per file in jobs/.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema';
import type { Context } from './context';

/** What a run reports: counts by name (renewed, failed, released, …), stored in the ledger. */
export type JobCounts = Readonly<Record<string, number>>;

export interface SlotRun {
  /** The scheduled instant this run stands for: work is due "as of" it, never as of wall time. */
  readonly slot: Date;
  /** 1 for the first claim of the slot; more when a failed or lapsed run is tried again. */
  readonly attempt: number;
  /**
   * Aborted when the worker is asked to stop, or when this run lost its claim (another worker took
   * the slot over): finish or abandon the current batch, then return.
   */
  readonly signal: AbortSignal;
  /**
   * Call inside each batch transaction, before writing: throws RunLost unless this run still holds
   * the slot, and keeps the claim from being taken over until the transaction ends. A run that lost
   * its slot then writes nothing more.
   */
  assertClaim(executor: Kysely<Database>): Promise<void>;
}

export interface JobDefinition {
  readonly name: string;
  /** Cron expression read in Asia/Tokyo, e.g. `* * * * *` or `0 0 * * *` (00:00 JST). */
  readonly schedule: string;
  readonly description: string;
  /**
   * Processes everything due as of `run.slot`, in batches, each batch in its own transaction with
   * natural unique keys as the last line of defence, so that running a slot again, or two
   * workers at once, creates nothing twice. Checks `run.signal` between batches.
   */
  run(ctx: Context, run: SlotRun): Promise<JobCounts>;
  /**
   * The earliest instant after `after` at which this job has due work, or null when it has none
   * (the simulator jumps straight there instead of stepping through empty slots).
   */
  nextDueAt?(ctx: Context, after: Date): Promise<Date | null>;
}

/** Thrown by a job that stopped between batches because the worker is shutting down. */
export class RunAborted extends Error {
  constructor() {
    super('run stopped between batches because the worker is shutting down');
    this.name = 'RunAborted';
  }
}

/** Thrown when a run finds that its claim was taken over by another worker. */
export class RunLost extends Error {
  constructor(job: string, slot: Date) {
    super(`run of ${job} @ ${slot.toISOString()} lost its claim to another worker; it stops without writing more`);
    this.name = 'RunLost';
  }
}

/** Call between batches: stops the run cleanly when the worker is asked to stop. */
export function checkpoint(run: SlotRun): void {
  if (!run.signal.aborted) return;
  if (run.signal.reason instanceof RunLost) throw run.signal.reason;
  throw new RunAborted();
}

/** Whether an error, or any error in its `cause` chain, is of the given class. */
export function causedBy(error: unknown, kind: abstract new (...args: never[]) => Error): boolean {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 10; depth += 1) {
    if ((current as unknown) instanceof kind) return true;
    current = (current as Error).cause;
  }
  return false;
}
