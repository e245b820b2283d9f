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
 * - Progress and counts: each batch a job commits adds its counts to the slot's ledger row and marks
 *   the attempt as one that made progress, in the batch's own transaction (SlotRun.recordBatch), so
 *   the ledger's counts are the sum of what every attempt committed, crashed ones included.
 * - Finishing: only the claim that still holds the slot (same owner and attempt) may record the
 *   outcome. A failed run is retried after a growing delay. A slot is `abandoned` (logged at error
 *   level) once `maxAttempts` attempts in a row ended — with an error, or with a worker that died —
 *   without committing a batch; an attempt that committed one starts that count afresh.
 * - Retention: with `runRetentionMs` set, each wake-up deletes succeeded slots older than it (at
 *   most PRUNE_LIMIT rows a wake-up, oldest first). Never a job's latest slot (what `jobs list`
 *   shows), a slot above its job's high-water mark (the only slots scheduling could insert again),
 *   nor a pending, running, failed or abandoned one (work still owed, or an operator's to re-run).
 *   The retention is at least the backfill window, so backfill never reaches a deleted slot. A
 *   deleted slot's account groups go with it.
 * - Sharing a slot: a job's batch loop divides a slot's due accounts into groups that several
 *   workers claim (slot-groups.ts); a worker with no slot of its own to claim helps with the groups
 *   of a running one (`shared` outcome). The lead waits for every group before it records the
 *   outcome; a slot with groups left undone ends `partial` and is retried like a failed one, taking
 *   only those groups. A database or Citus node that cannot be reached never counts toward
 *   abandonment.
 * - Stopping: when `stopSignal` aborts (stop-signal.ts) or `stop()` is called, the current batch
 *   commits, the slot is handed back as `pending` with the attempt not counted, and nothing more
 *   is claimed.
 */
import { performance } from 'node:perf_hooks';
import { sql, type Kysely, type SqlBool } from 'kysely';
import type { Database } from '../db/schema';
import { toError } from '../domain/errors';
import type { Clock } from './clock';
import type { Context } from './context';
import type { Logger } from './logger';
import { currentSlot, isSlot, slotsBetween } from './cron';
import { isDatabaseUnavailable } from '../db/errors';
import { causedBy, RunAborted, RunLost, type JobDefinition, type SlotRun } from './job';
import { forgetGroups, pendingGroups, slotToHelp, SlotGroups, type PendingGroup, type SlotGroup } from './slot-groups';
import type { ClaimedFrom, JobCounts, OutcomeBase, SlotOutcome } from './slot-outcome';

export type { ClaimedFrom, SlotOutcome } from './slot-outcome';

export interface SchedulerOptions {
  /** Names this worker in the ledger (`owner`), e.g. `host:pid`. */
  readonly owner: string;
  /**
   * The clock of the ledger's own bookkeeping (leases, retry times, started/finished). It is the
   * context's clock by default; a worker replaying the past (`worker --once --at`) keeps the real
   * clock here, so the leases it takes are not already lapsed for the other workers.
   */
  readonly ledgerClock?: Clock;
  /**
   * Stops the scheduler when aborted, as `stop()` does: the commands pass their StopSignal's
   * `signal` (stop-signal.ts), so SIGTERM and SIGINT stop every command that runs jobs one way.
   */
  readonly stopSignal?: AbortSignal;
}

interface Claim {
  readonly job: string;
  readonly slot: Date;
  readonly attempt: number;
  readonly claimedFrom: Exclude<ClaimedFrom, null>;
}

/** The columns a claim returns (RETURNING of both claim statements). */
const CLAIM_RETURNING = sql`job_runs.job, job_runs.slot, job_runs.attempt,
  CASE WHEN previous.status = 'running' THEN 'lapsed' ELSE previous.status END AS "claimedFrom"`;

/** The shortest lease the scheduler accepts: a heartbeat must fit in it several times. */
export const MIN_LEASE_MS = 10_000;

/** At most this many ledger rows are deleted per wake-up (the ledger grows ~11,500 rows a day). */
export const PRUNE_LIMIT = 10_000;

/** Sort and hash memory of one batch transaction at least (see #assertClaim). */
const BATCH_WORK_MEM = '64MB';

export class Scheduler {
  readonly #ctx: Context;
  readonly #jobs: ReadonlyMap<string, JobDefinition>;
  readonly #order: readonly string[];
  /** The jobs that wait for every job registered before them (JobDefinition.waitsForEarlierJobs). */
  readonly #waiting: readonly string[];
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
    const retention = ctx.config.runRetentionMs;
    if (retention !== undefined && !(retention >= ctx.config.backfillWindowMs)) {
      throw new Error(`the run ledger's retention must be at least the backfill window (${ctx.config.backfillWindowMs} ms), got ${retention} ms`);
    }
    this.#ctx = ctx;
    this.#jobs = byName;
    this.#order = jobs.map((job) => job.name);
    this.#waiting = jobs.filter((job) => job.waitsForEarlierJobs === true).map((job) => job.name);
    this.#owner = options.owner;
    this.#ledgerClock = options.ledgerClock ?? ctx.clock;
    const stopSignal = options.stopSignal;
    if (stopSignal?.aborted) this.stop();
    else stopSignal?.addEventListener('abort', () => this.stop(), { once: true });
  }

  get stopping(): boolean {
    return this.#abort.signal.aborted;
  }

  /** Asks the current run to stop after its batch; no further slot is started. */
  stop(): void {
    if (!this.#abort.signal.aborted) this.#abort.abort(new RunAborted());
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
    try {
      await this.pruneLedger(cutoff);
    } catch (error) {
      // Housekeeping: a failed delete leaves rows for the next wake-up and must not stop the jobs.
      this.#ctx.log.warn({ err: toError(error) }, 'pruning the run ledger failed; tried again at the next wake-up');
    }
    const outcomes: SlotOutcome[] = await this.#abandonLapsedLastAttempts();
    for (const outcome of outcomes) this.#report(outcome, null);
    while (!this.stopping) {
      const claim = await this.#claimNext(cutoff);
      if (claim) {
        outcomes.push(await this.#execute(claim));
        continue;
      }
      // No slot of its own: help with the account groups of a slot another worker leads.
      const shared = await this.#help(cutoff);
      // Nothing taken (no group left, or the groups went to others first) or the help failed: done for this wake-up.
      if (!shared || Object.keys(shared.counts).length === 0) break;
      outcomes.push(shared);
    }
    return outcomes;
  }

  /**
   * Takes account groups of the oldest running slot that has one to claim (slot-groups.ts) and runs
   * the job on them, as its lead does; the lead records the slot's outcome. Returns what this
   * worker committed there (status `shared`), or null when no slot has a group to take.
   */
  async #help(cutoff: Date): Promise<SlotOutcome | null> {
    if (this.#ctx.config.simulation) return null;
    const target = await slotToHelp(this.#ctx.db, this.#order, cutoff, this.#ledgerClock.now());
    if (target === null) return null;
    const job = this.#job(target.job);
    const log = this.#ctx.log.child({ job: target.job, slot: target.slot.toISOString(), shared: true });
    const runAbort = new AbortController();
    const onStop = (): void => runAbort.abort(this.#abort.signal.reason);
    this.#abort.signal.addEventListener('abort', onStop, { once: true });
    if (this.#abort.signal.aborted) onStop();
    const groups = this.#groups(target.job, target.slot, false, runAbort.signal);
    const run: SlotRun = {
      slot: target.slot,
      attempt: 0,
      leaseClock: this.#ledgerClock,
      signal: runAbort.signal,
      groups,
      assertClaim: (executor, group) => this.#assertGroup(executor, groups, group, target.job, target.slot),
      recordBatch: (executor, counts, group) => this.#recordGroupBatch(executor, target.job, target.slot, counts, group),
    };
    const base = { job: target.job, slot: target.slot, attempt: 0, claimedFrom: null } as const;
    try {
      const counts = await job.run({ ...this.#ctx, log }, run);
      if (groups === undefined || groups.claimed === 0) return { ...base, counts: {}, status: 'shared' };
      log.info({ counts }, 'account groups of a slot led by another worker done');
      return { ...base, counts, status: 'shared' };
    } catch (error) {
      if (!causedBy(error, RunAborted) && !causedBy(error, RunLost)) log.warn({ err: toError(error) }, 'helping with a slot failed; its lead takes what is left');
      return { ...base, counts: {}, status: 'shared' };
    } finally {
      this.#abort.signal.removeEventListener('abort', onStop);
    }
  }

  #groups(job: string, slot: Date, lead: boolean, signal: AbortSignal): SlotGroups | undefined {
    if (this.#ctx.config.simulation) return undefined;
    return new SlotGroups({ db: this.#ctx.db, job, slot, owner: this.#owner, clock: this.#ledgerClock, leaseMs: this.#ctx.config.leaseMs, lead, signal });
  }

  /**
   * Runs (or replays) one slot of one job now, whatever its ledger status, unless another worker
   * holds it under a live lease. Used by `kessai jobs run` and `statements run`. A slot run this
   * way — an operator's deliberate act, e.g. after fixing what made it abandoned — starts its count
   * of attempts without progress afresh.
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
    // A replay lists what is due afresh: the groups of earlier attempts are forgotten.
    await forgetGroups(this.#ctx.db, job.name, slot);
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
    // (Only that slot is computed: listing the window's slots to keep the last cost every-minute
    // jobs 1,440 cron steps each, seconds of a first start.)
    const firstSeen = row === undefined;
    const slots = firstSeen ? currentSlot(job.schedule, new Date(windowStart - 1), now) : slotsBetween(job.schedule, new Date(Math.max(row.high_water.getTime(), windowStart - 1)), now);
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
   * Deletes this scheduler's jobs' succeeded slots older than `runRetentionMs` before `now` (slot
   * instants: the engine clock), at most PRUNE_LIMIT, oldest first; a no-op without a retention or
   * in a simulation (its report reads the whole ledger). Returns how many rows went.
   */
  async pruneLedger(now: Date): Promise<number> {
    const retention = this.#ctx.config.runRetentionMs;
    if (retention === undefined || this.#ctx.config.simulation) return 0;
    const before = new Date(now.getTime() - retention);
    const result = await sql`
      DELETE FROM job_runs USING (
        SELECT o.job, o.slot FROM job_runs o JOIN job_schedule s ON s.job = o.job
        WHERE o.job = ANY(${[...this.#order]}::text[]) AND o.status = 'succeeded' AND o.slot < ${before}
          AND o.slot <= s.high_water
          AND o.slot < (SELECT max(l.slot) FROM job_runs l WHERE l.job = o.job)
        ORDER BY o.slot
        LIMIT ${PRUNE_LIMIT}
        FOR UPDATE OF o SKIP LOCKED
      ) AS old
      WHERE job_runs.job = old.job AND job_runs.slot = old.slot`.execute(this.#ctx.db);
    const deleted = Number(result.numAffectedRows ?? 0);
    // The account groups of the slots just deleted (slot-groups.ts) go with them.
    if (deleted > 0) {
      await sql`
        DELETE FROM job_run_groups g WHERE g.job = ANY(${[...this.#order]}::text[]) AND g.slot < ${before}
          AND NOT EXISTS (SELECT 1 FROM job_runs r WHERE r.job = g.job AND r.slot = g.slot)`.execute(this.#ctx.db);
    }
    if (deleted > 0) this.#ctx.log.info({ deleted, before: before.toISOString() }, 'run ledger pruned');
    return deleted;
  }

  /**
   * A slot whose worker died on the attempt that reached `maxAttempts` attempts without progress
   * (a crash that committed nothing, not an error) is given up like one that failed that often,
   * instead of being taken over forever; a lapsed attempt that had committed a batch is taken over
   * by the next claim instead. Once per wake-up: a lease that lapses during this tick is dealt
   * with at the next one. Logged at error level, and returned as outcomes (`worker --once` exits
   * non-zero).
   */
  async #abandonLapsedLastAttempts(): Promise<SlotOutcome[]> {
    const now = this.#ledgerClock.now();
    const maxAttempts = this.#ctx.config.maxAttempts;
    const abandoned = await sql<{ job: string; slot: Date; attempt: number; attempts_without_progress: number; counts: JobCounts | null; last_error: string | null }>`
      UPDATE job_runs SET status = 'abandoned', finished_at = ${now}, attempts_without_progress = job_runs.attempts_without_progress + 1,
             error = 'the lease lapsed on attempt ' || job_runs.attempt || ' before it committed a batch ('
                     || (job_runs.attempts_without_progress + 1) || ' attempts in a row without progress): the worker stopped without recording an outcome'
                     || coalesce('; last error: ' || job_runs.error, '')
      FROM (
        SELECT job, slot, error FROM job_runs
        WHERE job = ANY(${[...this.#order]}::text[]) AND status = 'running' AND lease_until < ${now}
          AND progress_attempt IS DISTINCT FROM attempt AND attempts_without_progress + 1 >= ${maxAttempts}
        FOR UPDATE SKIP LOCKED
      ) AS previous
      WHERE job_runs.job = previous.job AND job_runs.slot = previous.slot
      RETURNING job_runs.job, job_runs.slot, job_runs.attempt, job_runs.attempts_without_progress, job_runs.counts, previous.error AS last_error`.execute(this.#ctx.db);
    return abandoned.rows.map((row) => {
      const error = `the worker died on attempt ${row.attempt} without committing a batch: ${row.attempts_without_progress} attempts in a row made no progress`;
      this.#ctx.log.error(
        { job: row.job, slot: row.slot.toISOString(), attempt: row.attempt, attempts_without_progress: row.attempts_without_progress, last_error: row.last_error },
        `slot abandoned: ${error}; re-run it with \`kessai jobs run ${row.job} --at ${row.slot.toISOString()}\``,
      );
      return { job: row.job, slot: row.slot, attempt: row.attempt, claimedFrom: null, counts: row.counts ?? {}, status: 'abandoned', error, attemptsWithoutProgress: row.attempts_without_progress } as const;
    });
  }

  /** Claims the oldest claimable slot (due by `cutoff`) of any registered job, or returns null. */
  async #claimNext(cutoff: Date): Promise<Claim | null> {
    const now = this.#ledgerClock.now();
    const leaseUntil = new Date(now.getTime() + this.#ctx.config.leaseMs);
    // The slot is picked in a MATERIALIZED CTE, evaluated once. As a subquery in FROM, on a Citus
    // coordinator's ledger after a simulated month with two `worker --once` processes, one claim
    // marked every job of the slot running and returned one of them (the others stayed running,
    // unrun, until their lease lapsed): test/integration/citus.test.ts fails that way without the
    // CTE. Likely the subquery was rescanned, each rescan skipping (SKIP LOCKED) the row the
    // statement had just claimed and yielding the next.
    const order = [...this.#order];
    // Claimable, and not a job that waits for earlier jobs while one of them still has a run at or
    // before its slot unfinished (the partial index job_runs_claimable holds just those runs).
    const claimable = (alias: string) => sql<SqlBool>`
      (${sql.ref(`${alias}.status`)} = 'pending'
       OR (${sql.ref(`${alias}.status`)} = 'running' AND ${sql.ref(`${alias}.lease_until`)} < ${now})
       OR (${sql.ref(`${alias}.status`)} = 'failed' AND ${sql.ref(`${alias}.retry_at`)} <= ${now}))
      AND NOT (${sql.ref(`${alias}.job`)} = ANY(${[...this.#waiting]}::text[]) AND EXISTS (
        SELECT 1 FROM job_runs e
        WHERE e.status IN ('pending', 'running', 'failed') AND e.slot <= ${sql.ref(`${alias}.slot`)}
          AND e.job = ANY(${order}::text[]) AND array_position(${order}::text[], e.job) < array_position(${order}::text[], ${sql.ref(`${alias}.job`)})))`;
    const result = await sql<Claim>`
      WITH previous AS MATERIALIZED (
        -- The oldest claimable slot first (an index scan in slot order that stops at the first
        -- match), then among the jobs due at that instant the first in registry order. Sorting
        -- every claimable row by (slot, registry position) instead would cost a sort per claim.
        SELECT r.job, r.slot, r.status FROM job_runs r
        WHERE r.job = ANY(${order}::text[])
          AND r.slot = (
            SELECT min(m.slot) FROM job_runs m
            WHERE m.job = ANY(${order}::text[]) AND m.slot <= ${cutoff} AND ${claimable('m')})
          AND ${claimable('r')}
        ORDER BY array_position(${order}::text[], r.job)
        LIMIT 1
        FOR UPDATE SKIP LOCKED
      )
      UPDATE job_runs SET status = 'running', attempt = job_runs.attempt + 1, owner = ${this.#owner},
             lease_until = ${leaseUntil}, started_at = ${now}, finished_at = NULL, retry_at = NULL,
             -- A take-over: the worker that died counts as an attempt without progress unless it
             -- had committed a batch (a failed attempt was counted when it recorded its error).
             attempts_without_progress = job_runs.attempts_without_progress
               + CASE WHEN previous.status = 'running' AND job_runs.progress_attempt IS DISTINCT FROM job_runs.attempt THEN 1 ELSE 0 END,
             progress_attempt = NULL
      FROM previous
      WHERE job_runs.job = previous.job AND job_runs.slot = previous.slot
      RETURNING ${CLAIM_RETURNING}`.execute(this.#ctx.db);
    return result.rows[0] ?? null;
  }

  /** Claims one given slot in any status (replay), unless it is held under a live lease. */
  async #claim(job: string, slot: Date): Promise<Claim | null> {
    const now = this.#ledgerClock.now();
    const leaseUntil = new Date(now.getTime() + this.#ctx.config.leaseMs);
    const result = await sql<Claim>`
      UPDATE job_runs SET status = 'running', attempt = job_runs.attempt + 1, owner = ${this.#owner},
             lease_until = ${leaseUntil}, started_at = ${now}, finished_at = NULL, retry_at = NULL,
             attempts_without_progress = 0, progress_attempt = NULL
      FROM (SELECT job, slot, status FROM job_runs WHERE job = ${job} AND slot = ${slot} FOR UPDATE) AS previous
      WHERE job_runs.job = previous.job AND job_runs.slot = previous.slot
        AND (previous.status <> 'running' OR job_runs.lease_until < ${now})
      RETURNING ${CLAIM_RETURNING}`.execute(this.#ctx.db);
    return result.rows[0] ?? null;
  }

  /** Runs a claimed slot and reports how it ended to the context's observer. */
  async #execute(claim: Claim): Promise<SlotOutcome> {
    const started = performance.now();
    const outcome = await this.#run(claim);
    this.#report(outcome, performance.now() - started);
    return outcome;
  }

  #report(outcome: SlotOutcome, durationMs: number | null): void {
    try {
      this.#ctx.observer?.slotEnded(outcome, durationMs);
    } catch (error) {
      this.#ctx.log.warn({ err: toError(error), job: outcome.job }, 'the observer failed on a slot outcome; the run stands');
    }
  }

  async #run(claim: Claim): Promise<SlotOutcome> {
    const job = this.#job(claim.job);
    // The job's own logger carries job, slot and attempt: every line a job writes says which run.
    const log = this.#ctx.log.child({ job: claim.job, slot: claim.slot.toISOString(), attempt: claim.attempt });
    const ctx: Context = { ...this.#ctx, log };
    // What this attempt's batches recorded, as they recorded it (a success adds only the rest).
    const recorded: Record<string, number> = {};
    const base = { job: claim.job, slot: claim.slot, attempt: claim.attempt, claimedFrom: claim.claimedFrom } as const;
    // The run's own signal: aborted when the worker stops, or when this run loses its claim.
    const runAbort = new AbortController();
    const onStop = (): void => runAbort.abort(this.#abort.signal.reason);
    this.#abort.signal.addEventListener('abort', onStop, { once: true });
    if (this.#abort.signal.aborted) onStop();
    const started = performance.now();
    const heartbeat = this.#startHeartbeat(claim, runAbort);
    log.debug({ claimed_from: claim.claimedFrom }, 'slot started');
    const groups = this.#groups(claim.job, claim.slot, true, runAbort.signal);
    const run: SlotRun = {
      slot: claim.slot,
      attempt: claim.attempt,
      leaseClock: this.#ledgerClock,
      signal: runAbort.signal,
      groups,
      assertClaim: (executor, group) => (group === undefined ? this.#assertClaim(executor, claim) : this.#assertGroup(executor, groups, group, claim.job, claim.slot)),
      recordBatch: async (executor, counts, group) => {
        if (group === undefined) await this.#recordBatch(executor, claim, counts);
        else await this.#recordGroupBatch(executor, claim.job, claim.slot, counts, group);
        for (const [name, value] of Object.entries(counts)) recorded[name] = (recorded[name] ?? 0) + value;
      },
    };
    let counts: JobCounts;
    try {
      counts = await job.run(ctx, run);
    } catch (thrown) {
      heartbeat.stop();
      this.#abort.signal.removeEventListener('abort', onStop);
      return this.#recordStop(claim, base, recorded, thrown, Math.round(performance.now() - started), log);
    }
    // Recording success stays outside the try: a database error here must not turn a completed run
    // into a failed one. The claim then lapses and the slot is run again, creating nothing twice.
    heartbeat.stop();
    this.#abort.signal.removeEventListener('abort', onStop);
    const durationMs = Math.round(performance.now() - started);
    // The batches already added their counts; what the job reports beyond them (every name, so
    // a slot that found nothing due still shows its zeros) is added now.
    const rest = Object.fromEntries(Object.entries(counts).map(([name, value]) => [name, value - (recorded[name] ?? 0)]));
    const pending = groups === undefined ? [] : await pendingGroups(this.#ctx.db, claim.job, claim.slot);
    if (pending.length > 0) return this.#recordPartial(claim, base, counts, rest, pending, durationMs, log);
    const finished = await sql<{ counts: JobCounts }>`
      UPDATE job_runs SET status = 'succeeded', finished_at = ${this.#ledgerClock.now()}, duration_ms = ${durationMs}, error = NULL,
             counts = ${addedCounts(rest)}
      WHERE ${this.#holds(claim)}
      RETURNING job_runs.counts`.execute(this.#ctx.db);
    const row = finished.rows[0];
    if (!row) {
      log.warn({ counts, duration_ms: durationMs }, 'slot finished, but its claim had been taken over; the other run records the outcome');
      return { ...base, counts, status: 'lost' };
    }
    // The names in the job's own order (jsonb keeps its own), then any only earlier attempts had.
    const slotCounts = { ...Object.fromEntries(Object.keys(counts).map((name) => [name, row.counts[name] ?? 0])), ...row.counts };
    log.info({ counts, slot_counts: slotCounts, duration_ms: durationMs }, 'slot succeeded');
    return { ...base, counts, status: 'succeeded', slotCounts };
  }

  /** Records how a run that threw ended: lost, stopped at shutdown, or failed (maybe abandoned). */
  async #recordStop(claim: Claim, base: Omit<OutcomeBase, 'counts'>, counts: JobCounts, thrown: unknown, durationMs: number, log: Logger): Promise<SlotOutcome> {
    if (causedBy(thrown, RunLost)) {
      log.warn({ duration_ms: durationMs }, 'run lost its claim to another worker and stopped; the other run records the outcome');
      return { ...base, counts, status: 'lost' };
    }
    if (causedBy(thrown, RunAborted)) {
      // Stopped between batches at shutdown: hand the slot back, the attempt not counted, so the
      // next worker resumes it at once.
      const released = await this.#finish(claim, { status: 'pending', attempt: claim.attempt - 1, owner: null, lease_until: null, duration_ms: durationMs });
      log.info({ counts, duration_ms: durationMs }, released ? 'slot handed back at shutdown; it resumes on the next run' : 'stopped at shutdown after the claim had been taken over');
      return { ...base, counts, status: released ? 'released' : 'lost' };
    }
    const error = toError(thrown);
    const { maxAttempts, retryDelayMs } = this.#ctx.config;
    const row = await this.#ctx.db.selectFrom('job_runs').select(['attempts_without_progress', 'progress_attempt']).where(this.#holds(claim)).executeTakeFirst();
    // An attempt that committed a batch made progress: it starts the count afresh, however it ended.
    // A database (or Citus worker node) that could not be reached is an outage, not the slot's
    // fault: it never brings the slot closer to being abandoned.
    const withoutProgress = row === undefined ? 0 : row.progress_attempt === claim.attempt ? 0 : row.attempts_without_progress + (isDatabaseUnavailable(thrown) ? 0 : 1);
    const abandoned = withoutProgress >= maxAttempts;
    const now = this.#ledgerClock.now();
    const retryAt = new Date(now.getTime() + retryDelayMs * 2 ** (Math.min(Math.max(withoutProgress, 1), 20) - 1));
    const recorded =
      row !== undefined &&
      (await this.#finish(claim, {
        status: abandoned ? 'abandoned' : 'failed',
        finished_at: now,
        duration_ms: durationMs,
        error: error.stack ?? error.message,
        retry_at: abandoned ? null : retryAt,
        attempts_without_progress: withoutProgress,
      }));
    if (!recorded) {
      log.warn({ err: error }, 'run failed after its claim had been taken over; the other run records the outcome');
      return { ...base, counts, status: 'lost' };
    }
    const fields = { err: error, counts, attempts_without_progress: withoutProgress, duration_ms: durationMs };
    if (abandoned) log.error(fields, `slot abandoned: ${withoutProgress} attempts in a row made no progress; re-run it with \`kessai jobs run ${claim.job} --at ${claim.slot.toISOString()}\``);
    else log.error({ ...fields, retry_at: retryAt.toISOString() }, 'slot failed; it will be retried');
    return { ...base, counts, status: abandoned ? 'abandoned' : 'failed', error: error.message, attemptsWithoutProgress: withoutProgress };
  }

  /** The fence: the ledger row of a claim that still holds its slot (same owner, same attempt, running). */
  #holds(claim: Claim) {
    return sql<SqlBool>`job_runs.job = ${claim.job} AND job_runs.slot = ${claim.slot} AND job_runs.owner = ${this.#owner}
      AND job_runs.attempt = ${claim.attempt} AND job_runs.status = 'running'`;
  }

  /** Records an outcome only if this claim still holds the slot. */
  async #finish(claim: Claim, values: Record<string, unknown>): Promise<boolean> {
    const result = await this.#ctx.db
      .updateTable('job_runs')
      .set(values as never)
      .where(this.#holds(claim))
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** SlotRun.recordBatch: in the batch's transaction, its counts added and the attempt marked as progressing. */
  async #recordBatch(executor: Kysely<Database>, claim: Claim, counts: JobCounts): Promise<void> {
    const result = await sql`
      UPDATE job_runs SET counts = ${addedCounts(counts)}, attempts_without_progress = 0, progress_attempt = ${claim.attempt}
      WHERE ${this.#holds(claim)}`.execute(executor);
    // assertClaim's FOR SHARE holds the row since the batch began, so this only fails when a job
    // records outside the transaction it asserted the claim in: then nothing of the batch stays.
    if (Number(result.numAffectedRows ?? 0) === 0) throw new RunLost(claim.job, claim.slot);
  }

  /**
   * A slot whose run ended with account groups not done (slot-groups.ts): recorded as failed, to be
   * retried like one (its next attempt takes only those groups), with the groups named in its error.
   * Groups that failed only because their database or worker node could not be reached do not
   * count toward abandonment; an attempt that committed a batch starts the count afresh.
   */
  async #recordPartial(claim: Claim, base: Omit<OutcomeBase, 'counts'>, counts: JobCounts, rest: JobCounts, pending: readonly PendingGroup[], durationMs: number, log: Logger): Promise<SlotOutcome> {
    const { maxAttempts, retryDelayMs } = this.#ctx.config;
    const row = await this.#ctx.db.selectFrom('job_runs').select(['attempts_without_progress', 'progress_attempt']).where(this.#holds(claim)).executeTakeFirst();
    const outage = pending.every((group) => group.unavailable);
    const withoutProgress = row === undefined ? 0 : row.progress_attempt === claim.attempt ? 0 : row.attempts_without_progress + (outage ? 0 : 1);
    const abandoned = withoutProgress >= maxAttempts;
    const now = this.#ledgerClock.now();
    const retryAt = new Date(now.getTime() + retryDelayMs * 2 ** (Math.min(Math.max(withoutProgress, 1), 20) - 1));
    const accounts = pending.flatMap((group) => group.accounts);
    const error = `${pending.length} account group(s) pending (${accounts.length} account(s): ${accounts.slice(0, 10).join(', ')}${accounts.length > 10 ? ', …' : ''})${outage ? ', their database node unreachable' : ''}: ${(pending[0]!.error ?? '').split('\n')[0]}`;
    const recorded = await sql`
      UPDATE job_runs SET status = ${abandoned ? 'abandoned' : 'failed'}, finished_at = ${now}, duration_ms = ${durationMs}, error = ${error},
             retry_at = ${abandoned ? null : retryAt}, attempts_without_progress = ${withoutProgress}, counts = ${addedCounts(rest)}
      WHERE ${this.#holds(claim)}`.execute(this.#ctx.db);
    if (Number(recorded.numAffectedRows ?? 0) === 0) {
      log.warn({ counts }, 'slot ended with account groups pending, but its claim had been taken over; the other run records the outcome');
      return { ...base, counts, status: 'lost' };
    }
    const fields = { counts, pending_groups: pending.map((group) => group.grp), pending_accounts: accounts.length, attempts_without_progress: withoutProgress, duration_ms: durationMs };
    if (abandoned) {
      log.error(fields, `slot abandoned: ${error}; re-run it with \`kessai jobs run ${claim.job} --at ${claim.slot.toISOString()}\``);
      return { ...base, counts, status: 'abandoned', error, attemptsWithoutProgress: withoutProgress };
    }
    log.warn({ ...fields, retry_at: retryAt.toISOString() }, 'slot partly done: its other account groups are complete; the pending ones are retried');
    return { ...base, counts, status: 'partial', error, pendingGroups: pending.length, pendingAccounts: accounts.length, retryAt, attemptsWithoutProgress: withoutProgress };
  }

  /** The fence of a batch on one account group (SlotRun.assertClaim with a group). */
  async #assertGroup(executor: Kysely<Database>, groups: SlotGroups | undefined, group: SlotGroup | undefined, job: string, slot: Date): Promise<void> {
    if (groups === undefined || group === undefined || !(await groups.holds(executor, group, batchWorkMem()))) throw new RunLost(job, slot);
  }

  /**
   * SlotRun.recordBatch of a batch on an account group: its counts added to the slot's ledger row
   * and the slot's current attempt marked as progressing, whichever worker committed it (the
   * group's fence, taken first in the batch, stands for the claim).
   */
  async #recordGroupBatch(executor: Kysely<Database>, job: string, slot: Date, counts: JobCounts, group: SlotGroup | undefined): Promise<void> {
    if (group === undefined) throw new RunLost(job, slot);
    await sql`
      UPDATE job_runs SET counts = ${addedCounts(counts)}, attempts_without_progress = 0, progress_attempt = job_runs.attempt
      WHERE job_runs.job = ${job} AND job_runs.slot = ${slot}`.execute(executor);
  }

  /** The fence a job calls in each batch transaction (SlotRun.assertClaim). */
  async #assertClaim(executor: Kysely<Database>, claim: Claim): Promise<void> {
    // FOR SHARE: a take-over (an UPDATE of this row) waits until the batch has committed.
    // Every batch transaction starts here, so the same statement gives the batch its sort memory
    // (set_config(…, true): this transaction only; never lower than the server's setting). A batch
    // sorts thousands of wide rows — e.g. the events of 5,000 released holds, ordered for their
    // sequence — and at the server default of 4 MB each such sort went to disk (bench:holds
    // figures in docs/decisions/performance.md, "Measured figures moved out of comments").
    const held = await sql`
      SELECT ${batchWorkMem()} FROM job_runs
      WHERE ${this.#holds(claim)}
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
        .where(this.#holds(claim))
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

/** The batch transaction's sort memory: BATCH_WORK_MEM, never lower than the server's setting (see #assertClaim). */
function batchWorkMem() {
  return sql`set_config('work_mem', CASE WHEN pg_size_bytes(current_setting('work_mem')) < pg_size_bytes(${BATCH_WORK_MEM})
                                         THEN ${BATCH_WORK_MEM} ELSE current_setting('work_mem') END, true)`;
}

/**
 * The ledger's counts of a slot plus `delta`, name by name (the correlated `job_runs.counts` of the
 * row being updated; a name missing on either side counts as 0).
 */
function addedCounts(delta: JobCounts) {
  return sql`(
    SELECT coalesce(jsonb_object_agg(key, total), '{}'::jsonb) FROM (
      SELECT key, sum(value::numeric) AS total FROM (
        SELECT key, value FROM jsonb_each_text(coalesce(job_runs.counts, '{}'::jsonb))
        UNION ALL SELECT key, value FROM jsonb_each_text(${JSON.stringify(delta)}::jsonb)
      ) AS each_count GROUP BY key
    ) AS sums)`;
}
