/**
 * The account groups of a slot: how several workers share one slot's work (`job_run_groups`,
 * sql/000270_job_run_groups.sql).
 *
 * A slot stays one record of what is due as of its instant (its `job_runs` row, claimed by one
 * worker: the slot's lead). When the job's batch loop starts, the lead lists the accounts with due
 * work once and records the batches of the loop's first round as the slot's groups (`plan`): each
 * at most a batch size of due rows, an account that fills a batch alone, and on Citus only
 * accounts of one shard — so a group's statements reach one worker node. Every worker — the lead,
 * and any other worker that has no slot of its own to claim (Scheduler.tick) — claims groups under
 * a lease (`FOR UPDATE SKIP LOCKED`, the run ledger's idiom), runs one round of the job's batches on
 * the group's accounts, and hands the group back for its next round with the accounts still due
 * (`nextRound`), or marks it done. Groups are claimed fewest rounds first, so the rounds of a large
 * account take turns with every other group, as the batches of one round do. Each batch transaction
 * holds its group row `FOR SHARE` (the fence): a take-over of a group whose worker died waits for
 * the batch in flight, and a worker that lost its group writes nothing more.
 *
 * A group that fails (a worker node that cannot be reached, or any other error) is marked `failed`
 * for the slot's current attempt and the other groups go on; the lead, once no group is left to
 * claim, waits for the groups other workers still hold, and the slot ends `partial` when any group
 * failed (retried as a failed slot, taking only the groups not done). Accounts that become due
 * after the plan are left to the next slot.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Kysely, type SqlBool } from 'kysely';
import { isDatabaseUnavailable } from '../db/errors';
import type { Database } from '../db/schema';
import { toError } from '../domain/errors';
import type { Clock } from './clock';

/** How often a lead with nothing left to claim looks whether the groups other workers hold have ended. */
const LEAD_WAIT_MS = 200;

/** A group claimed by this worker: its accounts, and the fencing number of the claim. */
export interface SlotGroup {
  readonly grp: number;
  readonly accounts: readonly string[];
  readonly attempt: number;
}

/** A group that did not finish in the slot's latest attempt. */
export interface PendingGroup {
  readonly grp: number;
  readonly accounts: readonly string[];
  readonly unavailable: boolean;
  readonly error: string | null;
}

/** The groups of one slot as one worker sees them: plans, claims, fences and ends them. */
export class SlotGroups {
  readonly #db: Kysely<Database>;
  readonly #job: string;
  readonly #slot: Date;
  readonly #owner: string;
  readonly #clock: Clock;
  readonly #leaseMs: number;
  /** The slot's lead plans the groups and waits for the other workers' before its run returns. */
  readonly #lead: boolean;
  readonly #signal: AbortSignal;
  #heartbeat: NodeJS.Timeout | undefined;
  #claimed = 0;

  constructor(options: { db: Kysely<Database>; job: string; slot: Date; owner: string; clock: Clock; leaseMs: number; lead: boolean; signal: AbortSignal }) {
    this.#db = options.db;
    this.#job = options.job;
    this.#slot = options.slot;
    this.#owner = options.owner;
    this.#clock = options.clock;
    this.#leaseMs = options.leaseMs;
    this.#lead = options.lead;
    this.#signal = options.signal;
  }

  /**
   * Records the slot's groups — `batches`, the accounts of each batch of the first round — unless
   * they are recorded already (a retry or a take-over keeps the groups of the first attempt). Only
   * the lead plans.
   */
  async plan(batches: () => Promise<readonly (readonly string[])[]>): Promise<void> {
    if (!this.#lead) return;
    const known = await this.#db.selectFrom('job_run_groups').select('grp').where('job', '=', this.#job).where('slot', '=', this.#slot).limit(1).executeTakeFirst();
    if (known !== undefined) return;
    const groups = await batches();
    if (groups.length === 0) return;
    await sql`
      INSERT INTO job_run_groups (job, slot, grp, accounts, status)
      SELECT ${this.#job}, ${this.#slot}, g.grp::int, string_to_array(g.accounts, ' '), 'pending'
      FROM unnest(${groups.map((accounts) => accounts.join(' '))}::text[]) WITH ORDINALITY AS g (accounts, grp)
      ON CONFLICT (job, slot, grp) DO NOTHING`.execute(this.#db);
  }

  /**
   * Claims the next group this worker may take: pending, held under a lapsed lease, or failed in
   * an earlier attempt of the slot; only while the slot is running. Null when none is left — the
   * lead first waits until no other worker holds one (taking over any whose lease lapses), or until
   * the run is stopped.
   */
  async next(): Promise<SlotGroup | null> {
    for (;;) {
      const claimed = await this.#claim();
      if (claimed !== null) {
        this.#claimed += 1;
        this.#startHeartbeat(claimed);
        return claimed;
      }
      if (!this.#lead || this.#signal.aborted) return null;
      const held = await this.#db.selectFrom('job_run_groups').select('grp').where('job', '=', this.#job).where('slot', '=', this.#slot).where('status', '=', 'running').limit(1).executeTakeFirst();
      if (held === undefined) return null;
      await sleep(LEAD_WAIT_MS, undefined, { signal: this.#signal }).catch(() => undefined);
    }
  }

  /** Whether every group of the slot is done (nothing left for this or another run). */
  async finished(): Promise<boolean> {
    return (await pendingGroups(this.#db, this.#job, this.#slot)).length === 0;
  }

  /** How many groups this worker has claimed so far. */
  get claimed(): number {
    return this.#claimed;
  }

  async #claim(): Promise<SlotGroup | null> {
    const now = this.#clock.now();
    const result = await sql<SlotGroup>`
      WITH previous AS MATERIALIZED (
        SELECT g.job, g.slot, g.grp FROM job_run_groups g JOIN job_runs r ON r.job = g.job AND r.slot = g.slot
        WHERE g.job = ${this.#job} AND g.slot = ${this.#slot} AND r.status = 'running' AND ${claimableGroup(now)}
        ORDER BY g.rounds, g.grp
        LIMIT 1
        FOR UPDATE OF g SKIP LOCKED
      )
      UPDATE job_run_groups SET status = 'running', attempt = job_run_groups.attempt + 1, owner = ${this.#owner},
             lease_until = ${new Date(now.getTime() + this.#leaseMs)}, error = NULL, unavailable = false
      FROM previous
      WHERE job_run_groups.job = previous.job AND job_run_groups.slot = previous.slot AND job_run_groups.grp = previous.grp
      RETURNING job_run_groups.grp, job_run_groups.accounts, job_run_groups.attempt`.execute(this.#db);
    return result.rows[0] ?? null;
  }

  /** The fence: the row of a group this worker still holds. */
  #holds(group: SlotGroup) {
    return sql<SqlBool>`job_run_groups.job = ${this.#job} AND job_run_groups.slot = ${this.#slot} AND job_run_groups.grp = ${group.grp}
      AND job_run_groups.owner = ${this.#owner} AND job_run_groups.attempt = ${group.attempt} AND job_run_groups.status = 'running'`;
  }

  /**
   * In a batch transaction, first: true while this worker holds the group, which then cannot be
   * taken over until the transaction ends (`FOR SHARE`); sets the batch's sort memory as
   * `setting` says (the same statement as the slot's own fence).
   */
  async holds(executor: Kysely<Database>, group: SlotGroup, setting: ReturnType<typeof sql>): Promise<boolean> {
    const held = await sql`SELECT ${setting} FROM job_run_groups WHERE ${this.#holds(group)} FOR SHARE`.execute(executor);
    return held.rows.length > 0;
  }

  /** Every batch of the group committed. */
  async done(group: SlotGroup): Promise<void> {
    this.#stopHeartbeat();
    await this.#finish(group, sql`status = 'done', owner = NULL, lease_until = NULL`);
  }

  /** A round of the group committed; `accounts` (those still due) wait for its next round, any worker's. */
  async nextRound(group: SlotGroup, accounts: readonly string[]): Promise<void> {
    this.#stopHeartbeat();
    await this.#finish(group, sql`status = 'pending', owner = NULL, lease_until = NULL, rounds = rounds + 1, accounts = ${[...accounts]}::text[]`);
  }

  /** The group failed in the slot's current attempt: the next attempt takes it again. */
  async failed(group: SlotGroup, error: unknown): Promise<void> {
    this.#stopHeartbeat();
    const err = toError(error);
    await this.#finish(
      group,
      sql`status = 'failed', owner = NULL, lease_until = NULL, unavailable = ${isDatabaseUnavailable(error)}, error = ${err.message},
          failed_attempt = (SELECT r.attempt FROM job_runs r WHERE r.job = job_run_groups.job AND r.slot = job_run_groups.slot)`,
    );
  }

  /** Handed back untouched (the worker stops): any worker takes it at once. */
  async release(group: SlotGroup): Promise<void> {
    this.#stopHeartbeat();
    await this.#finish(group, sql`status = 'pending', owner = NULL, lease_until = NULL`);
  }

  async #finish(group: SlotGroup, set: ReturnType<typeof sql>): Promise<void> {
    await sql`UPDATE job_run_groups SET ${set} WHERE ${this.#holds(group)}`.execute(this.#db);
  }

  /** Keeps the group's lease alive while its batches run (every third of the lease). */
  #startHeartbeat(group: SlotGroup): void {
    this.#stopHeartbeat();
    this.#heartbeat = setInterval(() => {
      sql`UPDATE job_run_groups SET lease_until = ${new Date(this.#clock.now().getTime() + this.#leaseMs)} WHERE ${this.#holds(group)}`.execute(this.#db).catch(() => undefined);
    }, Math.floor(this.#leaseMs / 3));
    this.#heartbeat.unref();
  }

  #stopHeartbeat(): void {
    clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
  }
}

/** A group another worker may claim as of `now` (`g` the group, `r` its slot's ledger row). */
function claimableGroup(now: Date) {
  return sql<SqlBool>`(g.status = 'pending' OR (g.status = 'running' AND g.lease_until < ${now})
    OR (g.status = 'failed' AND g.failed_attempt < r.attempt))`;
}

/**
 * The oldest slot (due by `cutoff`, of the given jobs) that is running under another worker and
 * has a group to claim: where a worker without a slot of its own helps. Lock-free; the claim
 * itself (SlotGroups.next) decides.
 */
export async function slotToHelp(db: Kysely<Database>, jobs: readonly string[], cutoff: Date, now: Date): Promise<{ job: string; slot: Date } | null> {
  const result = await sql<{ job: string; slot: Date }>`
    SELECT g.job, g.slot FROM job_run_groups g JOIN job_runs r ON r.job = g.job AND r.slot = g.slot
    WHERE g.status <> 'done' AND g.job = ANY(${[...jobs]}::text[]) AND g.slot <= ${cutoff} AND r.status = 'running' AND ${claimableGroup(now)}
    ORDER BY g.slot, array_position(${[...jobs]}::text[], g.job), g.rounds
    LIMIT 1`.execute(db);
  return result.rows[0] ?? null;
}

/** The groups of a slot not done after its latest attempt (none: the slot's work is complete). */
export async function pendingGroups(db: Kysely<Database>, job: string, slot: Date): Promise<PendingGroup[]> {
  return db.selectFrom('job_run_groups').select(['grp', 'accounts', 'unavailable', 'error']).where('job', '=', job).where('slot', '=', slot).where('status', '<>', 'done').orderBy('grp').execute();
}

/** Forgets a slot's groups: a replay (`jobs run`) lists what is due afresh. */
export async function forgetGroups(db: Kysely<Database>, job: string, slot: Date): Promise<void> {
  await db.deleteFrom('job_run_groups').where('job', '=', job).where('slot', '=', slot).execute();
}
