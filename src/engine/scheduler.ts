/**
 * The scheduler: turns each job's cron schedule into slots, claims them in the run ledger
 * (`job_runs`), and runs them in order, exactly once to completion.
 *
 * - Scheduling: slots in (high-water, now] are inserted as `pending` (ON CONFLICT DO NOTHING), and
 *   the job's high-water mark is advanced by a conditional upsert, in one transaction. Slots
 *   missed while no worker ran are backfilled, bounded by `backfillWindowMs`. The high-water mark
 *   only moves forward, so a clock that goes backwards schedules nothing again.
 * - Claiming: one conditional UPDATE per slot flips it to `running` under a lease; two workers
 *   racing for a slot cannot both win. A run whose lease lapsed (its worker died) is claimed again.
 * - Finishing: only the claim that still holds the slot (same owner and attempt) may record the
 *   outcome. A failed run is retried after a growing delay, up to `maxAttempts`, then `abandoned`.
 */
import { performance } from 'node:perf_hooks';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema';
import { toError } from '../domain/errors';
import type { Clock } from './clock';
import type { Context } from './context';
import { isSlot, slotsBetween } from './cron';
import { causedBy, RunAborted, RunLost, type JobCounts, type JobDefinition } from './job';

export interface SchedulerOptions {
  /** Names this worker in the ledger (`owner`), e.g. `host:pid`. */
  readonly owner: string;
  /**
   * The clock of the ledger's own bookkeeping (leases, retry times, started/finished). It is the
   * context's clock by default; a worker replaying the past (`worker --once --at`) keeps the real
   * clock here, so the leases it takes are not already lapsed for the other workers.
   */
  readonly ledgerClock?: Clock;
}

export type SlotOutcome =
  | { readonly job: string; readonly slot: Date; readonly attempt: number; readonly status: 'succeeded'; readonly counts: JobCounts }
  | { readonly job: string; readonly slot: Date; readonly attempt: number; readonly status: 'failed' | 'abandoned'; readonly error: string }
  | { readonly job: string; readonly slot: Date; readonly attempt: number; readonly status: 'released' | 'lost' };

interface Claim {
  readonly job: string;
  readonly slot: Date;
  readonly attempt: number;
}

/** The shortest lease the scheduler accepts: a heartbeat must fit in it several times. */
export const MIN_LEASE_MS = 10_000;

/** Sort and hash memory of one batch transaction at least (see #assertClaim). */
const BATCH_WORK_MEM = '64MB';

export class Scheduler {
  readonly #ctx: Context;
  readonly #jobs: ReadonlyMap<string, JobDefinition>;
  readonly #order: readonly string[];
  readonly #owner: string;
  readonly #ledgerClock: Clock;
  readonly #abort = new AbortController();

  constructor(ctx: Context, jobs: readonly JobDefinition[], options: SchedulerOptions) {
    const byName = new Map<string, JobDefinition>();
    for (const job of jobs) {
      if (byName.has(job.name)) throw new Error(`job ${job.name} is registered twice`);
      byName.set(job.name, job);
    }
    if (ctx.config.leaseMs < MIN_LEASE_MS) throw new Error(`lease must be at least ${MIN_LEASE_MS / 1000} s, got ${ctx.config.leaseMs} ms`);
    this.#ctx = ctx;
    this.#jobs = byName;
    this.#order = jobs.map((job) => job.name);
    this.#owner = options.owner;
    this.#ledgerClock = options.ledgerClock ?? ctx.clock;
  }

  get stopping(): boolean {
    return this.#abort.signal.aborted;
  }

  /** Asks the current run to stop after its batch; no further slot is started. */
  stop(): void {
    this.#abort.abort(new RunAborted());
  }

  /**
   * One wake-up: schedules every slot that came due, then runs every claimable slot, oldest
   * first (jobs due at the same instant run in registry order).
   */
  async tick(): Promise<SlotOutcome[]> {
    // Slots are due as of this instant; the ledger's own times are read afresh for every claim,
    // so a long catch-up never hands out a lease that has already lapsed.
    const cutoff = this.#ctx.clock.now();
    for (const job of this.#jobs.values()) {
      try {
        await this.#schedule(job, cutoff);
      } catch (error) {
        // One job's scheduling trouble must not keep the others from running.
        this.#ctx.log.error({ err: toError(error), job: job.name }, 'scheduling failed; the job is tried again at the next wake-up');
      }
    }
    await this.#abandonLapsedLastAttempts();
    const outcomes: SlotOutcome[] = [];
    while (!this.stopping) {
      const claim = await this.#claimNext(cutoff);
      if (!claim) break;
      outcomes.push(await this.#execute(claim));
    }
    return outcomes;
  }

  /**
   * Runs (or replays) one slot of one job now, whatever its ledger status, unless another worker
   * holds it under a live lease. Used by `kessai jobs run`.
   */
  async runSlot(jobName: string, slot: Date): Promise<SlotOutcome> {
    const job = this.#job(jobName);
    const now = this.#ctx.clock.now();
    if (!isSlot(job.schedule, slot)) throw new Error(`${slot.toISOString()} is not a slot of ${job.name} (schedule "${job.schedule}", Asia/Tokyo)`);
    if (slot.getTime() > now.getTime()) throw new Error(`slot ${slot.toISOString()} of ${job.name} is in the future; a slot runs only once its instant has come`);
    await this.#ctx.db
      .insertInto('job_runs')
      .values({ job: job.name, slot, status: 'pending' })
      .onConflict((oc) => oc.columns(['job', 'slot']).doNothing())
      .execute();
    const claim = await this.#claim(job.name, slot);
    if (!claim) {
      const row = await this.#ctx.db.selectFrom('job_runs').select(['owner', 'lease_until']).where('job', '=', job.name).where('slot', '=', slot).executeTakeFirst();
      throw new Error(`slot ${slot.toISOString()} of ${job.name} is being run by ${row?.owner ?? 'another worker'} (lease until ${row?.lease_until?.toISOString() ?? '?'})`);
    }
    return this.#execute(claim);
  }

  #job(name: string): JobDefinition {
    const job = this.#jobs.get(name);
    if (!job) throw new Error(`no job named ${JSON.stringify(name)}; known jobs: ${this.#order.join(', ') || '(none)'}`);
    return job;
  }

  async #schedule(job: JobDefinition, now: Date): Promise<void> {
    const { db, config } = this.#ctx;
    const row = await db.selectFrom('job_schedule').select('high_water').where('job', '=', job.name).executeTakeFirst();
    const windowStart = now.getTime() - config.backfillWindowMs;
    // Exclusive lower bound: the last slot already scheduled, or the edge of the backfill window.
    // A job seen for the first time starts at its current slot: no earlier slot was missed,
    // because no worker was meant to run it then.
    const firstSeen = row === undefined;
    const from = firstSeen ? new Date(windowStart - 1) : new Date(Math.max(row.high_water.getTime(), windowStart - 1));
    const due = slotsBetween(job.schedule, from, now);
    const slots = firstSeen ? due.slice(-1) : due;
    if (slots.length === 0) return;
    if (!firstSeen && row.high_water.getTime() < windowStart - 1) {
      this.#ctx.log.warn({ job: job.name, high_water: row.high_water.toISOString(), window_start: new Date(windowStart).toISOString() }, 'slots older than the backfill window are not run one by one; the first slot inside it processes all work due before it');
    }
    const highWater = slots.at(-1)!;
    await db.transaction().execute(async (trx) => {
      await sql`
        INSERT INTO job_runs (job, slot, status)
        SELECT ${job.name}, s, 'pending' FROM unnest(${slots.map((s) => s.toISOString())}::timestamptz[]) AS s
        ON CONFLICT (job, slot) DO NOTHING`.execute(trx);
      await sql`
        INSERT INTO job_schedule (job, high_water, updated_at) VALUES (${job.name}, ${highWater}, ${this.#ledgerClock.now()})
        ON CONFLICT (job) DO UPDATE SET high_water = EXCLUDED.high_water, updated_at = EXCLUDED.updated_at
        WHERE job_schedule.high_water < EXCLUDED.high_water`.execute(trx);
    });
  }

  /**
   * A slot whose worker died on every attempt (a crash, not an error) is given up like one that
   * failed on every attempt, instead of being taken over forever. Once per wake-up: a lease that
   * lapses during this tick is dealt with at the next one.
   */
  async #abandonLapsedLastAttempts(): Promise<void> {
    const now = this.#ledgerClock.now();
    await sql`
      UPDATE job_runs SET status = 'abandoned', finished_at = ${now}, error = 'the lease lapsed on the last attempt: the worker stopped without recording an outcome'
      WHERE job = ANY(${[...this.#order]}::text[]) AND status = 'running' AND lease_until < ${now} AND attempt >= ${this.#ctx.config.maxAttempts}`.execute(this.#ctx.db);
  }

  /** Claims the oldest claimable slot (due by `cutoff`) of any registered job, or returns null. */
  async #claimNext(cutoff: Date): Promise<Claim | null> {
    const now = this.#ledgerClock.now();
    const leaseUntil = new Date(now.getTime() + this.#ctx.config.leaseMs);
    const result = await sql<{ job: string; slot: Date; attempt: number }>`
      UPDATE job_runs SET status = 'running', attempt = job_runs.attempt + 1, owner = ${this.#owner},
             lease_until = ${leaseUntil}, started_at = ${now}, finished_at = NULL, retry_at = NULL
      FROM (
        -- The oldest claimable slot first (an index scan in slot order that stops at the first
        -- match), then among the jobs due at that instant the first in registry order. Sorting
        -- every claimable row by (slot, registry position) instead would cost a sort per claim.
        SELECT job, slot FROM job_runs
        WHERE job = ANY(${[...this.#order]}::text[])
          AND slot = (
            SELECT min(slot) FROM job_runs
            WHERE job = ANY(${[...this.#order]}::text[]) AND slot <= ${cutoff}
              AND (status = 'pending'
                   OR (status = 'running' AND lease_until < ${now})
                   OR (status = 'failed' AND retry_at <= ${now})))
          AND (status = 'pending'
               OR (status = 'running' AND lease_until < ${now})
               OR (status = 'failed' AND retry_at <= ${now}))
        ORDER BY array_position(${[...this.#order]}::text[], job)
        LIMIT 1
        FOR UPDATE SKIP LOCKED
      ) AS next
      WHERE job_runs.job = next.job AND job_runs.slot = next.slot
      RETURNING job_runs.job, job_runs.slot, job_runs.attempt`.execute(this.#ctx.db);
    return result.rows[0] ?? null;
  }

  /** Claims one given slot in any status (replay), unless it is held under a live lease. */
  async #claim(job: string, slot: Date): Promise<Claim | null> {
    const now = this.#ledgerClock.now();
    const leaseUntil = new Date(now.getTime() + this.#ctx.config.leaseMs);
    const result = await sql<{ job: string; slot: Date; attempt: number }>`
      UPDATE job_runs SET status = 'running', attempt = attempt + 1, owner = ${this.#owner},
             lease_until = ${leaseUntil}, started_at = ${now}, finished_at = NULL, retry_at = NULL
      WHERE job = ${job} AND slot = ${slot} AND (status <> 'running' OR lease_until < ${now})
      RETURNING job, slot, attempt`.execute(this.#ctx.db);
    return result.rows[0] ?? null;
  }

  async #execute(claim: Claim): Promise<SlotOutcome> {
    const ctx = this.#ctx;
    const job = this.#job(claim.job);
    const log = ctx.log.child({ job: claim.job, slot: claim.slot.toISOString(), attempt: claim.attempt });
    const base = { job: claim.job, slot: claim.slot, attempt: claim.attempt } as const;
    // The run's own signal: aborted when the worker stops, or when this run loses its claim.
    const runAbort = new AbortController();
    const onStop = (): void => runAbort.abort(this.#abort.signal.reason);
    this.#abort.signal.addEventListener('abort', onStop, { once: true });
    if (this.#abort.signal.aborted) onStop();
    const started = performance.now();
    const heartbeat = this.#startHeartbeat(claim, runAbort);
    log.info('slot started');
    let counts: JobCounts;
    try {
      counts = await job.run(ctx, { slot: claim.slot, attempt: claim.attempt, signal: runAbort.signal, assertClaim: (executor) => this.#assertClaim(executor, claim) });
    } catch (thrown) {
      heartbeat.stop();
      this.#abort.signal.removeEventListener('abort', onStop);
      const durationMs = Math.round(performance.now() - started);
      if (causedBy(thrown, RunLost)) {
        log.warn({ duration_ms: durationMs }, 'run lost its claim to another worker and stopped; the other run records the outcome');
        return { ...base, status: 'lost' };
      }
      if (causedBy(thrown, RunAborted)) {
        // Stopped between batches at shutdown: hand the slot back so the next worker resumes it.
        const released = await this.#finish(claim, { status: 'pending', attempt: claim.attempt - 1, owner: null, lease_until: null, duration_ms: durationMs });
        log.info({ duration_ms: durationMs }, released ? 'slot released at shutdown; it resumes on the next run' : 'stopped at shutdown after the claim had been taken over');
        return { ...base, status: released ? 'released' : 'lost' };
      }
      const error = toError(thrown);
      const now = this.#ledgerClock.now();
      const abandoned = claim.attempt >= ctx.config.maxAttempts;
      const retryAt = new Date(now.getTime() + ctx.config.retryDelayMs * 2 ** (Math.min(claim.attempt, 20) - 1));
      const recorded = await this.#finish(claim, {
        status: abandoned ? 'abandoned' : 'failed',
        finished_at: now,
        duration_ms: durationMs,
        error: error.stack ?? error.message,
        retry_at: abandoned ? null : retryAt,
      });
      if (!recorded) {
        log.warn({ err: error }, 'run failed after its claim had been taken over; the other run records the outcome');
        return { ...base, status: 'lost' };
      }
      log.error({ err: error, duration_ms: durationMs, retry_at: abandoned ? null : retryAt.toISOString() }, abandoned ? 'slot abandoned after its last attempt' : 'slot failed; it will be retried');
      return { ...base, status: abandoned ? 'abandoned' : 'failed', error: error.message };
    }
    // Recording success stays outside the try: a database error here must not turn a completed run
    // into a failed one. The claim then lapses and the slot is run again, creating nothing twice.
    heartbeat.stop();
    this.#abort.signal.removeEventListener('abort', onStop);
    const durationMs = Math.round(performance.now() - started);
    const finished = await this.#finish(claim, { status: 'succeeded', finished_at: this.#ledgerClock.now(), duration_ms: durationMs, counts: JSON.stringify(counts), error: null });
    if (!finished) {
      log.warn({ counts, duration_ms: durationMs }, 'slot finished, but its claim had been taken over; the other run records the outcome');
      return { ...base, status: 'lost' };
    }
    log.info({ counts, duration_ms: durationMs }, 'slot succeeded');
    return { ...base, status: 'succeeded', counts };
  }

  /** Records an outcome only if this claim still holds the slot (same owner, same attempt). */
  async #finish(claim: Claim, values: Record<string, unknown>): Promise<boolean> {
    const result = await this.#ctx.db
      .updateTable('job_runs')
      .set(values as never)
      .where('job', '=', claim.job)
      .where('slot', '=', claim.slot)
      .where('owner', '=', this.#owner)
      .where('attempt', '=', claim.attempt)
      .where('status', '=', 'running')
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** The fence a job calls in each batch transaction (SlotRun.assertClaim). */
  async #assertClaim(executor: Kysely<Database>, claim: Claim): Promise<void> {
    // FOR SHARE: a take-over (an UPDATE of this row) waits until the batch has committed.
    // Every batch transaction starts here, so the same statement gives the batch its sort memory
    // (set_config(…, true): this transaction only; never lower than the server's setting). A batch
    // sorts thousands of wide rows — e.g. the events of 5,000 released holds, ~6.5 MB, ordered for
    // their sequence — and at the server default of 4 MB each such sort went to disk
    // (bench:holds, n = 100,000: 9,278 → 11,110/s).
    const held = await sql`
      SELECT set_config('work_mem', CASE WHEN pg_size_bytes(current_setting('work_mem')) < pg_size_bytes(${BATCH_WORK_MEM})
                                         THEN ${BATCH_WORK_MEM} ELSE current_setting('work_mem') END, true) FROM job_runs
      WHERE job = ${claim.job} AND slot = ${claim.slot} AND owner = ${this.#owner} AND attempt = ${claim.attempt} AND status = 'running'
      FOR SHARE`.execute(executor);
    if (held.rows.length === 0) throw new RunLost(claim.job, claim.slot);
  }

  /**
   * Keeps the lease alive while a long run works, so no other worker takes the slot over; if the
   * claim is gone all the same, the run is told to stop.
   */
  #startHeartbeat(claim: Claim, runAbort: AbortController): { stop(): void } {
    const every = Math.floor(this.#ctx.config.leaseMs / 3);
    const timer = setInterval(() => {
      const leaseUntil = new Date(this.#ledgerClock.now().getTime() + this.#ctx.config.leaseMs);
      this.#ctx.db
        .updateTable('job_runs')
        .set({ lease_until: leaseUntil })
        .where('job', '=', claim.job)
        .where('slot', '=', claim.slot)
        .where('owner', '=', this.#owner)
        .where('attempt', '=', claim.attempt)
        .where('status', '=', 'running')
        .executeTakeFirst()
        .then((result) => {
          if (Number(result.numUpdatedRows) === 0 && !runAbort.signal.aborted) runAbort.abort(new RunLost(claim.job, claim.slot));
        })
        .catch((error: unknown) => this.#ctx.log.warn({ err: toError(error), job: claim.job }, 'lease heartbeat failed; trying again'));
    }, every);
    timer.unref();
    return { stop: () => clearInterval(timer) };
  }
}

/** Ledger rows of a job, newest slot first (for `jobs list` and tests). */
export async function recentRuns(ctx: Pick<Context, 'db'>, job: string, limit = 10) {
  return ctx.db.selectFrom('job_runs').selectAll().where('job', '=', job).orderBy('slot', 'desc').limit(limit).execute();
}
