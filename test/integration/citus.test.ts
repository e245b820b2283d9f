/**
 * kessai on Citus (issue 18): `migrate --citus`, every job over several accounts with two
 * workers, exactly once, and the same books as a single PostgreSQL.
 *
 * Runs only when KESSAI_TEST_CITUS_URL names a database on a Citus coordinator that has the
 * extension and its workers registered (README, "Running on Citus"). Citus is not packaged for
 * this project's machines and CI has no cluster, so without the variable the file is skipped; the
 * rules that keep kessai Citus-ready are checked on plain PostgreSQL by account-scoped-jobs.test.ts,
 * migration-rules.test.ts and migrations.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { citusNodes, distributeAccountTables, joinCitusCluster } from '../../src/db/citus';
import { openStore, type Store } from '../../src/db/connect';
import { migrate, SQL_DIR } from '../../src/db/migrate';
import type { Database } from '../../src/db/schema';
import { seededIds } from '../../src/domain/ids';
import { FixedClock } from '../../src/engine/clock';
import { createContext } from '../../src/engine/context';
import { nextSlotAfter } from '../../src/engine/cron';
import { silentLogger } from '../../src/engine/logger';
import { Scheduler } from '../../src/engine/scheduler';
import { simulatedCardNetwork } from '../../src/processor/card-network';
import { EVERY_JOB_ACCOUNTS, idleJobs, simulateEveryJob } from '../support/every-job-accounts';

const citusUrl = process.env.KESSAI_TEST_CITUS_URL;
const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
const ENGINE_TABLES = ['job_runs', 'job_schedule', 'kessai_migrations'];

/** A fresh database on the coordinator and its workers, a member of the cluster; dropped after the file. */
const created: string[] = [];
async function freshCitusDatabase(): Promise<string> {
  const name = `kessai_citus_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: citusUrl });
  await admin.connect();
  try {
    const nodes = await citusNodes(admin);
    await admin.query('SET citus.enable_create_database_propagation = on');
    await admin.query(`CREATE DATABASE ${name}`);
    created.push(name);
    const url = new URL(citusUrl!);
    url.pathname = `/${name}`;
    await joinCitusCluster(url.toString(), nodes);
    return url.toString();
  } finally {
    await admin.end();
  }
}

async function distributedTables(db: Kysely<Database>): Promise<{ table: string; colocated: boolean }[]> {
  const result = await sql<{ table: string; colocated: boolean }>`
    SELECT p.logicalrelid::text AS table, p.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'accounts'::regclass) AS colocated
    FROM pg_dist_partition p ORDER BY 1`.execute(db);
  return result.rows;
}

/** Every table with an account_id column, from the catalogue. */
async function accountTables(db: Kysely<Database>): Promise<string[]> {
  const result = await sql<{ table_name: string }>`
    SELECT c.table_name FROM information_schema.columns c JOIN information_schema.tables t USING (table_schema, table_name)
    WHERE c.table_schema = 'public' AND c.column_name = 'account_id' AND t.table_type = 'BASE TABLE' ORDER BY 1`.execute(db);
  return result.rows.map((row) => row.table_name);
}

/**
 * The books, without ids: per account, charges by status (count, yen, captured yen), refunds,
 * statements by owner and type (count, net), balances by state (count, net), subscriptions by
 * status, and any event written twice for one resource at one instant (exactly once: a row done
 * twice would write its event twice, at its own due instant both times).
 */
async function books(db: Kysely<Database>): Promise<unknown> {
  const rows = async (query: ReturnType<typeof sql>) => (await query.execute(db)).rows;
  return {
    charges: await rows(sql`SELECT account_id, paid, captured, refunded, released_at IS NOT NULL AS released, failure_code, count(*)::int AS n, sum(amount)::bigint AS yen, coalesce(sum(amount_captured), 0)::bigint AS captured_yen
      FROM charges GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6`),
    charged_twice: await rows(sql`SELECT account_id, subscription_id, period_start FROM charges WHERE subscription_id IS NOT NULL GROUP BY 1, 2, 3 HAVING count(*) > 1`),
    refunds: await rows(sql`SELECT account_id, count(*)::int AS n, sum(amount)::bigint AS yen FROM refunds GROUP BY 1 ORDER BY 1`),
    statements: await rows(sql`SELECT account_id, owner, type, count(*)::int AS n, sum(net)::bigint AS net FROM statements GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`),
    balances: await rows(sql`SELECT account_id, state, closed, count(*)::int AS n, sum(net)::bigint AS net FROM balances GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`),
    subscriptions: await rows(sql`SELECT account_id, status, count(*)::int AS n, min(renews_at) AS first_due FROM subscriptions GROUP BY 1, 2 ORDER BY 1, 2`),
    flows: await rows(sql`SELECT account_id, status, count(*)::int AS n FROM payment_flows GROUP BY 1, 2 ORDER BY 1, 2`),
    sessions: await rows(sql`SELECT account_id, status, count(*)::int AS n FROM checkout_sessions GROUP BY 1, 2 ORDER BY 1, 2`),
    terms: await rows(sql`SELECT account_id, closed, count(*)::int AS n FROM terms GROUP BY 1, 2 ORDER BY 1, 2`),
    events_twice: await rows(sql`SELECT account_id, resource_id, type, created_at FROM events GROUP BY 1, 2, 3, 4 HAVING count(*) > 1`),
  };
}

/**
 * The scenario simulated up to mid-January (one worker), then every job run for the slots of
 * 2027-02-01 00:00 JST by two workers at once (two schedulers with their own connection pools and
 * id streams, each given the slot and the one after it), then the books.
 */
async function twoWorkersAfterSimulation(serverUrl: string | undefined): Promise<{ books: unknown; worked: string[] }> {
  return simulateEveryJob(serverUrl, async (world) => {
    const stores: Store[] = [];
    if (serverUrl) {
      const name = (await sql<{ db: string }>`SELECT current_database() AS db`.execute(world.ctx.db)).rows[0]!.db;
      const url = new URL(serverUrl);
      url.pathname = `/${name}`;
      stores.push(await openStore({ databaseUrl: url.toString(), poolSize: 3 }), await openStore({ databaseUrl: url.toString(), poolSize: 3 }));
    }
    try {
      const slot = new Date('2027-01-31T15:00:00.000Z');
      const workers = [0, 1].map((i) => {
        const store = stores[i] ?? world.ctx.store;
        const ctx = createContext({
          db: store.db,
          store,
          // The later of the two slots has come (a slot runs only once its instant has).
          clock: new FixedClock(new Date(slot.getTime() + 24 * 60 * 60 * 1000)),
          ids: seededIds(100 + i),
          processor: simulatedCardNetwork({ seed: 7 }),
          log: silentLogger(),
          config: { batchSize: 2 },
        });
        return new Scheduler(ctx, ALL_JOBS, { owner: `worker-${i}` });
      });
      const worked: string[] = [];
      for (const job of ALL_JOBS) {
        const slots = [slot, nextSlotAfter(job.schedule, slot)];
        const outcomes = await Promise.all(workers.map((worker, i) => worker.runSlot(job.name, slots[i]!)));
        for (const outcome of outcomes) expect(outcome.status, `${job.name}: ${JSON.stringify(outcome)}`).toBe('succeeded');
        if (outcomes.some((outcome) => outcome.status === 'succeeded' && (outcome.counts.batches ?? 0) > 0)) worked.push(job.name);
      }
      return { books: await books(world.ctx.db), worked };
    } finally {
      for (const store of stores) await store.close();
    }
  }, new Date('2027-01-12T00:00:00+09:00'));
}

describe.skipIf(!citusUrl)('kessai on Citus (KESSAI_TEST_CITUS_URL)', () => {
  const scratch: string[] = [];
  afterAll(async () => {
    scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true }));
    if (!citusUrl) return;
    const admin = new pg.Client({ connectionString: citusUrl });
    await admin.connect();
    try {
      await admin.query('SET citus.enable_create_database_propagation = on');
      for (const name of created) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } finally {
      await admin.end();
    }
  });

  it('kessai migrate --citus distributes every account table colocated with accounts and keeps the engine tables local; a second run distributes nothing', async () => {
    const url = await freshCitusDatabase();
    const run = () => spawnSync(process.execPath, [BIN, 'migrate', '--citus'], { env: { ...process.env, DATABASE_URL: url }, encoding: 'utf8' });
    const first = run();
    expect(first.status, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/citus: distributed accounts, /);
    const store = await openStore({ databaseUrl: url });
    try {
      const distributed = await distributedTables(store.db);
      expect(distributed.map((t) => t.table)).toEqual(await accountTables(store.db));
      expect(distributed.every((t) => t.colocated)).toBe(true);
      expect(distributed.length).toBeGreaterThanOrEqual(23);
      for (const table of ENGINE_TABLES) expect(distributed.map((t) => t.table)).not.toContain(table);
    } finally {
      await store.close();
    }
    const second = run();
    expect(second.status, second.stderr).toBe(0);
    expect(second.stdout).toMatch(/citus: distributed nothing new/);
  });

  it('migrations that land after distribution apply, and the tables they add are distributed by the next migrate --citus', async () => {
    const url = await freshCitusDatabase();
    const dir = mkdtempSync(join(tmpdir(), 'kessai-citus-sql-'));
    scratch.push(dir);
    // The landed files first (000001–000010), distributed; then the rest and a new account table.
    for (const file of readdirSync(SQL_DIR).filter((f) => f.endsWith('.sql') && f <= '000010_')) cpSync(join(SQL_DIR, file), join(dir, file));
    const store = await openStore({ databaseUrl: url });
    try {
      await migrate(store, dir);
      const first = (await distributeAccountTables(store)).distributed;
      expect(first).toContain('charges');
      for (const file of readdirSync(SQL_DIR).filter((f) => f.endsWith('.sql'))) cpSync(join(SQL_DIR, file), join(dir, file));
      writeFileSync(join(dir, '999999_probe_table.sql'), 'CREATE TABLE probe_notes (account_id text NOT NULL, note_id text NOT NULL, CONSTRAINT probe_notes_pkey PRIMARY KEY (account_id, note_id));');
      const later = await migrate(store, dir);
      expect(later.applied).toContain('999999_probe_table.sql');
      // The account tables of the later migrations (webhooks, idempotency keys, …) and the probe; none twice.
      const second = (await distributeAccountTables(store)).distributed;
      expect(second).toContain('probe_notes');
      expect(second.filter((table) => first.includes(table))).toEqual([]);
      expect((await distributedTables(store.db)).find((t) => t.table === 'probe_notes')).toEqual({ table: 'probe_notes', colocated: true });
    } finally {
      await store.close();
    }
  });

  it('every job over three accounts, simulated on a Citus scratch database, then run by two workers at once: nothing done twice, the same books as single PostgreSQL', async () => {
    // simulate --database-url on the coordinator: its scratch database is a distributed one.
    const citus = await simulateEveryJob(citusUrl!, async (world) => ({
      distributed: (await distributedTables(world.ctx.db)).length,
      idle: idleJobs(world),
      books: await books(world.ctx.db),
    }));
    expect(citus.distributed).toBeGreaterThanOrEqual(23);
    expect(citus.idle).toEqual([]);
    const reference = await simulateEveryJob(process.env.DATABASE_URL, async (world) => books(world.ctx.db));
    expect(citus.books).toEqual(reference);
    expect(citus.books).toMatchObject({ charged_twice: [], events_twice: [] });

    const twoOnCitus = await twoWorkersAfterSimulation(citusUrl);
    // No subscription of this world renews at these two slots (single PostgreSQL's two workers renew nothing either).
    expect(twoOnCitus.worked).toEqual(expect.arrayContaining(['charges.reauthorize', 'charges.expire_holds', 'payment_flows.expire_holds', 'checkout_sessions.expire', 'terms.close']));
    expect(twoOnCitus.books).toMatchObject({ charged_twice: [], events_twice: [] });
    // Three accounts' worth of every kind of work, each done once: the same books as the same two workers on single PostgreSQL (PGlite without DATABASE_URL).
    const reference2 = await twoWorkersAfterSimulation(process.env.DATABASE_URL);
    expect(twoOnCitus.books).toEqual(reference2.books);
    expect(EVERY_JOB_ACCOUNTS.every((account) => JSON.stringify(twoOnCitus.books).includes(account))).toBe(true);
  }, 900_000);
});
