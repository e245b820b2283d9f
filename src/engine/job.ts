/**
 * What a scheduled job is: a name, a cron schedule in Asia/Tokyo, and a run function that
 * processes everything due as of its slot. Jobs live one per file in jobs/.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema';
import { packDueAccounts, planDueGroups, type DueAccount } from './account-batches';
import type { Clock } from './clock';
import type { Context } from './context';
import type { SlotGroup, SlotGroups } from './slot-groups';
import type { JobCounts } from './slot-outcome';

export type { JobCounts } from './slot-outcome';

export interface SlotRun {
  /** The scheduled instant this run stands for: work is due "as of" it, never as of wall time. */
  readonly slot: Date;
  /** 1 for the first claim of the slot; more when a failed or lapsed run is tried again. */
  readonly attempt: number;
  /**
   * The clock leases follow: the scheduler's ledger clock (real time in a worker, `--once --at`
   * included; the virtual clock in a simulation). A job that leases rows of its own (webhook
   * deliveries) takes and reads those leases by it, so they lapse with the worker that took them,
   * in real time, as the slot's lease does — never by the engine clock a replay fixes.
   */
  readonly leaseClock: Clock;
  /**
   * Aborted when the worker is asked to stop, or when this run lost its claim (another worker took
   * the slot over): finish or abandon the current batch, then return.
   */
  readonly signal: AbortSignal;
  /**
   * Call inside each batch transaction, before writing: throws RunLost unless this run still holds
   * the slot, and keeps the claim from being taken over until the transaction ends. A run that lost
   * its slot then writes nothing more. With `group`, the fence is that group's claim instead
   * (slot-groups.ts): a worker helping with a slot it does not lead holds only its group.
   */
  assertClaim(executor: Kysely<Database>, group?: SlotGroup): Promise<void>;
  /**
   * Call inside each batch transaction, last, with what the batch did: adds it to the slot's counts
   * in the ledger and marks the attempt as one that made progress, in the batch's own transaction,
   * so the ledger's counts are exactly what was committed, whichever attempts committed it.
   * `runBatches` calls it; a job that writes its own loop must too.
   */
  recordBatch(executor: Kysely<Database>, counts: JobCounts, group?: SlotGroup): Promise<void>;
  /**
   * The slot's account groups, shared with the other workers (slot-groups.ts): `runBatches` plans
   * them and takes them one by one. Undefined in a simulation (one process): the run takes every
   * due account itself.
   */
  readonly groups?: SlotGroups;
}

export interface JobDefinition {
  readonly name: string;
  /** Cron expression read in Asia/Tokyo, e.g. `* * * * *` or `0 0 * * *` (00:00 JST). */
  readonly schedule: string;
  readonly description: string;
  /**
   * Processes everything due as of `run.slot`, in batches, each batch in its own transaction with
   * natural unique keys as the last line of defence, so that running a slot again, or two
   * workers at once, creates nothing twice. Checks `run.signal` between batches (`runBatches`
   * does all of this). `ctx.log` is the run's own logger, carrying `job`, `slot` and `attempt`.
   */
  run(ctx: Context, run: SlotRun): Promise<JobCounts>;
  /**
   * The earliest instant after `after` at which this job has due work, or null when it has none
   * (the simulator jumps straight there instead of stepping through empty slots).
   */
  nextDueAt?(ctx: Context, after: Date): Promise<Date | null>;
  /**
   * Closes books: a slot of this job is claimed only once every job registered before it has
   * finished its runs at or before that instant (none `pending`, `running` or `failed` awaiting a
   * retry), whichever worker holds them, so that the books it closes hold everything due by then.
   * One worker runs a slot's jobs in registry order anyway; this makes two workers do the same.
   */
  readonly waitsForEarlierJobs?: boolean;
  /**
   * Works on the account's own books only, never on a test clock's (service fees: a clock has no
   * plan fee): a clock's advance leaves it out (src/test-clocks/advance.ts).
   */
  readonly bookWide?: boolean;
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

/** What one batch did: `selected` rows taken (0: nothing due is left), and its counts by name. */
export type BatchResult<K extends string> = { readonly selected: number } & Readonly<Record<K, number>>;

/** Lists the accounts with due work (lock-free), with their due rows counted up to `cap`; only those of `among` when given. */
export type DueAccountsOf = (db: Kysely<Database>, cap: number, among?: readonly string[]) => Promise<readonly DueAccount[]>;

/** One batch of a job: the due rows of `accountIds`, at most `limit`, in the batch's transaction. */
export type BatchOf<K extends string> = (trx: Kysely<Database>, accountIds: readonly string[], limit: number) => Promise<BatchResult<K>>;

/**
 * The batch loop of every job (ARCHITECTURE.md, "Jobs, slots and exactly-once"), account by
 * account, in rounds. Each round `dueAccounts` lists the accounts with due work (lock-free, with
 * their due rows counted up to the batch size) and packAccounts turns them into batches: an account
 * whose due rows fill a batch has batches of its own, small accounts share one (at most a batch
 * size of due rows, on Citus only accounts of one shard). Every batch of the round runs once, each
 * in its own transaction — the claim asserted first, the batch's counts recorded last, in that
 * same transaction — with every statement naming the batch's accounts (account-scope.ts; on
 * Citus, routed to their shard). So a huge account takes one batch per round like every other
 * batch and starves nobody. Stops cleanly between batches when the worker is asked to. Returns
 * what this attempt committed: the `counted` names in their order, then `batches`.
 *
 * With the slot's account groups (SlotRun.groups, slot-groups.ts) the batches of the first round
 * are recorded as the slot's groups, and the rounds run group by group: this run claims a group,
 * runs a round on its accounts, hands it back with those still due, and claims the next (fewest
 * rounds first) — other workers claim other groups of the same slot at the same time. A group that
 * fails (its worker node unreachable, any other error) is left for the slot's next attempt and the
 * run goes on; a stop hands the current group back. Without groups (a simulation) the rounds run
 * on every due account.
 *
 * The accounts of a batch that takes nothing are finished for this run (what is still due is
 * locked by another run, which several workers on consecutive slots share, or falls to the next
 * slot), so a run always ends: every round either commits rows or finishes accounts. Not sooner:
 * a batch can make rows due again as of the same slot (a run late by two periods renews twice, a
 * hold is reauthorized again, terms close in order), which the next round's list shows.
 */
export async function runBatches<const K extends string>(
  ctx: Context,
  run: SlotRun,
  counted: readonly K[],
  dueAccounts: DueAccountsOf,
  batch: BatchOf<K>,
): Promise<Record<K | 'batches', number>> {
  const totals = Object.fromEntries([...counted, 'batches'].map((name) => [name, 0])) as Record<K | 'batches', number>;
  const limit = ctx.config.batchSize;
  const groups = run.groups;
  if (groups === undefined) {
    const finished = new Set<string>();
    for (;;) {
      const due = (await dueAccounts(ctx.db, limit)).filter((account) => !finished.has(account.accountId));
      if (due.length === 0) return totals;
      for (const accountId of await accountRound(ctx, run, counted, due, batch, totals, undefined)) finished.add(accountId);
    }
  }
  await groups.plan(() => planDueGroups(ctx.db, dueAccounts, limit));
  for (;;) {
    // No checkpoint before the claim: a stop after the last batch still lets this run see that
    // nothing is left (the slot succeeds, as without groups); each batch checks first.
    const group = await groups.next();
    if (group === null) {
      if (!(await groups.finished())) checkpoint(run);
      return totals;
    }
    try {
      const due = await dueAccounts(ctx.db, limit, group.accounts);
      const finished = new Set(due.length === 0 ? [] : await accountRound(ctx, run, counted, due, batch, totals, group));
      const still = due.map((account) => account.accountId).filter((accountId) => !finished.has(accountId));
      if (still.length === 0) await groups.done(group);
      else await groups.nextRound(group, still);
    } catch (error) {
      // The run itself stops (shutdown, or the slot's claim lost): the group goes back as it was.
      if (run.signal.aborted) {
        await groups.release(group);
        throw error;
      }
      // Only this group's claim was lost: its new holder goes on with it.
      if (causedBy(error, RunLost)) continue;
      await groups.failed(group, error);
      ctx.log.warn({ err: error, group: group.grp, accounts: group.accounts.length, account: group.accounts[0] }, 'account group failed; the slot goes on with its other groups and takes this one again on its next attempt');
    }
  }
}

/**
 * One round of runBatches over the `due` accounts, adding what each batch commits to `totals`;
 * returns the accounts finished for this run (their batch took nothing).
 */
async function accountRound<const K extends string>(
  ctx: Context,
  run: SlotRun,
  counted: readonly K[],
  due: readonly DueAccount[],
  batch: BatchOf<K>,
  totals: Record<K | 'batches', number>,
  group: SlotGroup | undefined,
): Promise<string[]> {
  const limit = ctx.config.batchSize;
  const finished: string[] = [];
  for (const accountIds of await packDueAccounts(ctx.db, due, limit)) {
    checkpoint(run);
    const result = await ctx.db.transaction().execute(async (trx) => {
      // Must come first: a run that lost its slot (or group) writes nothing, and a take-over waits for this batch.
      await run.assertClaim(trx, group);
      const done = await batch(trx, accountIds, limit);
      if (done.selected > 0) await run.recordBatch(trx, { ...countsOf(done, counted), batches: 1 }, group);
      return done;
    });
    if (result.selected === 0) {
      finished.push(...accountIds);
      continue;
    }
    for (const name of counted) totals[name] += result[name];
    totals.batches += 1;
    const committed: Record<string, number> = { batch: totals.batches, ...countsOf(result, counted) };
    ctx.log.debug({ accounts: accountIds.length, account: accountIds[0], ...committed }, 'batch committed');
  }
  return finished;
}

function countsOf<K extends string>(result: BatchResult<K>, counted: readonly K[]): Record<K, number> {
  const counts = {} as Record<K, number>;
  for (const name of counted) counts[name] = result[name];
  return counts;
}
