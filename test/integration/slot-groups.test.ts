/**
 * Several workers share one slot through its account groups (src/engine/slot-groups.ts), and a
 * group whose work fails is left for the slot's next attempt while the other groups complete. Real
 * processes on one PostgreSQL server (test/support/renewal-worker-process.ts), gated, never timed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/schema';
import { createTestDatabase, isPostgres, REFERENCE_INSTANT, type TestDatabase } from '../support/database';
import { seedDueSubscriptions, tallyRenewals } from '../support/renewal-seed';
import { PARTIAL_EXIT_CODE } from '../../src/cli/job-commands';
import { spawnKessai, spawnWorker, until, type SpawnedWorker } from '../support/spawn-worker';

const JOB = 'subscriptions.renew';
const MINUTE = 60_000;
const at = (minutes: number): Date => new Date(REFERENCE_INSTANT.getTime() + minutes * MINUTE);
/** An approved card the worker process's network is told to fail on (KESSAI_FAIL_CARD): its batch throws. */
const FAILING_CARD = '5555555555554444';

let database: TestDatabase;
let db: Kysely<Database>;

describe.runIf(isPostgres())('one slot shared by worker processes (PostgreSQL)', () => {
  const workerScript = fileURLToPath(new URL('../support/renewal-worker-process.ts', import.meta.url));
  const startWorker = (env: Record<string, string>): SpawnedWorker => spawnWorker(workerScript, database.url!, env);
  /** The JSON line a worker process prints last: its outcomes. */
  const outcomesOf = (worker: SpawnedWorker): { status: string; slot: string; counts: Record<string, number>; [key: string]: unknown }[] =>
    (JSON.parse(worker.output().trim().split('\n').at(-1)!) as { outcomes: never[] }).outcomes;

  beforeAll(async () => {
    database = await createTestDatabase();
    db = database.store.db;
  });
  afterAll(async () => database?.drop());
  beforeEach(async () => {
    await sql`TRUNCATE plans, subscriptions, charges, refunds, terms, customers, cards, events, job_runs, job_run_groups, job_schedule`.execute(db);
    // One slot only: minute 0.
    await db.insertInto('job_schedule').values({ job: JOB, high_water: at(-1), updated_at: at(-1) }).execute();
  });

  for (const processes of [2, 3]) {
    it(`${processes} processes on one slot share its account groups; every due subscription is charged exactly once`, async () => {
      await seedDueSubscriptions(db, { count: 1_200, dueAt: at(0), accounts: 12 });
      // Every worker's first batch waits, its rows locked, until all of them are in a batch: the
      // slot's work is done by all at once. The lead starts first, so the groups exist when the
      // others look for work.
      const meeting = mkdtempSync(join(tmpdir(), 'kessai-rendezvous-'));
      const env = { KESSAI_AT: at(0).toISOString(), KESSAI_BATCH_SIZE: '50', KESSAI_PAUSE_MS: '5', KESSAI_RENDEZVOUS: `${meeting}:${processes}` };
      const lead = startWorker({ ...env, KESSAI_OWNER: 'lead' });
      await until(lead, () => lead.output().includes('batch 1 authorizing'));
      const helpers = Array.from({ length: processes - 1 }, (_, i) => startWorker({ ...env, KESSAI_OWNER: `helper-${i + 1}` }));
      const workers = [lead, ...helpers];
      const results = await Promise.all(workers.map((w) => w.exited));
      rmSync(meeting, { recursive: true, force: true });
      for (const [i, result] of results.entries()) expect(result, workers[i]!.errors()).toEqual({ code: 0, signal: null });

      const [leadOutcome] = outcomesOf(lead);
      expect(leadOutcome).toMatchObject({ status: 'succeeded', slot: at(0).toISOString(), slotCounts: { renewed: 1_200, failed: 0 } });
      const renewedBy = workers.map((worker) => outcomesOf(worker).reduce((sum, outcome) => sum + (outcome.counts.renewed ?? 0), 0));
      for (const helper of helpers) expect(outcomesOf(helper).map((outcome) => outcome.status)).toEqual(['shared']);
      // Every process renewed part of the one slot, and together exactly all of it.
      for (const renewed of renewedBy) expect(renewed).toBeGreaterThan(0);
      expect(renewedBy.reduce((a, b) => a + b, 0)).toBe(1_200);

      expect(await tallyRenewals(db, at(0))).toEqual({ subscriptions: 1_200, renewed: 1_200, charges: 1_200, charged_twice: 0, mismatched: 0, renewed_events: 1_200, charge_events: 1_200 });
      const ledger = await db.selectFrom('job_runs').select(['slot', 'status', 'counts']).where('job', '=', JOB).execute();
      expect(ledger).toEqual([{ slot: at(0), status: 'succeeded', counts: expect.objectContaining({ renewed: 1_200 }) }]);
      const groups = await sql<{ status: string; n: number }>`SELECT status, count(*)::int AS n FROM job_run_groups WHERE job = ${JOB} GROUP BY status`.execute(db);
      expect(groups.rows).toEqual([{ status: 'done', n: 12 }]);
    });
  }

  it("a group whose work fails stays pending while the other groups complete; the slot's next attempt does it, nothing twice", async () => {
    // acct_r0 … acct_r4: 100 each; acct_r0 also 20 on a card whose batches fail as an unreachable node would.
    await seedDueSubscriptions(db, { count: 500, dueAt: at(0), accounts: 5 });
    await seedDueSubscriptions(db, { count: 20, dueAt: at(0), accounts: 1, prefix: 'x', cardNumber: FAILING_CARD });
    // Two owners: the ids a worker process makes follow its owner's name (as two real workers' differ).
    const env = { KESSAI_BATCH_SIZE: '50' };
    const first = startWorker({ ...env, KESSAI_OWNER: 'first', KESSAI_AT: at(0).toISOString(), KESSAI_FAIL_CARD: FAILING_CARD, KESSAI_FAIL_CODE: '08006' });
    expect(await first.exited, first.errors()).toEqual({ code: 0, signal: null });
    expect(outcomesOf(first)).toEqual([
      expect.objectContaining({ status: 'partial', slot: at(0).toISOString(), pendingGroups: 1, pendingAccounts: 1, attemptsWithoutProgress: 0, error: expect.stringContaining('acct_r0') }),
    ]);
    // Every other account's subscriptions renewed in that run; acct_r0's x subscriptions none.
    const byAccount = async () =>
      (await sql<{ account_id: string; renewed: number }>`
        SELECT account_id, count(*) FILTER (WHERE renews_at > ${at(0)})::int AS renewed FROM subscriptions GROUP BY account_id ORDER BY account_id`.execute(db)).rows;
    const afterFirst = await byAccount();
    expect(afterFirst.slice(1)).toEqual(['acct_r1', 'acct_r2', 'acct_r3', 'acct_r4'].map((account_id) => ({ account_id, renewed: 100 })));
    expect((await tallyRenewals(db, at(0), 'x')).renewed).toBe(0);
    // The slot's record says what is pending, and an outage does not count toward abandonment.
    expect(await db.selectFrom('job_runs').select(['status', 'attempts_without_progress', 'retry_at']).where('job', '=', JOB).where('slot', '=', at(0)).executeTakeFirstOrThrow()).toEqual({
      status: 'failed',
      attempts_without_progress: 0,
      retry_at: new Date(at(0).getTime() + MINUTE),
    });
    expect(await db.selectFrom('job_run_groups').select(['accounts', 'status', 'unavailable']).where('status', '<>', 'done').execute()).toEqual([{ accounts: ['acct_r0'], status: 'failed', unavailable: true }]);

    // The node is back: the next run retries the slot and does only the pending group.
    const second = startWorker({ ...env, KESSAI_OWNER: 'second', KESSAI_AT: at(2).toISOString() });
    expect(await second.exited, second.errors()).toEqual({ code: 0, signal: null });
    expect(outcomesOf(second)[0]).toMatchObject({ status: 'succeeded', slot: at(0).toISOString(), claimedFrom: 'failed', slotCounts: { renewed: 520 } });
    expect(await tallyRenewals(db, at(0))).toEqual({ subscriptions: 500, renewed: 500, charges: 500, charged_twice: 0, mismatched: 0, renewed_events: 500, charge_events: 500 });
    expect(await tallyRenewals(db, at(0), 'x')).toMatchObject({ subscriptions: 20, renewed: 20, charged_twice: 0, mismatched: 0 });
    const charges = await sql<{ n: number }>`SELECT count(*)::int AS n FROM charges`.execute(db);
    expect(charges.rows[0]!.n).toBe(520);
  });

  it('a group failing for an unreachable node never brings its slot closer to abandonment; any other error does', async () => {
    await seedDueSubscriptions(db, { count: 20, dueAt: at(0), accounts: 1, prefix: 'x', cardNumber: FAILING_CARD });
    const env = { KESSAI_BATCH_SIZE: '50', KESSAI_FAIL_CARD: FAILING_CARD };
    const ledger = () => db.selectFrom('job_runs').select(['status', 'attempt', 'attempts_without_progress']).where('job', '=', JOB).where('slot', '=', at(0)).executeTakeFirstOrThrow();
    const outage = startWorker({ ...env, KESSAI_OWNER: 'first', KESSAI_AT: at(0).toISOString(), KESSAI_FAIL_CODE: '08006' });
    expect(await outage.exited, outage.errors()).toEqual({ code: 0, signal: null });
    expect(outcomesOf(outage)[0]).toMatchObject({ status: 'partial', attemptsWithoutProgress: 0 });
    expect(await ledger()).toEqual({ status: 'failed', attempt: 1, attempts_without_progress: 0 });
    const broken = startWorker({ ...env, KESSAI_OWNER: 'second', KESSAI_AT: at(2).toISOString() });
    expect(await broken.exited, broken.errors()).toEqual({ code: 0, signal: null });
    expect(outcomesOf(broken)[0]).toMatchObject({ status: 'partial', slot: at(0).toISOString(), attemptsWithoutProgress: 1 });
    expect(await ledger()).toEqual({ status: 'failed', attempt: 2, attempts_without_progress: 1 });
    expect((await tallyRenewals(db, at(0), 'x')).charges).toBe(0);
  });

  it('kessai worker --once exits 3 and prints PARTIAL when one account group fails and every other is done; 0 once the retry has done it, nothing twice', async () => {
    await seedDueSubscriptions(db, { count: 200, dueAt: at(0), accounts: 2 });
    // acct_r0's renewals fail in the database as an unreachable node's would: its group is left pending.
    await sql`CREATE FUNCTION refuse_acct_r0() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'acct_r0 refused by the test' USING ERRCODE = '08006'; END $$`.execute(db);
    await sql`CREATE TRIGGER refuse_acct_r0 BEFORE UPDATE ON subscriptions FOR EACH ROW WHEN (NEW.account_id = 'acct_r0') EXECUTE FUNCTION refuse_acct_r0()`.execute(db);
    const env = { DATABASE_URL: database.url! };
    const first = spawnKessai(['worker', '--once', '--at', at(0).toISOString(), '--batch-size', '50'], env);
    const firstExit = await first.exited;
    expect(firstExit, `${first.output()}${first.errors()}`).toEqual({ code: PARTIAL_EXIT_CODE, signal: null });
    expect(first.output()).toMatch(new RegExp(`${JOB} @ ${at(0).toISOString()}: PARTIAL: committed \\{"renewed":100`));
    const renewed = async (account: string) =>
      (await sql<{ n: number }>`SELECT count(*)::int AS n FROM subscriptions WHERE account_id = ${account} AND renews_at > ${at(0)}`.execute(db)).rows[0]!.n;
    expect([await renewed('acct_r0'), await renewed('acct_r1')]).toEqual([0, 100]);

    await sql`DROP TRIGGER refuse_acct_r0 ON subscriptions`.execute(db);
    const second = spawnKessai(['worker', '--once', '--at', at(2).toISOString(), '--batch-size', '50'], env);
    const secondExit = await second.exited;
    expect(secondExit, `${second.output()}${second.errors()}`).toEqual({ code: 0, signal: null });
    expect(await tallyRenewals(db, at(0))).toMatchObject({ subscriptions: 200, renewed: 200, charges: 200, charged_twice: 0, mismatched: 0 });
  });
});
