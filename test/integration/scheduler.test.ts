import { fileURLToPath } from 'node:url';
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/engine/scheduler';
import { runRetentionMs } from '../../src/cli/job-commands';
import type { Database } from '../../src/db/schema';
import { runBatches, type JobDefinition } from '../../src/engine/job';
import { createLogger } from '../../src/engine/logger';
import { batchWriterJob, createBatchWriterTables, seedItems } from '../support/batch-writer-job';
import { createTestDatabase, isPostgres, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { spawnWorker } from '../support/spawn-worker';

const MINUTE = 60_000;
const at = (offsetMinutes: number): Date => new Date(REFERENCE_INSTANT.getTime() + offsetMinutes * MINUTE);

let database: TestDatabase;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let db: Kysely<any>;

beforeAll(async () => {
  database = await createTestDatabase();
  db = database.store.db;
  await createBatchWriterTables(db);
});
afterAll(async () => database?.drop());
beforeEach(async () => {
  await sql`TRUNCATE test_items, test_effects, test_slot_runs, job_runs, job_run_groups, job_schedule`.execute(db);
});

async function slotRuns(job = 'test.batch-writer'): Promise<{ slot: Date; attempt: number; owner: string }[]> {
  const result = await sql<{ slot: Date; attempt: number; owner: string }>`SELECT slot, attempt, owner FROM test_slot_runs WHERE job = ${job} ORDER BY slot, attempt`.execute(db);
  return result.rows;
}

async function effectCounts(): Promise<{ items: number; processed: number; effects: number; duplicates: number }> {
  const result = await sql<{ items: number; processed: number; effects: number; duplicates: number }>`
    SELECT (SELECT count(*) FROM test_items) AS items,
           (SELECT count(*) FROM test_items WHERE processed_at IS NOT NULL) AS processed,
           (SELECT count(*) FROM test_effects) AS effects,
           (SELECT count(*) FROM (SELECT item_id FROM test_effects GROUP BY account_id, item_id HAVING count(*) > 1) d) AS duplicates`.execute(db);
  return result.rows[0]!;
}

describe('scheduler with a manual clock', () => {
  it('runs the slot that is due now, and each slot once however often it wakes', async () => {
    const ctx = testContext(database.store);
    const scheduler = new Scheduler(ctx, [batchWriterJob({ owner: 'w1', schedule: '*/10 * * * *' })], { owner: 'w1' });
    const first = await scheduler.tick();
    expect(first.map((o) => [o.slot.toISOString(), o.status])).toContainEqual([REFERENCE_INSTANT.toISOString(), 'succeeded']);
    const before = (await slotRuns()).length;
    expect(await scheduler.tick()).toEqual([]);
    expect(await scheduler.tick()).toEqual([]);
    expect((await slotRuns()).length).toBe(before);
  });

  it('backfills the slots missed while no worker ran, in order', async () => {
    const ctx = testContext(database.store);
    const scheduler = new Scheduler(ctx, [batchWriterJob({ owner: 'w1', schedule: '*/10 * * * *' })], { owner: 'w1' });
    await scheduler.tick();
    ctx.clock.set(at(65)); // down for an hour and five minutes
    const outcomes = await scheduler.tick();
    expect(outcomes.map((o) => o.slot.toISOString())).toEqual([10, 20, 30, 40, 50, 60].map((m) => at(m).toISOString()));
    expect(outcomes.every((o) => o.status === 'succeeded')).toBe(true);
  });

  it('backfills no further back than the configured window', async () => {
    const ctx = testContext(database.store, { config: { backfillWindowMs: 30 * MINUTE } });
    const scheduler = new Scheduler(ctx, [batchWriterJob({ owner: 'w1', schedule: '*/10 * * * *' })], { owner: 'w1' });
    await scheduler.tick();
    ctx.clock.set(at(3 * 24 * 60)); // three days later
    const outcomes = await scheduler.tick();
    expect(outcomes.map((o) => o.slot.toISOString())).toEqual([-30, -20, -10, 0].map((m) => at(3 * 24 * 60 + m).toISOString()));
  });

  it('the clock went backwards: nothing runs twice, and new slots run once time passes them', async () => {
    const ctx = testContext(database.store);
    await seedItems(db, 25, at(0));
    const scheduler = new Scheduler(ctx, [batchWriterJob({ owner: 'w1', schedule: '*/10 * * * *' })], { owner: 'w1' });
    ctx.clock.set(at(60));
    await scheduler.tick();
    const ran = (await slotRuns()).length;
    ctx.clock.set(at(25)); // the clock jumps back 35 minutes
    expect(await scheduler.tick()).toEqual([]);
    ctx.clock.set(at(60));
    expect(await scheduler.tick()).toEqual([]);
    expect((await slotRuns()).length).toBe(ran);
    ctx.clock.set(at(70));
    expect((await scheduler.tick()).map((o) => o.slot.toISOString())).toEqual([at(70).toISOString()]);
    expect(await effectCounts()).toEqual({ items: 25, processed: 25, effects: 25, duplicates: 0 });
  });

  it('records a failing slot with its error and retries it after the delay, then succeeds', async () => {
    const ctx = testContext(database.store, { config: { retryDelayMs: 2 * MINUTE, maxAttempts: 5 } });
    await seedItems(db, 3, at(0));
    const scheduler = new Scheduler(ctx, [batchWriterJob({ owner: 'w1', schedule: '0 * * * *', failAttempts: 2 })], { owner: 'w1' });
    const [first] = await scheduler.tick();
    expect(first).toMatchObject({ status: 'failed', attempt: 1, error: 'planned failure on attempt 1' });
    const row = await ctx.db.selectFrom('job_runs').selectAll().executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'failed', attempt: 1, retry_at: at(2) });
    expect(row.error).toContain('planned failure on attempt 1');

    ctx.clock.set(at(1)); // before the retry time: nothing
    expect(await scheduler.tick()).toEqual([]);
    ctx.clock.set(at(2)); // first retry, delay 2 min
    expect((await scheduler.tick()).map((o) => [o.attempt, o.status])).toEqual([[2, 'failed']]);
    ctx.clock.set(at(5)); // second retry waits twice as long (2 + 4 = 6)
    expect(await scheduler.tick()).toEqual([]);
    ctx.clock.set(at(6));
    expect((await scheduler.tick()).map((o) => [o.attempt, o.status])).toEqual([[3, 'succeeded']]);
    const done = await ctx.db.selectFrom('job_runs').selectAll().executeTakeFirstOrThrow();
    expect(done).toMatchObject({ status: 'succeeded', attempt: 3, counts: { processed: 3, batches: 1 } });
    expect(await effectCounts()).toEqual({ items: 3, processed: 3, effects: 3, duplicates: 0 });
  });

  it('abandons a slot after its last attempt, and later slots still run', async () => {
    const ctx = testContext(database.store, { config: { retryDelayMs: MINUTE, maxAttempts: 2 } });
    const failing: JobDefinition = { name: 'test.always-fails', schedule: '0 * * * *', description: 'fails', run: () => Promise.reject(new Error('boom')) };
    const scheduler = new Scheduler(ctx, [failing], { owner: 'w1' });
    expect((await scheduler.tick()).map((o) => o.status)).toEqual(['failed']);
    ctx.clock.set(at(1));
    expect((await scheduler.tick()).map((o) => o.status)).toEqual(['abandoned']);
    ctx.clock.set(at(30));
    expect(await scheduler.tick()).toEqual([]);
    ctx.clock.set(at(60));
    expect((await scheduler.tick()).map((o) => [o.slot.toISOString(), o.attempt])).toEqual([[at(60).toISOString(), 1]]);
  });

  it('takes over a slot whose worker died once its lease has lapsed, and not before', async () => {
    const ctx = testContext(database.store, { config: { leaseMs: 5 * MINUTE } });
    await seedItems(db, 10, at(0));
    await ctx.db.insertInto('job_runs').values({ job: 'test.batch-writer', slot: at(0), status: 'running', attempt: 1, owner: 'dead-worker', lease_until: at(5), started_at: at(0) }).execute();
    await ctx.db.insertInto('job_schedule').values({ job: 'test.batch-writer', high_water: at(0), updated_at: at(0) }).execute();
    const scheduler = new Scheduler(ctx, [batchWriterJob({ owner: 'w2', schedule: '0 * * * *' })], { owner: 'w2' });
    ctx.clock.set(at(4));
    expect(await scheduler.tick()).toEqual([]);
    ctx.clock.set(at(6));
    expect((await scheduler.tick()).map((o) => [o.attempt, o.status])).toEqual([[2, 'succeeded']]);
    expect(await ctx.db.selectFrom('job_runs').select(['owner', 'status']).executeTakeFirstOrThrow()).toEqual({ owner: 'w2', status: 'succeeded' });
  });

  it('replays a finished slot with `runSlot` without creating anything twice', async () => {
    const ctx = testContext(database.store);
    await seedItems(db, 12, at(0));
    const scheduler = new Scheduler(ctx, [batchWriterJob({ owner: 'w1', schedule: '0 * * * *' })], { owner: 'w1' });
    await scheduler.tick();
    const replay = await scheduler.runSlot('test.batch-writer', at(0));
    expect(replay).toMatchObject({ status: 'succeeded', attempt: 2, counts: { processed: 0 } });
    expect(await effectCounts()).toEqual({ items: 12, processed: 12, effects: 12, duplicates: 0 });
    await expect(scheduler.runSlot('test.batch-writer', at(30))).rejects.toThrow(/not a slot of test.batch-writer/);
    await expect(scheduler.runSlot('test.batch-writer', at(60))).rejects.toThrow(/in the future/);
    await expect(scheduler.runSlot('nope', at(0))).rejects.toThrow(/no job named "nope"/);
  });

  it('stopping mid-run finishes the current batch and hands the slot back; the next run completes it', async () => {
    const ctx = testContext(database.store, { config: { batchSize: 10 } });
    await seedItems(db, 35, at(0));
    const stopAfterSecondBatch = { scheduler: null as Scheduler | null };
    const job = batchWriterJob({ owner: 'w1', schedule: '0 * * * *', onBatch: (batch) => batch === 2 && stopAfterSecondBatch.scheduler?.stop() });
    const scheduler = new Scheduler(ctx, [job], { owner: 'w1' });
    stopAfterSecondBatch.scheduler = scheduler;
    expect((await scheduler.tick()).map((o) => o.status)).toEqual(['released']);
    expect(await effectCounts()).toMatchObject({ processed: 20, effects: 20 });
    expect(await ctx.db.selectFrom('job_runs').select(['status', 'attempt']).executeTakeFirstOrThrow()).toEqual({ status: 'pending', attempt: 0 });
    const next = new Scheduler(ctx, [batchWriterJob({ owner: 'w2', schedule: '0 * * * *' })], { owner: 'w2' });
    expect((await next.tick()).map((o) => [o.status, o.attempt])).toEqual([['succeeded', 1]]);
    expect(await effectCounts()).toEqual({ items: 35, processed: 35, effects: 35, duplicates: 0 });
  });

  it('a stop signal given to the scheduler stops it as stop() does; the counts of both runs add up in the ledger', async () => {
    const ctx = testContext(database.store, { config: { batchSize: 10 } });
    await seedItems(db, 35, at(0));
    const stop = new AbortController();
    const job = batchWriterJob({ owner: 'w1', schedule: '0 * * * *', onBatch: (batch) => batch === 2 && stop.abort('SIGTERM') });
    expect(await new Scheduler(ctx, [job], { owner: 'w1', stopSignal: stop.signal }).tick()).toMatchObject([{ status: 'released', attempt: 1, counts: { processed: 20, batches: 2 } }]);
    expect(await ctx.db.selectFrom('job_runs').select(['status', 'attempt', 'counts']).executeTakeFirstOrThrow()).toEqual({ status: 'pending', attempt: 0, counts: { processed: 20, batches: 2 } });
    // A scheduler built with a signal that has already fired claims nothing.
    expect(await new Scheduler(ctx, [job], { owner: 'w1', stopSignal: stop.signal }).tick()).toEqual([]);
    const next = await new Scheduler(ctx, [batchWriterJob({ owner: 'w2', schedule: '0 * * * *' })], { owner: 'w2' }).tick();
    expect(next).toMatchObject([{ status: 'succeeded', attempt: 1, claimedFrom: 'pending', counts: { processed: 15, batches: 2 }, slotCounts: { processed: 35, batches: 4 } }]);
    expect(await ctx.db.selectFrom('job_runs').select('counts').executeTakeFirstOrThrow()).toEqual({ counts: { processed: 35, batches: 4 } });
  });

  it('an attempt that fails after committing a batch made progress: retried after the first delay, never abandoned for it, its batches counted', async () => {
    const ctx = testContext(database.store, { config: { batchSize: 10, maxAttempts: 2, retryDelayMs: MINUTE } });
    await seedItems(db, 50, at(0));
    const scheduler = new Scheduler(ctx, [batchWriterJob({ owner: 'w1', schedule: '0 * * * *', failAfterBatches: 1 })], { owner: 'w1' });
    for (let attempt = 1; attempt <= 5; attempt += 1) {
      ctx.clock.set(at(attempt - 1));
      expect(await scheduler.tick()).toMatchObject([{ attempt, status: 'failed', attemptsWithoutProgress: 0, counts: { processed: 10, batches: 1 } }]);
      expect(await ctx.db.selectFrom('job_runs').select(['retry_at', 'counts']).executeTakeFirstOrThrow()).toEqual({ retry_at: at(attempt), counts: { processed: 10 * attempt, batches: attempt } });
    }
    ctx.clock.set(at(5));
    expect(await scheduler.tick()).toMatchObject([{ attempt: 6, claimedFrom: 'failed', status: 'succeeded', slotCounts: { processed: 50, batches: 5 } }]);
    expect(await effectCounts()).toEqual({ items: 50, processed: 50, effects: 50, duplicates: 0 });
  });

  it("hands the job a logger carrying the run's job, slot and attempt (the batch loop's lines too)", async () => {
    const lines: Record<string, unknown>[] = [];
    const log = createLogger({ level: 'debug', destination: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) } });
    const ctx = { ...testContext(database.store), log };
    let batches = 0;
    const job: JobDefinition = {
      name: 'test.logs',
      schedule: '0 * * * *',
      description: 'logs through its context',
      run: async (c, run) => {
        c.log.warn({ account: 'acct_1' }, 'something to look at');
        // One batch of one row, then nothing due.
        return runBatches(c, run, ['n'], async () => [{ accountId: 'acct_1', due: 1 }], async () => ({ selected: batches++ === 0 ? 1 : 0, n: 1 }));
      },
    };
    expect(await new Scheduler(ctx, [job], { owner: 'w1' }).tick()).toMatchObject([{ status: 'succeeded', counts: { n: 1, batches: 1 } }]);
    const run = { job: 'test.logs', slot: at(0).toISOString(), attempt: 1 };
    expect(lines).toContainEqual(expect.objectContaining({ ...run, account: 'acct_1', msg: 'something to look at' }));
    expect(lines).toContainEqual(expect.objectContaining({ ...run, batch: 1, n: 1, msg: 'batch committed' }));
  });

  it('a run that lost its claim to another worker writes nothing more and records nothing', async () => {
    const ctx = testContext(database.store, { config: { batchSize: 10 } });
    await seedItems(db, 50, at(0));
    // After the second batch another worker takes the slot over (as after a lapsed lease).
    const thief = async () => {
      await sql`UPDATE job_runs SET owner = 'thief', attempt = attempt + 1 WHERE slot = ${at(0)}`.execute(db);
    };
    let pending: Promise<void> | null = null;
    const job = batchWriterJob({ owner: 'w1', schedule: '0 * * * *', onBatch: (batch) => { if (batch === 2) pending = thief(); } });
    const wrapped: JobDefinition = { ...job, run: async (c, run) => job.run(c, { ...run, assertClaim: async (trx) => { await pending; return run.assertClaim(trx); } }) };
    const scheduler = new Scheduler(ctx, [wrapped], { owner: 'w1' });
    expect((await scheduler.tick()).map((o) => o.status)).toEqual(['lost']);
    expect(await effectCounts()).toMatchObject({ processed: 20, effects: 20 });
    expect(await ctx.db.selectFrom('job_runs').select(['owner', 'status', 'attempt']).executeTakeFirstOrThrow()).toEqual({ owner: 'thief', status: 'running', attempt: 2 });
  });

  it('gives up a slot whose worker died on the last of its attempts without progress, instead of taking it over forever', async () => {
    const ctx = testContext(database.store, { config: { maxAttempts: 3, leaseMs: 5 * MINUTE } });
    // Two attempts ended without committing anything (the last with an error), and the worker of
    // the third died before its first batch committed.
    await ctx.db
      .insertInto('job_runs')
      .values({ job: 'test.batch-writer', slot: at(0), status: 'running', attempt: 3, attempts_without_progress: 2, error: 'Error: connection reset', owner: 'crashing-worker', lease_until: at(5), started_at: at(0) })
      .execute();
    await ctx.db.insertInto('job_schedule').values({ job: 'test.batch-writer', high_water: at(0), updated_at: at(0) }).execute();
    const scheduler = new Scheduler(ctx, [batchWriterJob({ owner: 'w2', schedule: '0 * * * *' })], { owner: 'w2' });
    ctx.clock.set(at(6));
    expect(await scheduler.tick()).toEqual([
      { job: 'test.batch-writer', slot: at(0), attempt: 3, claimedFrom: null, counts: {}, status: 'abandoned', attemptsWithoutProgress: 3, error: 'the worker died on attempt 3 without committing a batch: 3 attempts in a row made no progress' },
    ]);
    const row = await ctx.db.selectFrom('job_runs').selectAll().executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'abandoned', attempt: 3, owner: 'crashing-worker', attempts_without_progress: 3 });
    expect(row.error).toMatch(/^the lease lapsed on attempt 3 before it committed a batch \(3 attempts in a row without progress\).*; last error: Error: connection reset$/);
  });

  it('takes over, rather than abandons, a slot whose worker died on its last attempt after committing a batch', async () => {
    const ctx = testContext(database.store, { config: { maxAttempts: 3, leaseMs: 5 * MINUTE } });
    await seedItems(db, 4, at(0));
    await ctx.db
      .insertInto('job_runs')
      .values({ job: 'test.batch-writer', slot: at(0), status: 'running', attempt: 3, attempts_without_progress: 0, progress_attempt: 3, counts: JSON.stringify({ processed: 6, batches: 2 }), owner: 'crashing-worker', lease_until: at(5), started_at: at(0) })
      .execute();
    await ctx.db.insertInto('job_schedule').values({ job: 'test.batch-writer', high_water: at(0), updated_at: at(0) }).execute();
    const scheduler = new Scheduler(ctx, [batchWriterJob({ owner: 'w2', schedule: '0 * * * *' })], { owner: 'w2' });
    ctx.clock.set(at(6));
    expect(await scheduler.tick()).toMatchObject([{ attempt: 4, claimedFrom: 'lapsed', status: 'succeeded', counts: { processed: 4, batches: 1 }, slotCounts: { processed: 10, batches: 3 } }]);
    expect(await ctx.db.selectFrom('job_runs').select(['status', 'attempts_without_progress', 'counts']).executeTakeFirstOrThrow()).toEqual({ status: 'succeeded', attempts_without_progress: 0, counts: { processed: 10, batches: 3 } });
  });

  it('a long catch-up claims each slot with a lease counted from the claim, not from the wake-up', async () => {
    const ctx = testContext(database.store, { config: { leaseMs: 5 * MINUTE } });
    await ctx.db.insertInto('job_schedule').values({ job: 'test.slow', high_water: at(-1), updated_at: at(-1) }).execute();
    const slow: JobDefinition = {
      name: 'test.slow',
      schedule: '* * * * *',
      description: 'takes six minutes a slot',
      run: async () => {
        ctx.clock.advance(6 * MINUTE);
        return {};
      },
    };
    const leases: { slot: Date; lease_until: Date | null; started_at: Date | null }[] = [];
    const spy: JobDefinition = {
      ...slow,
      run: async (c, run) => {
        leases.push(await c.db.selectFrom('job_runs').select(['slot', 'lease_until', 'started_at']).where('slot', '=', run.slot).executeTakeFirstOrThrow());
        return slow.run(c, run);
      },
    };
    ctx.clock.set(at(1));
    await new Scheduler(ctx, [spy], { owner: 'w1' }).tick();
    expect(leases.map((l) => l.slot.toISOString())).toEqual([at(0).toISOString(), at(1).toISOString()]);
    // The second slot was claimed six minutes after the first: its lease starts then.
    expect(leases[1]!.started_at!.getTime() - leases[0]!.started_at!.getTime()).toBe(6 * MINUTE);
    expect(leases[1]!.lease_until!.getTime()).toBe(leases[1]!.started_at!.getTime() + 5 * MINUTE);
  });

  it('refuses a lease shorter than 10 seconds', () => {
    const ctx = testContext(database.store, { config: { leaseMs: 2_000 } });
    expect(() => new Scheduler(ctx, [], { owner: 'w1' })).toThrow(/lease must be at least 10 s/);
  });

  it('runs jobs due at the same instant in registry order, and earlier slots before later ones', async () => {
    const ctx = testContext(database.store);
    const order: string[] = [];
    const job = (name: string, schedule: string): JobDefinition => ({
      name,
      schedule,
      description: name,
      run: async (_ctx, run) => {
        order.push(`${name}@${(run.slot.getTime() - REFERENCE_INSTANT.getTime()) / MINUTE}`);
        return {};
      },
    });
    const scheduler = new Scheduler(ctx, [job('b', '*/30 * * * *'), job('a', '0 * * * *')], { owner: 'w1' });
    await scheduler.tick();
    ctx.clock.set(at(60));
    order.length = 0;
    await scheduler.tick();
    expect(order).toEqual(['b@30', 'b@60', 'a@60']);
  });

  it('two workers: a job that waits for earlier jobs (the term close) is claimed only once the earlier jobs of its instant have finished on the other worker', async () => {
    const twoWorkers = async (waits: boolean) => {
      await sql`TRUNCATE job_runs, job_run_groups, job_schedule`.execute(db);
      const ctx = testContext(database.store);
      const order: string[] = [];
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let entered!: () => void;
      const inEarly = new Promise<void>((resolve) => (entered = resolve));
      const early: JobDefinition = {
        name: 'early',
        schedule: '0 * * * *',
        description: 'books money at its slot',
        run: async () => {
          entered();
          await gate;
          order.push('early');
          return {};
        },
      };
      const closing: JobDefinition = { name: 'closing', schedule: '0 * * * *', description: 'closes the books', waitsForEarlierJobs: waits, run: async () => (order.push('closing'), {}) };
      const w1 = new Scheduler(ctx, [early, closing], { owner: 'w1' });
      const w2 = new Scheduler(ctx, [early, closing], { owner: 'w2' });
      const first = w1.tick();
      await inEarly;
      // w1 holds `early` of the slot; what can w2 claim meanwhile?
      const second = await w2.tick();
      release();
      const firstOutcomes = await first;
      return { order, byW2: second.map((o) => o.job), byW1: firstOutcomes.map((o) => o.job) };
    };
    // Without the rule w2 closes the books while w1 is still booking: the race the Citus test met.
    expect(await twoWorkers(false)).toEqual({ order: ['closing', 'early'], byW2: ['closing'], byW1: ['early'] });
    // With it w2 finds nothing to claim, and w1 closes after booking.
    expect(await twoWorkers(true)).toEqual({ order: ['early', 'closing'], byW2: [], byW1: ['early', 'closing'] });
  });

  it("a batch transaction sorts with at least 64 MB, for that transaction only, never lowering the server's setting", async () => {
    const ctx = testContext(database.store);
    const seen: string[] = [];
    const showWorkMem = async (executor: Kysely<Database>) => (await sql<{ work_mem: string }>`SHOW work_mem`.execute(executor)).rows[0]!.work_mem;
    const job: JobDefinition = {
      name: 'test.work-mem',
      schedule: '*/10 * * * *',
      description: 'reads work_mem inside and after its batch',
      run: async (c, run) => {
        await c.db.transaction().execute(async (trx) => {
          await run.assertClaim(trx);
          seen.push(await showWorkMem(trx));
        });
        // A transaction that raises its own setting first keeps it (the claim never lowers it).
        await c.db.transaction().execute(async (trx) => {
          await sql`SET LOCAL work_mem = '256MB'`.execute(trx);
          await run.assertClaim(trx);
          seen.push(await showWorkMem(trx));
        });
        seen.push(await showWorkMem(c.db));
        return {};
      },
    };
    const before = await showWorkMem(ctx.db);
    const outcome = await new Scheduler(ctx, [job], { owner: 'w1' }).runSlot('test.work-mem', at(0));
    expect(outcome.status).toBe('succeeded');
    expect(seen).toEqual(['64MB', '256MB', before]);
    expect(before).not.toBe('64MB');
  });

  it('retention: succeeded slots older than the retention are deleted; each job\'s latest slot, abandoned and failed slots and other jobs\' rows stay; no deleted slot runs again', async () => {
    const DAY = 24 * 60;
    const ctx = testContext(database.store, { config: { runRetentionMs: DAY * MINUTE } });
    const scheduler = new Scheduler(ctx, [batchWriterJob({ owner: 'w1', schedule: '*/10 * * * *' }), batchWriterJob({ owner: 'w1', name: 'test.yearly', schedule: '0 0 1 1 *' })], { owner: 'w1' });
    await scheduler.tick();
    ctx.clock.set(at(30));
    await scheduler.tick();
    // What an operator or a retry still needs, and a row of a job this worker does not run.
    await sql`
      INSERT INTO job_runs (job, slot, status, attempt, error, retry_at) VALUES
        ('test.batch-writer', ${at(-60)}, 'abandoned', 5, 'boom', NULL),
        ('test.batch-writer', ${at(-50)}, 'failed', 1, 'boom', ${at(10 * DAY)}),
        ('test.other', ${at(-40)}, 'succeeded', 1, NULL, NULL)`.execute(db);
    const yearly = (await sql<{ slot: Date }>`SELECT slot FROM job_runs WHERE job = 'test.yearly'`.execute(db)).rows.map((r) => r.slot);
    expect(yearly).toHaveLength(1);
    const old = async () =>
      (await sql<{ job: string; slot: Date; status: string }>`SELECT job, slot, status FROM job_runs WHERE slot <= ${at(30)} ORDER BY job, slot`.execute(db)).rows;
    expect(await old()).toHaveLength(4 + 3 + 1);

    ctx.clock.set(at(DAY + 25)); // slots before at(25) are now older than a day
    const outcomes = await scheduler.tick();
    expect(outcomes.length).toBeGreaterThan(100);
    expect(outcomes.every((o) => o.status === 'succeeded' && o.slot > at(30))).toBe(true);
    expect(await old()).toEqual([
      { job: 'test.batch-writer', slot: at(-60), status: 'abandoned' },
      { job: 'test.batch-writer', slot: at(-50), status: 'failed' },
      { job: 'test.batch-writer', slot: at(30), status: 'succeeded' },
      { job: 'test.other', slot: at(-40), status: 'succeeded' },
      { job: 'test.yearly', slot: yearly[0]!, status: 'succeeded' },
    ]);
    // The scheduler is unaffected: the next wake-up runs only the new slot, and no slot ran twice.
    ctx.clock.set(at(DAY + 30));
    expect((await scheduler.tick()).map((o) => [o.job, o.slot.toISOString()])).toEqual([['test.batch-writer', at(DAY + 30).toISOString()]]);
    const twice = await sql`SELECT job, slot FROM test_slot_runs GROUP BY job, slot HAVING count(*) > 1`.execute(db);
    expect(twice.rows).toEqual([]);
    expect(await scheduler.pruneLedger(at(DAY + 31))).toBe(1); // at(30) itself, a minute later older than a day
  });

  it('without a retention the ledger keeps every slot; a retention shorter than the backfill window is refused', async () => {
    const ctx = testContext(database.store);
    const scheduler = new Scheduler(ctx, [batchWriterJob({ owner: 'w1', schedule: '*/10 * * * *' })], { owner: 'w1' });
    await scheduler.tick();
    ctx.clock.set(at(30));
    await scheduler.tick();
    expect(await scheduler.pruneLedger(at(365 * 24 * 60))).toBe(0);
    expect((await sql`SELECT 1 FROM job_runs`.execute(db)).rows).toHaveLength(4);
    const short = testContext(database.store, { config: { runRetentionMs: 60 * MINUTE, backfillWindowMs: 120 * MINUTE } });
    expect(() => new Scheduler(short, [], { owner: 'w1' })).toThrow(/retention must be at least the backfill window/);
  });

  it('KESSAI_JOB_RUN_RETENTION_DAYS: 30 days unless set; a whole number of days from 1', () => {
    expect(runRetentionMs(undefined)).toBe(30 * 86_400_000);
    expect(runRetentionMs('7')).toBe(7 * 86_400_000);
    for (const bad of ['0', '-1', '1.5', 'week']) expect(() => runRetentionMs(bad)).toThrow(/KESSAI_JOB_RUN_RETENTION_DAYS/);
  });
});

// Real concurrency and a real crash need separate processes on one server; PGlite is an
// in-process database, so these run where PostgreSQL is available (always in CI).
describe.runIf(isPostgres())('scheduler across processes (PostgreSQL)', () => {
  const workerScript = fileURLToPath(new URL('../support/worker-process.ts', import.meta.url));

  const startWorker = (env: Record<string, string>) => spawnWorker(workerScript, database.url!, env);

  it('two schedulers in two processes run each slot exactly once', async () => {
    await seedItems(db, 2_000, at(0));
    // Both wake at minute 30 after a downtime: 31 per-minute slots (minute 0 to 30) to share.
    await db.insertInto('job_schedule').values({ job: 'test.batch-writer', high_water: at(-1), updated_at: at(-1) }).execute();
    const env = { KESSAI_AT: at(30).toISOString(), KESSAI_BATCH_SIZE: '50' };
    const workers = [startWorker({ ...env, KESSAI_OWNER: 'proc-a' }), startWorker({ ...env, KESSAI_OWNER: 'proc-b' })];
    const results = await Promise.all(workers.map((w) => w.exited));
    for (const [i, result] of results.entries()) expect(result, workers[i]!.errors()).toEqual({ code: 0, signal: null });

    // 31 slots (minute 0..30 of a per-minute job, within the backfill window), each run once.
    const runs = await slotRuns();
    const slots = runs.map((r) => r.slot.toISOString());
    expect(new Set(slots).size).toBe(slots.length);
    const ledger = await sql<{ n: number; ok: number }>`SELECT count(*) AS n, count(*) FILTER (WHERE status = 'succeeded') AS ok FROM job_runs WHERE slot >= ${at(0)}`.execute(db);
    expect(ledger.rows[0]).toEqual({ n: 31, ok: 31 });
    expect(runs.filter((r) => r.slot.getTime() >= at(0).getTime())).toHaveLength(31);
    expect(await effectCounts()).toEqual({ items: 2_000, processed: 2_000, effects: 2_000, duplicates: 0 });
  });

  it('a worker killed with SIGKILL mid-slot leaves no partial batch, and the slot completes on the next run', async () => {
    await seedItems(db, 500, at(0));
    // An hourly job, so that no later slot of it comes due during the test and picks up the work.
    const env = { KESSAI_AT: at(0).toISOString(), KESSAI_BATCH_SIZE: '40', KESSAI_PAUSE_MS: '300', KESSAI_LEASE_MS: String(5 * MINUTE), KESSAI_SCHEDULE: '0 * * * *' };
    const victim = startWorker({ ...env, KESSAI_OWNER: 'victim' });
    await new Promise<void>((resolve) => {
      const poll = setInterval(() => {
        if (victim.output().includes('batch 2 committed')) {
          clearInterval(poll);
          victim.child.kill('SIGKILL');
          resolve();
        }
      }, 20);
    });
    expect(await victim.exited).toMatchObject({ signal: 'SIGKILL' });

    // Whole batches only: every processed item has its effect and no effect lacks its item.
    const partial = await effectCounts();
    expect(partial.processed).toBe(partial.effects);
    expect(partial.processed % 40).toBe(0);
    expect(partial.processed).toBeLessThan(500);
    const stuck = await sql<{ status: string; owner: string }>`SELECT status, owner FROM job_runs WHERE slot = ${at(0)}`.execute(db);
    expect(stuck.rows[0]).toEqual({ status: 'running', owner: 'victim' });

    // Within the lease nobody takes the slot; after it, the next worker finishes the work.
    const early = startWorker({ ...env, KESSAI_OWNER: 'early', KESSAI_AT: at(4).toISOString(), KESSAI_PAUSE_MS: '0' });
    expect(await early.exited).toEqual({ code: 0, signal: null });
    expect((await effectCounts()).processed).toBe(partial.processed);
    const rescuer = startWorker({ ...env, KESSAI_OWNER: 'rescuer', KESSAI_AT: at(6).toISOString(), KESSAI_PAUSE_MS: '0' });
    expect(await rescuer.exited, rescuer.errors()).toEqual({ code: 0, signal: null });
    expect(await effectCounts()).toEqual({ items: 500, processed: 500, effects: 500, duplicates: 0 });
    const done = await sql<{ status: string; owner: string; attempt: number }>`SELECT status, owner, attempt FROM job_runs WHERE slot = ${at(0)}`.execute(db);
    expect(done.rows[0]).toEqual({ status: 'succeeded', owner: 'rescuer', attempt: 2 });
  });
});
