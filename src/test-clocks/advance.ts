/**
 * Advancing a test clock: the simulation's own driver (src/simulation/simulate.ts, `advance`) runs
 * the worker's jobs over the clock's interval, through the worker's scheduler, with a virtual clock
 * and the jobs scoped to the clock's objects (clock-scope.ts). Webhooks go to the account's
 * endpoints as the delivery job produces them, dated on the clock's time.
 *
 * One advance per clock at a time, exactly once: `claimAdvance` flips the clock to `advancing`
 * under a lease in real time (a conditional UPDATE: of two callers one wins, the other is refused),
 * the run keeps the lease alive, and a run whose process died leaves the lease to lapse; the next
 * advance of that clock takes it over and runs the same interval again. Nothing is done twice: the
 * jobs process what is due as of each slot and move it on in the same transaction (a replayed slot
 * finds nothing left), and the clock's slots have their own ledger rows (`job@clock`), apart from
 * the live worker's.
 */
import { sql, type Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database } from '../db/schema';
import { reject, toError } from '../domain/errors';
import { MS_PER_DAY } from '../domain/time';
import { FixedClock, VirtualClock, type Clock } from '../engine/clock';
import type { Context } from '../engine/context';
import type { JobDefinition } from '../engine/job';
import { recordEvent } from '../events/outbox';
import { advance } from '../simulation/simulate';
import { deliverDueWebhooks } from '../webhooks/delivery';
import { ADVANCE_HORIZON_MS, findTestClock, instantParam, renderTestClock, type TestClockObject, type TestClockRow } from './test-clocks';

/** An advance this process holds: the clock as claimed (`advancing_to` set). */
export interface AdvanceClaim {
  readonly row: TestClockRow;
  readonly owner: string;
  /** True when it takes over an advance whose process died (the interval is run again). */
  readonly resumed: boolean;
}

/** The ledger names of a clock's slots: the job's own name and the clock, apart from the live worker's. */
export function clockJobs(jobs: readonly JobDefinition[], testClockId: string): JobDefinition[] {
  return jobs.filter((job) => job.bookWide !== true).map((job) => ({ ...job, name: `${job.name}@${testClockId}` }));
}

/**
 * Claims the clock for an advance to `to` (UNIX seconds): refused backwards, at its own instant,
 * or past ADVANCE_HORIZON_MS; refused while another advance holds the clock. An advance whose
 * lease lapsed (its process died) is taken over and resumed to its own target, whatever `to` asks.
 * `realClock`: the wall clock the lease is measured by.
 */
export async function claimAdvance(ctx: Context, realClock: Clock, caller: Caller, id: string, to: unknown, owner: string): Promise<AdvanceClaim> {
  const clock = await findTestClock(ctx.db, caller, id);
  const target = instantParam(to, 'frozen_time');
  const from = clock.frozen_time.getTime();
  const lapsed = clock.status === 'advancing' && clock.advance_lease_until !== null && clock.advance_lease_until.getTime() < realClock.now().getTime();
  if (!lapsed) {
    if (target.getTime() <= from) reject('invalid_timestamp', 'frozen_time', `frozen_time must be after the clock's current instant (${clock.frozen_time.toISOString()}): a clock only moves forward`);
    if (target.getTime() - from > ADVANCE_HORIZON_MS) reject('invalid_timestamp', 'frozen_time', `one advance moves a clock at most ${ADVANCE_HORIZON_MS / MS_PER_DAY} days; advance in steps`);
  }
  const now = realClock.now();
  const leaseUntil = new Date(now.getTime() + ctx.config.leaseMs);
  const claimed = await sql<TestClockRow>`
    UPDATE test_clocks SET status = 'advancing', advancing_to = CASE WHEN status = 'ready' THEN ${target} ELSE advancing_to END,
           advance_owner = ${owner}, advance_lease_until = ${leaseUntil}
    WHERE account_id = ${caller.accountId} AND test_clock_id = ${id} AND frozen_time = ${clock.frozen_time}
      AND (status = 'ready' OR advance_lease_until < ${now})
    RETURNING *`.execute(ctx.db);
  const row = claimed.rows[0];
  if (!row) reject('invalid_status', 'id', `Test clock ${id} is already advancing (or moved meanwhile); wait until it is ready`);
  return { row, owner, resumed: lapsed };
}

/** The fence: the clock row while this claim still holds it. */
function holds(claim: AdvanceClaim) {
  return sql`account_id = ${claim.row.account_id} AND test_clock_id = ${claim.row.test_clock_id} AND status = 'advancing' AND advance_owner = ${claim.owner}`;
}

/**
 * Runs a claimed advance to its end: the jobs over (frozen_time, advancing_to], then the clock
 * `ready` at advancing_to with its `test_clock.ready` event, then that event's delivery. Returns
 * the clock as it ends. Throws (leaving the claim to lapse, so the next advance resumes it) when the
 * run fails or its claim is lost.
 */
export async function runAdvance(ctx: Context, realClock: Clock, claim: AdvanceClaim, jobs: readonly JobDefinition[]): Promise<TestClockObject> {
  const { row, owner } = claim;
  const target = row.advancing_to!;
  const scope = { accountId: row.account_id, testClockId: row.test_clock_id };
  const heartbeat = startHeartbeat(ctx, realClock, claim);
  try {
    // A take-over: the dead run's slots and delivery leases are this run's now (no one else works on
    // this clock's rows: the live worker leaves them, and this claim excludes other advances).
    await releaseDeadRun(ctx.db, claim);
    const virtual = new VirtualClock(row.frozen_time);
    const scoped: Context = { ...ctx, clock: virtual, testClock: scope };
    await advance(
      scoped,
      virtual,
      // The driver runs [from, to): one millisecond past the target, so work due at it runs.
      { steps: [], jobs: clockJobs(jobs, row.test_clock_id), to: new Date(target.getTime() + 1), strict: true, owner, ledgerClock: realClock, analyze: 'shared', onProgress: () => heartbeat.check() },
      [row.account_id],
    );
    heartbeat.check();
    const ready = await ctx.db.transaction().execute(async (trx) => {
      const updated = await sql<TestClockRow>`
        UPDATE test_clocks SET status = 'ready', frozen_time = advancing_to, advancing_to = NULL, advance_owner = NULL, advance_lease_until = NULL
        WHERE ${holds(claim)} RETURNING *`.execute(trx);
      const done = updated.rows[0];
      if (!done) throw new Error(`the advance of test clock ${row.test_clock_id} lost its claim; the run that took it over finishes it`);
      const object = renderTestClock(done);
      await recordEvent(trx, ctx.ids, { accountId: row.account_id, livemode: false, type: 'test_clock.ready', data: { ...object }, at: target });
      return object;
    });
    // The ready event's deliveries (on the clock: the live worker leaves them). Should this process
    // die first, the clock's next advance delivers them at its first slot.
    await deliverDueWebhooks({ ...ctx, clock: new FixedClock(target), testClock: scope }, { owner });
    return ready;
  } finally {
    heartbeat.stop();
  }
}

async function releaseDeadRun(db: Kysely<Database>, claim: AdvanceClaim): Promise<void> {
  if (!claim.resumed) return;
  const id = claim.row.test_clock_id;
  await sql`UPDATE job_runs SET status = 'failed', lease_until = NULL, retry_at = NULL WHERE job LIKE ${`%@${id}`} AND status = 'running'`.execute(db);
  await sql`UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL
    WHERE account_id = ${claim.row.account_id} AND test_clock_id = ${id} AND status = 'pending' AND lease_until IS NOT NULL`.execute(db);
}

/** Keeps the advance's lease alive; `check` throws once the claim is found lost. */
function startHeartbeat(ctx: Context, realClock: Clock, claim: AdvanceClaim): { check(): void; stop(): void } {
  let lost: Error | undefined;
  const timer = setInterval(() => {
    const leaseUntil = new Date(realClock.now().getTime() + ctx.config.leaseMs);
    sql`UPDATE test_clocks SET advance_lease_until = ${leaseUntil} WHERE ${holds(claim)}`
      .execute(ctx.db)
      .then((result) => {
        if (Number(result.numAffectedRows ?? 0) === 0) lost ??= new Error(`the advance of test clock ${claim.row.test_clock_id} lost its claim`);
      })
      .catch((error: unknown) => ctx.log.warn({ err: toError(error), test_clock: claim.row.test_clock_id }, 'test clock lease heartbeat failed; trying again'));
  }, Math.floor(ctx.config.leaseMs / 3));
  timer.unref();
  return {
    check() {
      if (lost) throw lost;
    },
    stop: () => clearInterval(timer),
  };
}

/**
 * An advance as the API and the CLI start it: claimed now (refusals thrown at once), then run in
 * the background. Returns the clock as claimed (`advancing`) and the run's completion, which never
 * rejects: a failure is logged and left to the next advance to resume.
 */
export async function startAdvance(
  ctx: Context,
  realClock: Clock,
  caller: Caller,
  id: string,
  to: unknown,
  jobs: readonly JobDefinition[],
  owner: string,
): Promise<{ clock: TestClockObject; done: Promise<TestClockObject | null> }> {
  const claim = await claimAdvance(ctx, realClock, caller, id, to, owner);
  const done = runAdvance(ctx, realClock, claim, jobs).catch((error: unknown) => {
    ctx.log.error({ err: toError(error), test_clock: id }, 'test clock advance failed; the next advance of the clock resumes it');
    return null;
  });
  return { clock: renderTestClock(claim.row), done };
}
