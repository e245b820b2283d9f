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
import { sql } from 'kysely';
import { toError } from '../domain/errors';
import type { Context } from './context';
import { isSlot, slotsBetween } from './cron';
import { RunAborted, type JobCounts, type JobDefinition } from './job';

export interface SchedulerOptions {
  /** Names this worker in the ledger (`owner`), e.g. `host:pid`. */
  readonly owner: string;
}

export type SlotOutcome =
  | { readonly job: string; readonly slot: Date; readonly attempt: number; readonly status: 'succeeded'; readonly counts: JobCounts }
  | { readonly job: string; readonly slot: Date; readonly attempt: number; readonly status: 'failed' | 'abandoned'; readonly error: string }
  | { readonly job: string; readonly slot: Date; readonly attempt: number; readonly status: 'released' };

interface Claim {
  readonly job: string;
  readonly slot: Date;
  readonly attempt: number;
}

export class Scheduler {
  readonly #ctx: Context;
  readonly #jobs: ReadonlyMap<string, JobDefinition>;
  readonly #order: readonly string[];
  readonly #owner: string;
  #abort = new AbortController();

  constructor(ctx: Context, jobs: readonly JobDefinition[], options: SchedulerOptions) {
    const byName = new Map<string, JobDefinition>();
    for (const job of jobs) {
      if (byName.has(job.name)) throw new Error(`job ${job.name} is registered twice`);
      byName.set(job.name, job);
    }
    this.#ctx = ctx;
    this.#jobs = byName;
    this.#order = jobs.map((job) => job.name);
    this.#owner = options.owner;
  }

  get stopping(): boolean {
    return this.#abort.signal.aborted;
  }

  /** Asks the current run to stop after its batch; no further slot is started. */
  stop(): void {
    this.#abort.abort();
  }

  /**
   * One wake-up: schedules every slot that came due, then runs every claimable slot, oldest
   * first (jobs due at the same instant run in registry order).
   */
  async tick(): Promise<SlotOutcome[]> {
    const now = this.#ctx.clock.now();
    for (const job of this.#jobs.values()) await this.#schedule(job, now);
    const outcomes: SlotOutcome[] = [];
    while (!this.stopping) {
      const claim = await this.#claimNext(now);
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
    const claim = await this.#claim(job.name, slot, now, true);
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
    const highWater = slots.at(-1)!;
    await db.transaction().execute(async (trx) => {
      await sql`
        INSERT INTO job_runs (job, slot, status)
        SELECT ${job.name}, s, 'pending' FROM unnest(${slots.map((s) => s.toISOString())}::timestamptz[]) AS s
        ON CONFLICT (job, slot) DO NOTHING`.execute(trx);
      await sql`
        INSERT INTO job_schedule (job, high_water, updated_at) VALUES (${job.name}, ${highWater}, ${now})
        ON CONFLICT (job) DO UPDATE SET high_water = EXCLUDED.high_water, updated_at = EXCLUDED.updated_at
        WHERE job_schedule.high_water < EXCLUDED.high_water`.execute(trx);
    });
  }

  /** Claims the oldest claimable slot of any registered job, or returns null. */
  async #claimNext(now: Date): Promise<Claim | null> {
    const leaseUntil = new Date(now.getTime() + this.#ctx.config.leaseMs);
    const result = await sql<{ job: string; slot: Date; attempt: number }>`
      UPDATE job_runs SET status = 'running', attempt = job_runs.attempt + 1, owner = ${this.#owner},
             lease_until = ${leaseUntil}, started_at = ${now}, finished_at = NULL, retry_at = NULL
      FROM (
        SELECT job, slot FROM job_runs
        WHERE job = ANY(${[...this.#order]}::text[]) AND slot <= ${now}
          AND (status = 'pending'
               OR (status = 'running' AND lease_until < ${now})
               OR (status = 'failed' AND retry_at <= ${now}))
        ORDER BY slot, array_position(${[...this.#order]}::text[], job)
        LIMIT 1
        FOR UPDATE SKIP LOCKED
      ) AS next
      WHERE job_runs.job = next.job AND job_runs.slot = next.slot
      RETURNING job_runs.job, job_runs.slot, job_runs.attempt`.execute(this.#ctx.db);
    return result.rows[0] ?? null;
  }

  /** Claims one given slot; `anyStatus` also takes finished or abandoned slots (replay). */
  async #claim(job: string, slot: Date, now: Date, anyStatus: boolean): Promise<Claim | null> {
    const leaseUntil = new Date(now.getTime() + this.#ctx.config.leaseMs);
    const result = await sql<{ job: string; slot: Date; attempt: number }>`
      UPDATE job_runs SET status = 'running', attempt = attempt + 1, owner = ${this.#owner},
             lease_until = ${leaseUntil}, started_at = ${now}, finished_at = NULL, retry_at = NULL
      WHERE job = ${job} AND slot = ${slot}
        AND (status <> 'running' OR lease_until < ${now})
        AND (${anyStatus} OR status IN ('pending', 'running', 'failed'))
      RETURNING job, slot, attempt`.execute(this.#ctx.db);
    return result.rows[0] ?? null;
  }

  async #execute(claim: Claim): Promise<SlotOutcome> {
    const { ctx } = { ctx: this.#ctx };
    const job = this.#job(claim.job);
    const log = ctx.log.child({ job: claim.job, slot: claim.slot.toISOString(), attempt: claim.attempt });
    const started = performance.now();
    const heartbeat = this.#startHeartbeat(claim);
    log.info('slot started');
    try {
      const counts = await job.run(ctx, { slot: claim.slot, attempt: claim.attempt, signal: this.#abort.signal });
      const durationMs = Math.round(performance.now() - started);
      heartbeat.stop();
      const finished = await this.#finish(claim, { status: 'succeeded', finished_at: ctx.clock.now(), duration_ms: durationMs, counts: JSON.stringify(counts), error: null });
      if (finished) log.info({ counts, duration_ms: durationMs }, 'slot succeeded');
      else log.warn({ counts, duration_ms: durationMs }, 'slot finished, but its claim had been taken over; the other run records the outcome');
      return { job: claim.job, slot: claim.slot, attempt: claim.attempt, status: 'succeeded', counts };
    } catch (thrown) {
      heartbeat.stop();
      const durationMs = Math.round(performance.now() - started);
      if (thrown instanceof RunAborted) {
        // Stopped between batches at shutdown: hand the slot back so the next worker resumes it.
        await this.#finish(claim, { status: 'pending', attempt: claim.attempt - 1, owner: null, lease_until: null, duration_ms: durationMs });
        log.info({ duration_ms: durationMs }, 'slot released at shutdown; it resumes on the next run');
        return { job: claim.job, slot: claim.slot, attempt: claim.attempt, status: 'released' };
      }
      const error = toError(thrown);
      const now = ctx.clock.now();
      const abandoned = claim.attempt >= ctx.config.maxAttempts;
      const retryAt = new Date(now.getTime() + ctx.config.retryDelayMs * 2 ** (claim.attempt - 1));
      await this.#finish(claim, {
        status: abandoned ? 'abandoned' : 'failed',
        finished_at: now,
        duration_ms: durationMs,
        error: error.stack ?? error.message,
        retry_at: abandoned ? null : retryAt,
      });
      log.error({ err: error, duration_ms: durationMs, retry_at: abandoned ? null : retryAt.toISOString() }, abandoned ? 'slot abandoned after its last attempt' : 'slot failed; it will be retried');
      return { job: claim.job, slot: claim.slot, attempt: claim.attempt, status: abandoned ? 'abandoned' : 'failed', error: error.message };
    }
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

  /** Keeps the lease alive while a long run works, so no other worker takes the slot over. */
  #startHeartbeat(claim: Claim): { stop(): void } {
    const every = Math.max(1_000, Math.floor(this.#ctx.config.leaseMs / 3));
    const timer = setInterval(() => {
      const leaseUntil = new Date(this.#ctx.clock.now().getTime() + this.#ctx.config.leaseMs);
      this.#ctx.db
        .updateTable('job_runs')
        .set({ lease_until: leaseUntil })
        .where('job', '=', claim.job)
        .where('slot', '=', claim.slot)
        .where('owner', '=', this.#owner)
        .where('attempt', '=', claim.attempt)
        .where('status', '=', 'running')
        .execute()
        .catch((error: unknown) => this.#ctx.log.warn({ err: toError(error), job: claim.job }, 'lease heartbeat failed'));
    }, every);
    timer.unref();
    return { stop: () => clearInterval(timer) };
  }
}

/** Ledger rows of a job, newest slot first (for `jobs list` and tests). */
export async function recentRuns(ctx: Pick<Context, 'db'>, job: string, limit = 10) {
  return ctx.db.selectFrom('job_runs').selectAll().where('job', '=', job).orderBy('slot', 'desc').limit(limit).execute();
}
