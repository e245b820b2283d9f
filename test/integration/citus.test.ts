/**
 * kessai on Citus: `migrate --citus`, every job over several accounts with two
 * workers, exactly once, and the same books as a single PostgreSQL.
 *
 * Runs only when KESSAI_TEST_CITUS_URL names a database on a Citus coordinator that has the
 * extension and its workers registered (docs/citus.md). Citus is not packaged for
 * this project's machines and CI has no cluster, so without the variable the file is skipped (and
 * on PGlite, which cannot host the single-PostgreSQL reference's two worker processes); the
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
import { afterAll, describe, expect, inject, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { accountShards, citusNodes, distributeAccountTables, joinCitusCluster } from '../../src/db/citus';
import { openStore } from '../../src/db/connect';
import { isDatabaseUnavailable } from '../../src/db/errors';
import { migrate, SQL_DIR } from '../../src/db/migrate';
import type { Database } from '../../src/db/schema';
import { createAccount } from '../../src/accounts/accounts';
import { runOperation } from '../../src/api/operations';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { testContext } from '../support/database';
import { EVERY_JOB_ACCOUNTS, idleJobs, simulateEveryJob } from '../support/every-job-accounts';
import { spawnKessai } from '../support/spawn-worker';
import { renewBatch } from '../../src/subscriptions/renewals';
import { subscriptionRenewalsJob } from '../../jobs/subscription-renewals';
import { holdExpiryJob } from '../../jobs/hold-expiry';
import { Scheduler } from '../../src/engine/scheduler';
import { simulatedCardNetwork, type CardNetwork } from '../../src/processor/card-network';
import { seedDueSubscriptions, tallyRenewals } from '../support/renewal-seed';
import { addEndpoint } from '../../src/webhooks/endpoints';
import { webhookDeliveryJob } from '../../jobs/webhook-delivery';
import { startReceiver } from '../support/webhook-receiver';

const citusUrl = process.env.KESSAI_TEST_CITUS_URL;
/**
 * The single PostgreSQL server the Citus books are compared with: the tests' own server
 * (DATABASE_URL or a container). Two worker processes need a server, so on PGlite the
 * comparison cannot run and neither does this file.
 */
const backend = inject('kessaiBackend');
const singleUrl = backend.kind === 'postgres' ? backend.serverUrl : undefined;
const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
const ENGINE_TABLES = ['job_runs', 'job_schedule', 'kessai_migrations'];

/** A fresh database on the coordinator and its workers, a member of the cluster; dropped after the file. */
const created: string[] = [];
/** A fresh database on the cluster, migrated, with the account tables distributed. */
async function distributedCitusDatabase(): Promise<string> {
  const url = await freshCitusDatabase();
  const setup = await openStore({ databaseUrl: url });
  try {
    await migrate(setup);
    await distributeAccountTables(setup);
  } finally {
    await setup.close();
  }
  return url;
}

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
 * status, and any event written twice for one resource at one instant in one API version (settlement events are written in both; exactly once: a row done
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
    events_twice: await rows(sql`SELECT account_id, resource_id, type, api_version, created_at FROM events GROUP BY 1, 2, 3, 4, 5 HAVING count(*) > 1 ORDER BY 1, 2, 3, 4, 5`),
  };
}

/** 2027-02-03 00:00 JST: the slot of every job the two workers run (subscribers of Jan 1–3 are due for renewal). */
const SLOT = new Date('2027-02-02T15:00:00.000Z');

/**
 * The scenario simulated up to mid-January, then two real `kessai worker --once` processes on
 * the same database at once, both at 2027-02-03 00:00:30 JST: they share the jobs' slots of 00:00
 * through the run ledger. Every job's schedule is set to start there (the ledger's high water),
 * so each job runs that one slot. Then the books and the due renewals (each must have exactly one
 * charge for its period).
 */
async function twoWorkersAfterSimulation(serverUrl: string): Promise<{ books: unknown; worked: string[]; due: number; renewedOnce: boolean }> {
  return simulateEveryJob(serverUrl, async (world) => {
    const db = world.ctx.db;
    const name = (await sql<{ db: string }>`SELECT current_database() AS db`.execute(db)).rows[0]!.db;
    const url = new URL(serverUrl);
    url.pathname = `/${name}`;
    const highWater = new Date(SLOT.getTime() - 1);
    await sql`
      INSERT INTO job_schedule (job, high_water, updated_at) SELECT j, ${highWater}, ${highWater} FROM unnest(${ALL_JOBS.map((job) => job.name)}::text[]) AS j
      ON CONFLICT (job) DO UPDATE SET high_water = excluded.high_water`.execute(db);
    const due = (
      await sql<{ account_id: string; subscription_id: string; renews_at: Date }>`
      SELECT account_id, subscription_id, renews_at FROM subscriptions WHERE renews_at <= ${SLOT}`.execute(db)
    ).rows;
    const at = new Date(SLOT.getTime() + 30_000).toISOString();
    const workers = [0, 1].map(() => spawnKessai(['worker', '--once', '--at', at, '--batch-size', '2'], { DATABASE_URL: url.toString() }));
    const exits = await Promise.all(workers.map((worker) => worker.exited));
    exits.forEach((exit, i) => expect(exit, `worker-${i}: ${workers[i]!.output()}${workers[i]!.errors()}`).toEqual({ code: 0, signal: null }));
    const runs = await sql<{ job: string; status: string; batches: number }>`
      SELECT job, status, coalesce((counts->>'batches')::int, 0) AS batches FROM job_runs WHERE slot >= ${SLOT} ORDER BY job, slot`.execute(db);
    const ledger = async () => JSON.stringify((await sql`SELECT * FROM job_runs WHERE slot >= ${SLOT} ORDER BY job, slot`.execute(db)).rows);
    const printed = workers.map((worker) => worker.output() + worker.errors()).join('\n');
    for (const run of runs.rows) if (run.status !== 'succeeded') expect.fail(`${JSON.stringify(run)} not succeeded; ledger ${await ledger()}; workers printed:\n${printed}`);
    const worked = [...new Set(runs.rows.filter((run) => run.batches > 0).map((run) => run.job))];
    // Each due subscription: exactly one charge for the period that began at its due instant, and no
    // longer due. Read whole and compared here (plain multi-shard reads, which Citus runs anywhere).
    const key = (account: string, subscription: string, at: Date) => `${account}/${subscription}/${at.toISOString()}`;
    const charges = (await sql<{ account_id: string; subscription_id: string; period_start: Date }>`
      SELECT account_id, subscription_id, period_start FROM charges WHERE subscription_id IS NOT NULL`.execute(db)).rows;
    const chargesOf = new Map<string, number>();
    for (const c of charges) chargesOf.set(key(c.account_id, c.subscription_id, c.period_start), (chargesOf.get(key(c.account_id, c.subscription_id, c.period_start)) ?? 0) + 1);
    const now = new Map((await sql<{ account_id: string; subscription_id: string; renews_at: Date | null }>`
      SELECT account_id, subscription_id, renews_at FROM subscriptions`.execute(db)).rows.map((row) => [`${row.account_id}/${row.subscription_id}`, row.renews_at]));
    const renewedOnce = due.every((d) => {
      const next = now.get(`${d.account_id}/${d.subscription_id}`);
      return chargesOf.get(key(d.account_id, d.subscription_id, d.renews_at)) === 1 && (next === null || (next !== undefined && next > SLOT));
    });
    return {
      books: await books(db),
      worked,
      due: due.length,
      renewedOnce,
    };
  }, new Date('2027-01-12T00:00:00+09:00'));
}

describe.skipIf(!citusUrl || !singleUrl)('kessai on Citus (KESSAI_TEST_CITUS_URL)', () => {
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

  it('one account\'s request and one renewal batch send no multi-shard statement and commit in one phase', async () => {
    const url = await freshCitusDatabase();
    const setup = await openStore({ databaseUrl: url });
    const name = new URL(url).pathname.slice(1);
    try {
      await migrate(setup);
      await distributeAccountTables(setup);
      // Citus 13's per-database counters of single- and multi-shard executions (read in the connections opened after this).
      await sql`ALTER DATABASE ${sql.id(name)} SET citus.enable_stat_counters = on`.execute(setup.db);
    } finally {
      await setup.close();
    }
    const store = await openStore({ databaseUrl: url, poolSize: 1 });
    try {
      const ctx = testContext(store, { seed: 93, at: new Date('2027-01-01T00:00:00+09:00') });
      const accountId = 'acct_citus_scope';
      await createAccount(ctx, { name: 'Citus Scope', id: accountId });
      await addEndpoint(ctx, { accountId, url: 'https://hooks.example/kessai' });
      const caller = { accountId, livemode: false, kind: 'secret' } as const;
      const token = (await runOperation(ctx, { ...caller, kind: 'public' }, 'tokens.create', { card: { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2035', cvc: '123' } })) as { id: string };
      const customer = (await runOperation(ctx, caller, 'customers.create', { card: token.id })) as { id: string };
      for (let i = 1; i <= 3; i += 1) {
        const plan = (await runOperation(ctx, caller, 'plans.create', { amount: String(980 * i), currency: 'jpy', interval: 'month' })) as { id: string };
        await runOperation(ctx, caller, 'subscriptions.create', { customer: customer.id, plan: plan.id });
      }
      const oid = (await sql<{ oid: number }>`SELECT oid FROM pg_database WHERE datname = current_database()`.execute(store.db)).rows[0]!.oid;
      const counters = async () => {
        const row = (await sql<{ single: string; multi: string; prepared: string }>`
          SELECT query_execution_single_shard AS single, query_execution_multi_shard AS multi, (SELECT count(*) FROM pg_dist_transaction) AS prepared
          FROM citus_stat_counters(${oid})`.execute(store.db)).rows[0]!;
        return { single: Number(row.single), multi: Number(row.multi), prepared: Number(row.prepared) };
      };
      // Each measurement minus the counters' own statement (a single-shard-free local read).
      const measure = async (work: () => Promise<unknown>) => {
        const before = await counters();
        await work();
        const after = await counters();
        return { single: after.single - before.single, multi: after.multi - before.multi, prepared: after.prepared - before.prepared };
      };
      // The probes can say yes: a read of every shard is multi-shard; a write to every shard (both nodes) commits in two phases.
      expect((await measure(() => sql`SELECT count(*) FROM charges`.execute(store.db))).multi).toBe(1);
      expect((await measure(() => store.db.transaction().execute((trx) => sql`UPDATE charges SET description = description`.execute(trx)))).prepared).toBeGreaterThan(0);
      // A request: a charge of the customer's card (its event written, the endpoints read).
      const request = await measure(() => runOperation(ctx, caller, 'charges.create', { amount: '1500', currency: 'jpy', customer: customer.id }));
      expect(request.single).toBeGreaterThan(0);
      expect(request.multi).toBe(0);
      // A renewal batch of the account, a month on: three renewals, their charges, events and deliveries.
      let renewed = 0;
      const batch = await measure(async () => {
        const counts = await store.db.transaction().execute((trx) => renewBatch(trx, ctx, [accountId], new Date('2027-02-02T00:00:00+09:00'), 100));
        renewed = counts.selected;
      });
      expect(renewed).toBe(3);
      expect(batch.single).toBeGreaterThan(0);
      expect(batch.multi).toBe(0);
      // One phase: no worker transaction prepared (pg_dist_transaction records each one a
      // two-phase commit prepares). An INSERT CTE, or an INSERT … SELECT whose rows Citus copies
      // through the coordinator, prepared one or more (docs/decisions/citus.md, "One-phase commits").
      console.info(`single-shard statements: request ${request.single}, renewal batch ${batch.single}`);
      expect(request.prepared).toBe(0);
      expect(batch.prepared).toBe(0);
    } finally {
      await store.close();
    }
  });

  /**
   * Stops and starts a worker node: KESSAI_TEST_CITUS_NODE_CTL is a shell command with `{action}`
   * (stop, start) and `{port}`, e.g. `su postgres -c "pg_ctl -w -D /srv/citus/{port} {action}"`.
   */
  const nodeCtl = process.env.KESSAI_TEST_CITUS_NODE_CTL;
  const ctl = (action: 'stop' | 'start', port: number) => {
    const run = spawnSync('sh', ['-c', nodeCtl!.replaceAll('{action}', action).replaceAll('{port}', String(port))], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
  };
  /**
   * Runs `body` on a fresh distributed database whose worker nodes it may stop (`node.stop(port)`)
   * and start again (`node.start()`): a node still stopped when `body` ends or throws is started
   * again, and the store closed.
   */
  const withStoppableNode = async (body: (env: { url: string; store: Awaited<ReturnType<typeof openStore>>; node: { stop(port: number): void; start(): void; readonly stopped: number | undefined } }) => Promise<void>) => {
    const url = await distributedCitusDatabase();
    const store = await openStore({ databaseUrl: url, poolSize: 2 });
    let stopped: number | undefined;
    const node = {
      stop(port: number) {
        ctl('stop', port);
        stopped = port;
      },
      start() {
        if (stopped === undefined) return;
        ctl('start', stopped);
        stopped = undefined;
      },
      get stopped() {
        return stopped;
      },
    };
    try {
      await body({ url, store, node });
    } finally {
      node.start();
      await store.close();
    }
  };
  /** The accounts on the node of the first one's shard (the node to stop), and those on the others. */
  const splitByNode = async (db: Kysely<Database>, accounts: readonly string[]) => {
    const ports = (
      await sql<{ account_id: string; port: number }>`SELECT a AS account_id, n.nodeport AS port FROM unnest(${[...accounts]}::text[]) AS a
        JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('accounts', a) JOIN pg_dist_node n USING (groupid)`.execute(db)
    ).rows;
    const downPort = ports[0]!.port;
    return { downPort, downAccounts: ports.filter((row) => row.port === downPort).map((row) => row.account_id), upAccounts: ports.filter((row) => row.port !== downPort).map((row) => row.account_id) };
  };
  /** Subscriptions of `accounts` renewed past `due`, by account. */
  const renewedIn = async (db: Kysely<Database>, due: Date, accounts: readonly string[]) =>
    Object.fromEntries(
      (await sql<{ account_id: string; renewed: number }>`SELECT account_id, count(*) FILTER (WHERE renews_at > ${due})::int AS renewed FROM subscriptions
        WHERE account_id = ANY(${[...accounts]}::text[]) GROUP BY 1`.execute(db)).rows.map((row) => [row.account_id, row.renewed]),
    );
  /** The next wake-up, two minutes on, once the node is back: the slot is retried (its pending groups only) and completes, nothing twice. */
  const retryRenewsAll = async (store: Awaited<ReturnType<typeof openStore>>, slot: Date, due: Date, seed: number) => {
    const second = testContext(store, { seed, at: new Date(slot.getTime() + 120_000), config: { batchSize: 10 } });
    const outcomes = await new Scheduler(second, [subscriptionRenewalsJob], { owner: 'citus-b' }).tick();
    expect(outcomes[0]).toMatchObject({ status: 'succeeded', slot, claimedFrom: 'failed', slotCounts: { renewed: 240 } });
    expect(await tallyRenewals(store.db, due)).toEqual({ subscriptions: 240, renewed: 240, charges: 240, charged_twice: 0, mismatched: 0, renewed_events: 240, charge_events: 240 });
  };
  it.skipIf(!nodeCtl)('a worker node down: requests of its accounts are refused as unavailable (503), an account on the other node is served; all served after it returns', async () => {
    await withStoppableNode(async ({ store, node }) => {
      const ctx = testContext(store, { seed: 95, at: new Date('2027-01-01T00:00:00+09:00') });
      const nodeOf = async (accountId: string) =>
        (await sql<{ port: number }>`SELECT n.nodeport AS port FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
          WHERE p.shardid = get_shard_id_for_distribution_column('accounts', ${accountId}::text)`.execute(store.db)).rows[0]!.port;
      // Two accounts on two worker nodes.
      const byNode = new Map<number, string>();
      for (let i = 0; byNode.size < 2 && i < 64; i += 1) {
        const id = `acct_node_${i}`;
        const port = await nodeOf(id);
        if (!byNode.has(port)) byNode.set(port, id);
      }
      expect(byNode.size).toBe(2);
      const [[upPort, up], [downPort, down]] = [...byNode.entries()] as [[number, string], [number, string]];
      const customers = new Map<string, string>();
      for (const accountId of [up, down]) {
        await createAccount(ctx, { name: accountId, id: accountId });
        const caller = { accountId, livemode: false, kind: 'secret' } as const;
        const token = (await runOperation(ctx, { ...caller, kind: 'public' }, 'tokens.create', { card: { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2035', cvc: '123' } })) as { id: string };
        customers.set(accountId, ((await runOperation(ctx, caller, 'customers.create', { card: token.id })) as { id: string }).id);
      }
      const charge = (accountId: string) => runOperation(ctx, { accountId, livemode: false, kind: 'secret' }, 'charges.create', { amount: '1200', currency: 'jpy', customer: customers.get(accountId)! }) as Promise<{ id: string; paid: boolean }>;
      node.stop(downPort);
      // The account on the surviving node: a create by customer (its intent, the charge, its event) and a retrieve.
      const served = await charge(up);
      expect(served.paid).toBe(true);
      expect(await runOperation(ctx, { accountId: up, livemode: false, kind: 'secret' }, 'charges.retrieve', { id: served.id })).toMatchObject({ id: served.id, paid: true });
      // The account on the stopped node: an error the API answers 503 service_unavailable with Retry-After (src/db/errors.ts).
      const refused = await charge(down).catch((error: unknown) => error);
      expect(isDatabaseUnavailable(refused), String(refused)).toBe(true);
      node.start();
      expect((await charge(down)).paid).toBe(true);
      expect(upPort).not.toBe(downPort);
    });
  });

  it.skipIf(!nodeCtl)('a worker node stopped mid-run: the other node\'s accounts are renewed in that run (the slot ends partial), the rest right after the node returns; nothing twice', async () => {
    await withStoppableNode(async ({ store, node }) => {
      const due = new Date('2027-01-01T00:00:00Z');
      // acct_r0 … acct_r7, 30 due each; batches of 10: every account is a group of its own.
      await seedDueSubscriptions(store.db, { count: 240, dueAt: due, accounts: 8 });
      const { downPort, downAccounts, upAccounts } = await splitByNode(store.db, [...Array(8).keys()].map((i) => `acct_r${i}`));
      expect(upAccounts.length).toBeGreaterThan(0);
      const network = simulatedCardNetwork();
      // The node stops as the run's first batch calls the card network: after the slot's groups are recorded.
      const processor: CardNetwork = {
        ...network,
        async authorize(requests) {
          if (node.stopped === undefined) node.stop(downPort);
          return network.authorize(requests);
        },
      };
      const slot = new Date(due.getTime() + 60_000);
      const first = testContext(store, { seed: 35, at: slot, processor, config: { batchSize: 10 } });
      const outcome = await new Scheduler(first, [subscriptionRenewalsJob], { owner: 'citus-a' }).runSlot('subscriptions.renew', slot);
      expect(node.stopped).toBe(downPort);
      expect(outcome).toMatchObject({ status: 'partial', pendingAccounts: downAccounts.length, attemptsWithoutProgress: 0 });
      expect(outcome.status === 'partial' && outcome.error).toContain('database node unreachable');
      // Every account on the surviving node renewed in that run.
      expect(await renewedIn(store.db, due, upAccounts)).toEqual(Object.fromEntries(upAccounts.map((account) => [account, 30])));
      const pending = await store.db.selectFrom('job_run_groups').select(['accounts', 'status', 'unavailable']).where('status', '<>', 'done').orderBy('grp').execute();
      expect(pending.flatMap((group) => group.accounts).sort()).toEqual([...downAccounts].sort());
      expect(pending.every((group) => group.status === 'failed' && group.unavailable)).toBe(true);

      node.start();
      await retryRenewsAll(store, slot, due, 36);
    });
  });

  it.skipIf(!nodeCtl)('a worker node already down when a slot starts: the slot is planned node by node, the other node\'s accounts renewed in that run (partial), the rest after the node returns; nothing twice', async () => {
    await withStoppableNode(async ({ store, node }) => {
      const due = new Date('2027-01-01T00:00:00Z');
      // acct_r0 … acct_r7, 30 due each; batches of 10. Accounts are known on the coordinator by their keys.
      await seedDueSubscriptions(store.db, { count: 240, dueAt: due, accounts: 8 });
      const accounts = [...Array(8).keys()].map((i) => `acct_r${i}`);
      await store.db.insertInto('api_key_directory').values(accounts.map((account) => ({ key_digest: `digest_${account}`, account }))).execute();
      const { downPort, downAccounts, upAccounts } = await splitByNode(store.db, accounts);
      expect(upAccounts.length).toBeGreaterThan(0);
      node.stop(downPort);
      const slot = new Date(due.getTime() + 60_000);
      const first = testContext(store, { seed: 37, at: slot, config: { batchSize: 10 } });
      const outcome = await new Scheduler(first, [subscriptionRenewalsJob], { owner: 'citus-a' }).runSlot('subscriptions.renew', slot);
      expect(outcome).toMatchObject({ status: 'partial', pendingAccounts: downAccounts.length, attemptsWithoutProgress: 0 });
      expect(await renewedIn(store.db, due, upAccounts)).toEqual(Object.fromEntries(upAccounts.map((account) => [account, 30])));
      const pending = await store.db.selectFrom('job_run_groups').select(['accounts', 'status', 'unavailable']).where('status', '<>', 'done').execute();
      expect(pending).toEqual([{ accounts: [...downAccounts].sort(), status: 'failed', unavailable: true }]);

      node.start();
      await retryRenewsAll(store, slot, due, 38);
    });
  });

  it.skipIf(!nodeCtl)('a worker node already down: the hold-expiry slot (its recovery listings and its groups) succeeds for the accounts that answer', async () => {
    await withStoppableNode(async ({ store, node }) => {
      const accounts = ['acct_h0', 'acct_h1', 'acct_h2', 'acct_h3'];
      await store.db.insertInto('api_key_directory').values(accounts.map((account) => ({ key_digest: `digest_${account}`, account }))).execute();
      const { downPort } = await splitByNode(store.db, accounts);
      node.stop(downPort);
      const slot = new Date('2027-01-01T00:01:00Z');
      const outcome = await new Scheduler(testContext(store, { seed: 39, at: slot }), [holdExpiryJob], { owner: 'citus-h' }).runSlot(holdExpiryJob.name, slot);
      expect(outcome.status, outcome.status === 'failed' ? outcome.error : '').not.toBe('failed');
    });
  });

  it.skipIf(!nodeCtl)('a worker node already down: `worker --once` delivers the webhooks of the accounts that answer and exits 3 (PARTIAL, the other jobs\' groups of the down node pending); after the node returns the rest are delivered, each once', async () => {
    await withStoppableNode(async ({ url, store, node }) => {
      const receiver = await startReceiver();
      try {
        const at = new Date('2027-01-01T00:00:00Z');
        const ctx = testContext(store, { seed: 41, at });
        const accounts = ['acct_w0', 'acct_w1', 'acct_w2', 'acct_w3'];
        for (const account of accounts) {
          await createAccount(ctx, { name: 'Webhook Shop', id: account });
          await addEndpoint(ctx, { accountId: account, url: `${receiver.url}/${account}` });
          await runOperation(ctx, { accountId: account, livemode: false, kind: 'secret' }, 'customers.create', { email: 'a@example.com' });
        }
        const { downPort, downAccounts, upAccounts } = await splitByNode(store.db, accounts);
        expect(upAccounts.length).toBeGreaterThan(0);
        // Every job runs the one slot at `at` (the ledger's high water just before it).
        const highWater = new Date(at.getTime() - 1);
        await sql`
          INSERT INTO job_schedule (job, high_water, updated_at) SELECT j, ${highWater}, ${highWater} FROM unnest(${ALL_JOBS.map((job) => job.name)}::text[]) AS j
          ON CONFLICT (job) DO UPDATE SET high_water = excluded.high_water`.execute(store.db);
        node.stop(downPort);
        const worker = spawnKessai(['worker', '--once', '--at', new Date(at.getTime() + 30_000).toISOString()], { DATABASE_URL: url });
        const exit = await worker.exited;
        expect(exit, worker.output() + worker.errors()).toEqual({ code: 3, signal: null });
        expect(worker.output()).toContain('PARTIAL');
        const run = await store.db.selectFrom('job_runs').select(['status', 'error']).where('job', '=', webhookDeliveryJob.name).where('slot', '=', at).executeTakeFirstOrThrow();
        expect(run).toEqual({ status: 'succeeded', error: null });
        const sent = () => receiver.received.map((request) => request.path.slice(1)).sort();
        expect(sent()).toEqual([...upAccounts].sort());

        node.start();
        const later = new Date(at.getTime() + 60_000);
        const outcome = await new Scheduler(testContext(store, { seed: 42, at: later }), [webhookDeliveryJob], { owner: 'citus-w' }).runSlot(webhookDeliveryJob.name, later);
        expect(outcome).toMatchObject({ status: 'succeeded', counts: { delivered: downAccounts.length } });
        expect(sent()).toEqual([...accounts].sort());
        const attempts = await sql<{ account_id: string; n: number }>`SELECT account_id, count(*)::int AS n FROM webhook_attempts GROUP BY 1 ORDER BY 1`.execute(store.db);
        expect(attempts.rows).toEqual(accounts.map((account) => ({ account_id: account, n: 1 })));
      } finally {
        await receiver.close();
      }
    });
  });

  it('the API\'s prepared statements (src/db/prepared.ts) run on the coordinator past PostgreSQL\'s switch to a generic plan: creates by customer and retrieves', async () => {
    const url = await distributedCitusDatabase();
    // One connection, so every use after the first runs the statement it prepared.
    const store = await openStore({ databaseUrl: url, poolSize: 1 });
    try {
      const ctx = testContext(store, { seed: 91 });
      await createAccount(ctx, { name: 'Citus Prepared', id: 'acct_citus_prepared' });
      const caller = { accountId: 'acct_citus_prepared', livemode: false, kind: 'secret' } as const;
      const token = (await runOperation(ctx, { ...caller, kind: 'public' }, 'tokens.create', { card: { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2035', cvc: '123' } })) as { id: string };
      const customer = (await runOperation(ctx, caller, 'customers.create', { card: token.id })) as { id: string };
      for (let i = 1; i <= 8; i += 1) {
        const charge = (await runOperation(ctx, caller, 'charges.create', { amount: String(100 * i), currency: 'jpy', customer: customer.id })) as { id: string; amount: number; paid: boolean };
        expect(charge).toMatchObject({ amount: 100 * i, paid: true });
        expect(await runOperation(ctx, caller, 'charges.retrieve', { id: charge.id })).toEqual(charge);
      }
      const names = (await sql<{ name: string }>`SELECT name FROM pg_prepared_statements ORDER BY name`.execute(store.db)).rows.map((r) => r.name);
      // The create's (the card read with its term; writing the intent; dropping it; the charge; its object for the event and the answer), the retrieve's one.
      expect(names.map((name) => name.replace(/_[0-9a-f]{12}$/, '')).sort()).toEqual(['charges.create.customer_card', 'charges.insert_created', 'charges.insert_created.intent', 'charges.insert_created.object', 'charges.retrieve', 'network_claims.take']);
    } finally {
      await store.close();
    }
  });

  it('every job over three accounts, simulated on a Citus scratch database, then run by two workers at once: nothing done twice, the same books as single PostgreSQL', async () => {
    // simulate --database-url on the coordinator: its scratch database is a distributed one.
    const citus = await simulateEveryJob(citusUrl!, async (world) => ({
      shards: new Set((await accountShards(world.ctx.db, EVERY_JOB_ACCOUNTS))?.values()).size,
      distributed: (await distributedTables(world.ctx.db)).length,
      idle: idleJobs(world),
      books: await books(world.ctx.db),
    }));
    expect(citus.distributed).toBeGreaterThanOrEqual(23);
    // Two of the accounts share a shard (32 shards, the default), so the jobs pack them into one
    // batch: their statements name both (`= ANY`), which Citus routes only when every table in a
    // locking statement names them.
    expect(citus.shards).toBe(EVERY_JOB_ACCOUNTS.length - 1);
    expect(citus.idle).toEqual([]);
    const reference = await simulateEveryJob(singleUrl, async (world) => books(world.ctx.db));
    expect(citus.books).toEqual(reference);
    expect(citus.books).toMatchObject({ charged_twice: [], events_twice: [] });

    const twoOnCitus = await twoWorkersAfterSimulation(citusUrl!);
    // Renewals are due at these slots (subscribers of Jan 1–3), and each was renewed exactly once.
    expect(twoOnCitus.due).toBeGreaterThan(0);
    expect(twoOnCitus.renewedOnce).toBe(true);
    expect(twoOnCitus.worked).toEqual(
      expect.arrayContaining(['subscriptions.renew', 'charges.reauthorize', 'charges.expire_holds', 'payment_flows.expire_holds', 'checkout_sessions.expire', 'terms.close']),
    );
    expect(twoOnCitus.books).toMatchObject({ charged_twice: [], events_twice: [] });
    // Three accounts' worth of every kind of work, each done once: the same books as two worker processes on single PostgreSQL.
    const reference2 = await twoWorkersAfterSimulation(singleUrl!);
    expect(reference2).toMatchObject({ due: twoOnCitus.due, renewedOnce: true });
    expect(twoOnCitus.books).toEqual(reference2.books);
    expect(EVERY_JOB_ACCOUNTS.every((account) => JSON.stringify(twoOnCitus.books).includes(account))).toBe(true);
  }, 900_000);
});
