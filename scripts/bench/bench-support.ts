/**
 * What the PostgreSQL benchmarks share: the server they make scratch databases on, an admin
 * connection to it, how they print, and the engine-against-plain-SQL harness.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import pg from 'pg';
import { citusNodes, distributeAccountTables, dropScratchDatabase, joinCitusCluster } from '../../src/db/citus';
import { openStore, type Store } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import type { Database } from '../../src/db/schema';
import { seededIds } from '../../src/domain/ids';
import type { DueAccount } from '../../src/engine/account-batches';
import { FixedClock } from '../../src/engine/clock';
import { createContext } from '../../src/engine/context';
import { runBatches, type JobDefinition, type SlotRun } from '../../src/engine/job';
import { silentLogger } from '../../src/engine/logger';
import { Scheduler } from '../../src/engine/scheduler';

/** The server of DATABASE_URL, or the local one (user postgres). */
export const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** The same server URL naming another database. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** Runs `work` on a fresh connection to the server (CREATE / DROP DATABASE …), closed afterwards. */
export async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: SERVER });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export const seconds = (ms: number): string => (ms / 1000).toFixed(2);
export const log = (line: string): void => void process.stdout.write(`${line}\n`);

/**
 * An order-free digest of the documents of the events of these types, their ids left out (a
 * subquery yielding text): equal on the engine's and the ceiling's database when both wrote the
 * same documents.
 */
export function eventDocumentsDigest(types: readonly string[]): RawBuilder<string> {
  return sql<string>`(SELECT coalesce(sum(hashtext((data::jsonb - 'id')::text)), 0)::text FROM events WHERE type IN (${sql.join(types)}))`;
}

/** Above this engine/ceiling throughput ratio the ceiling is not a ceiling: it does more, or reads another way, than the engine. */
export const CEILING_RATIO_LIMIT = 1.25;

/**
 * The line every benchmark with a ceiling prints: engine/ceiling as a throughput ratio (for times,
 * pass ceiling time / engine time), and "ceiling is wrong" above CEILING_RATIO_LIMIT — a ceiling
 * the engine beats measures something else than the engine's work, not a success of the engine.
 */
export function ceilingRatioLine(ratio: number): string {
  return ratio > CEILING_RATIO_LIMIT
    ? `engine/ceiling ${ratio.toFixed(2)}: the ceiling is wrong (above ${CEILING_RATIO_LIMIT}, it does more work or reads by another path than the engine)`
    : `engine/ceiling ${ratio.toFixed(2)} (≤ ${CEILING_RATIO_LIMIT}: a ceiling)`;
}

/**
 * A plain-SQL ceiling's batch loop: the engine's own (runBatches in src/engine/job.ts) — each
 * round the accounts with due rows through the same capped probe of the due index (`due`, the
 * job's own dueAccounts call), packed into batches the same way, one transaction per batch with
 * the engine's batch sort memory — around a plain-SQL `batch` (the batch's accounts named in every
 * statement, as the engine's are) in place of the job's, and no run ledger. So the ceiling reads
 * through the same access path as the engine and differs only in what a batch computes. Returns
 * how many rows the batches took.
 */
export async function ceilingBatches(
  store: Store,
  slot: Date,
  batchSize: number,
  due: (db: Kysely<Database>, cap: number) => Promise<readonly DueAccount[]>,
  batch: (trx: Kysely<Database>, accountIds: readonly string[], limit: number) => Promise<number>,
): Promise<number> {
  const ctx = createContext({ db: store.db, store, clock: new FixedClock(slot), ids: seededIds(0), log: silentLogger(), config: { batchSize } });
  const run: SlotRun = {
    slot,
    attempt: 1,
    leaseClock: ctx.clock,
    signal: new AbortController().signal,
    // The engine's batch transactions start with the claim, which also sets their sort memory (Scheduler #assertClaim).
    assertClaim: async (trx) => void (await sql`SET LOCAL work_mem = '64MB'`.execute(trx)),
    recordBatch: async () => undefined,
  };
  const totals = await runBatches(ctx, run, ['taken'], due, async (trx, accountIds, limit) => {
    const taken = await batch(trx, accountIds, limit);
    return { selected: taken, taken };
  });
  return totals.taken;
}

const SLOT_WORKER = fileURLToPath(new URL('./slot-worker.ts', import.meta.url));

/** Runs scripts/bench/slot-worker.ts in its own process until the slot is finished; resolves to what it committed ("owner: counts"). */
async function slotWorker(url: string, bench: Pick<EngineAgainstCeiling<unknown>, 'job' | 'slot' | 'batchSize'>, owner: string): Promise<string> {
  const child = spawn(process.execPath, ['--import', 'tsx', SLOT_WORKER], {
    env: { ...process.env, DATABASE_URL: url, KESSAI_AT: bench.slot.toISOString(), KESSAI_JOB: bench.job.name, KESSAI_OWNER: owner, KESSAI_BATCH_SIZE: String(bench.batchSize) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`worker ${owner} exited with ${code}`);
  const { outcomes } = JSON.parse(output.trim().split('\n').at(-1)!) as { outcomes: { status: string; counts: Record<string, number> }[] };
  const batches = outcomes.reduce((sum, outcome) => sum + (outcome.counts.batches ?? 0), 0);
  return `${owner}: ${outcomes.map((outcome) => outcome.status).join('+')}, ${batches} batches`;
}

/** One engine-versus-plain-SQL benchmark of a job (see runEngineAgainstCeiling). */
export interface EngineAgainstCeiling<V> {
  /** Names the scratch databases (kessai_bench_<name>_…). */
  readonly name: string;
  /** What the seed wrote, for the log line ("1000 due subscriptions"). */
  readonly seeded: string;
  /** What the ceiling wrote, per unit ("renewals", "releases"). */
  readonly unit: string;
  readonly job: JobDefinition;
  readonly slot: Date;
  readonly batchSize: number;
  /**
   * Runs the slot with this many kessai worker processes (scripts/bench/slot-worker.ts), which
   * share it through its account groups; unset: one Scheduler in this process.
   */
  readonly workers?: number | undefined;
  /** Keep the scratch databases for inspection. */
  readonly keep: boolean;
  /** Writes the rows the job will find due, set-based. */
  seed(db: Kysely<Database>): Promise<void>;
  /** The same writes as the job, by plain SQL on an untouched copy of the seed (ceilingBatches); returns the count. */
  ceiling(store: Store): Promise<number>;
  /** Reads back what was written; `exact` says whether the engine wrote every row exactly once, `same` whether the ceiling wrote the same (given the engine's check). */
  verify(db: Kysely<Database>): Promise<V>;
  exact(check: V): boolean;
  same(check: V, engine: V): boolean;
}

export interface EngineAgainstCeilingResult {
  readonly engineMs: number;
  readonly ceilingMs: number;
  /** Peak RSS after the engine's run (the ceiling runs in PostgreSQL, not in this process). */
  readonly rssMb: number;
}

/**
 * The benchmark's verification after an ANALYZE (not timed): the seed's statistics know nothing
 * of the rows the run wrote, and with them the verification's joins of 100,000s of charges and
 * subscriptions were planned as nested loops over "empty" tables and ran for minutes.
 */
async function verifyAnalyzed<V>(bench: EngineAgainstCeiling<V>, db: Kysely<Database>): Promise<V> {
  await sql`ANALYZE`.execute(db);
  return bench.verify(db);
}

/**
 * A scratch database `name` on SERVER, migrated and seeded by `seed`; on a Citus coordinator
 * (`citus`: its nodes, from citusNodes) made on every node and its account tables distributed first.
 */
async function createSeededDatabase(name: string, citus: Awaited<ReturnType<typeof citusNodes>>, seed: (db: Kysely<Database>) => Promise<void>): Promise<void> {
  if (citus.length > 0) {
    await admin(async (c) => {
      await c.query('SET citus.enable_create_database_propagation = on');
      await c.query(`CREATE DATABASE "${name}"`);
    });
    await joinCitusCluster(withDatabase(SERVER, name), citus);
  } else await admin((c) => c.query(`CREATE DATABASE "${name}"`));
  const store = await openStore({ databaseUrl: withDatabase(SERVER, name), poolSize: 2 });
  try {
    await migrate(store);
    if (citus.length > 0) await distributeAccountTables(store);
    await seed(store.db);
  } finally {
    await store.close();
  }
}

/**
 * Seeds a scratch database on SERVER (migrated, then copied with CREATE DATABASE … TEMPLATE; on a
 * Citus coordinator distributed, and the copy seeded again), runs
 * one slot of the job through the Scheduler on it and verifies it, then runs the plain-SQL
 * ceiling on the copy and verifies that too. Both databases are dropped at the end, also on failure.
 */
export async function runEngineAgainstCeiling<V>(bench: EngineAgainstCeiling<V>): Promise<EngineAgainstCeilingResult> {
  const stamp = `${process.pid}_${Math.floor(performance.timeOrigin)}`;
  const engineDb = `kessai_bench_${bench.name}_${stamp}`;
  const rawDb = `kessai_bench_${bench.name}_raw_${stamp}`;
  // On a Citus coordinator the scratch databases are made on every node and distributed (Citus
  // copies no database by TEMPLATE: the copy is seeded the same way instead).
  const citus = await admin((c) => citusNodes(c));
  const createSeeded = (name: string) => createSeededDatabase(name, citus, bench.seed);
  try {
    let started = performance.now();
    await createSeeded(engineDb);
    if (citus.length > 0) await createSeeded(rawDb);
    else await admin((c) => c.query(`CREATE DATABASE "${rawDb}" TEMPLATE "${engineDb}"`));
    log(`seeded ${bench.seeded} (and a copy) in ${seconds(performance.now() - started)} s${citus.length > 0 ? ` on Citus (${citus.length - 1} workers)` : ''}`);

    // 1. The engine: one slot of the real job through the scheduler.
    const store = await openStore({ databaseUrl: withDatabase(SERVER, engineDb), poolSize: 4 });
    let engineMs: number;
    let engineCheck: V;
    try {
      if (bench.workers === undefined) {
        const ctx = createContext({ db: store.db, store, clock: new FixedClock(bench.slot), ids: seededIds(42), log: silentLogger(), config: { batchSize: bench.batchSize } });
        const scheduler = new Scheduler(ctx, [bench.job], { owner: 'bench' });
        started = performance.now();
        const outcome = await scheduler.runSlot(bench.job.name, bench.slot);
        engineMs = performance.now() - started;
        if (outcome.status !== 'succeeded') throw new Error(`the slot did not succeed: ${JSON.stringify(outcome)}`);
        log(`engine:  ${JSON.stringify(outcome.counts)} in ${seconds(engineMs)} s`);
      } else {
        started = performance.now();
        const outputs = await Promise.all(Array.from({ length: bench.workers }, (_, i) => slotWorker(withDatabase(SERVER, engineDb), bench, `bench-${i + 1}`)));
        engineMs = performance.now() - started;
        const row = await store.db.selectFrom('job_runs').select(['status', 'counts']).where('job', '=', bench.job.name).where('slot', '=', bench.slot).executeTakeFirst();
        if (row?.status !== 'succeeded') throw new Error(`the slot did not succeed: ${JSON.stringify(row)}`);
        log(`engine:  ${JSON.stringify(row.counts)} in ${seconds(engineMs)} s by ${bench.workers} worker processes (${outputs.join('; ')})`);
      }
      engineCheck = await verifyAnalyzed(bench, store.db);
      log(`verify:  ${JSON.stringify(engineCheck)}`);
      if (!bench.exact(engineCheck)) throw new Error('verification failed: the engine did not write every row exactly once');
    } finally {
      await store.close();
    }
    const rssMb = process.resourceUsage().maxRSS / 1024;

    // 2. The raw-SQL ceiling on the untouched copy of the seed.
    const raw = await openStore({ databaseUrl: withDatabase(SERVER, rawDb), poolSize: 2 });
    let ceilingMs: number;
    try {
      started = performance.now();
      const written = await bench.ceiling(raw);
      ceilingMs = performance.now() - started;
      log(`ceiling: ${written} ${bench.unit} by plain SQL in ${seconds(ceilingMs)} s`);
      const check = await verifyAnalyzed(bench, raw.db);
      if (!bench.same(check, engineCheck)) throw new Error(`the ceiling did not write the same rows: ${JSON.stringify(check)}`);
    } finally {
      await raw.close();
    }
    return { engineMs, ceilingMs, rssMb };
  } finally {
    if (!bench.keep) {
      await admin(async (c) => {
        await dropScratchDatabase(c, engineDb, citus.length > 0);
        await dropScratchDatabase(c, rawDb, citus.length > 0);
      });
    }
  }
}

/**
 * A plain-SQL ceiling alone, as a floor under a larger run's time: a scratch database on SERVER
 * (createSeededDatabase; or embedded, `backend`), `seed` into it untimed, then `ceiling` timed;
 * dropped at the end, also on failure.
 * Returns what the ceiling wrote and how long it took.
 */
export async function timeCeilingAlone(
  name: string,
  seed: (db: Kysely<Database>) => Promise<void>,
  ceiling: (store: Store) => Promise<number>,
  /** `pglite`: in an embedded database in a temporary folder instead (as a large simulation's), removed at the end. */
  backend: 'postgres' | 'pglite' = 'postgres',
): Promise<{ written: number; ms: number }> {
  if (backend === 'pglite') {
    const dir = mkdtempSync(join(tmpdir(), `kessai-bench-${name}-`));
    try {
      return await timedOn(await openStore({ dataDir: dir }), ceiling, async (store) => {
        await migrate(store);
        await seed(store.db);
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const database = `kessai_bench_${name}_${process.pid}_${Math.floor(performance.timeOrigin)}`;
  const citus = await admin((c) => citusNodes(c));
  try {
    await createSeededDatabase(database, citus, seed);
    return await timedOn(await openStore({ databaseUrl: withDatabase(SERVER, database), poolSize: 2 }), ceiling);
  } finally {
    await admin((c) => dropScratchDatabase(c, database, citus.length > 0));
  }
}

/** `ceiling` timed on `store` (after `prepare`, untimed), the store closed at the end. */
async function timedOn(store: Store, ceiling: (store: Store) => Promise<number>, prepare?: (store: Store) => Promise<void>): Promise<{ written: number; ms: number }> {
  try {
    await prepare?.(store);
    const started = performance.now();
    const written = await ceiling(store);
    return { written, ms: performance.now() - started };
  } finally {
    await store.close();
  }
}
