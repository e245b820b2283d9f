/**
 * The simulation driver behind `kessai simulate`: loads a scenario into a fresh database and
 * advances a virtual clock over [from, to), running the scenario's operation calls at their
 * instants and the worker's own jobs, through the worker's own scheduler, in between.
 *
 * Stepping. Every job processes each item at the item's own due instant, whichever slot runs it
 * (the renewal job dates a renewal due at 10:15 at 10:15 even when its slot is days later). So one
 * slot run may cover many due instants, and the simulator only has to stop where the order of
 * events could matter:
 * - before each timeline step (it must see the world as the worker would have left it), and
 * - where another job becomes due: the job with the earliest due slot runs at its last slot
 *   before the next other job's due slot (or the next step), then the next job, and so on.
 * A year of scattered renewals therefore costs a few stops per term close, not one per minute.
 * A job that has work due at or before a slot it already ran is run at its next slot, so every
 * stop makes progress.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import type { Caller } from '../accounts/accounts';
import { checkedFeeRates, createAccount } from '../accounts/accounts';
import { openStore, redactUrl, type Store } from '../db/connect';
import { migrate, readMigrations } from '../db/migrate';
import { citusNodes, distributeAccountTables, dropScratchDatabase, joinCitusCluster } from '../db/citus';
import { KessaiError, toError } from '../domain/errors';
import { seededIds } from '../domain/ids';
import { formatJst } from '../domain/time';
import { runOperation } from '../api/operations';
import { decodeCreateSubscription } from '../api/v1/subscriptions';
import { simulatedCardNetwork } from '../processor/card-network';
import { tokenizedCardOf } from '../customers/tokens';
import { subscribeNewCustomers, type NewSubscriber, type NewSubscriberResult } from '../subscriptions/new-subscribers';
import type { SourceSnapshot } from './source-copy';
import { outcomeOf, StepOutcomes } from './step-outcomes';
import { bookAdjustment } from '../settlement/adjustments';
import { setServicePlan } from '../settlement/service-fees';
import { ACCOUNT_SETTINGS_OP, ADJUSTMENT_OP, ITEM_LABEL, parseRef, refsIn, scenarioAccounts, servicePlanSettings, type JsonObject, type Scenario, type Step } from './scenario';
import { VirtualClock, type Clock } from '../engine/clock';
import { createContext, type Context } from '../engine/context';
import { simulatedWebhookTransport, type SimulatedBehaviour } from '../webhooks/transport';
import { createScenarioWebhooks } from './webhooks';
import { nextSlotAfter, slotAtOrAfter, slotAtOrBefore } from '../engine/cron';
import type { JobCounts, JobDefinition } from '../engine/job';
import { silentLogger, type Logger } from '../engine/logger';
import { Scheduler } from '../engine/scheduler';

export type { StepOutcome } from './step-outcomes';

export interface SimulationOptions {
  readonly scenario: Scenario;
  readonly steps: readonly Step[];
  readonly from: Date;
  readonly to: Date;
  readonly seed: number;
  /** The worker's jobs, in registry order (producers before consumers). */
  readonly jobs: readonly JobDefinition[];
  /** A PostgreSQL server on which a scratch database is created and dropped; embedded PGlite otherwise (in memory, or for a large book in a temporary folder). */
  readonly databaseUrl?: string | undefined;
  /** Stop at the first failing step instead of recording it and going on. */
  readonly strict?: boolean;
  readonly batchSize?: number;
  /** Sign generated subscribers up in bulk (default); false runs their three calls one by one. */
  readonly bulkSubscribers?: boolean;
  readonly log?: Logger;
  /**
   * A forecast: the snapshot of a live book whose rows are copied into the simulation's
   * database before anything runs (source-copy.ts). Its accounts exist already; the scenario's
   * settings for them still apply.
   */
  readonly source?: Pick<SourceSnapshot, 'copyInto' | 'subscriptions'>;
  /**
   * Assumed share of otherwise approved authorizations declined (`card_declined`), drawn from the
   * seed; when absent, the scenario's `decline_rate` (none: 0).
   */
  readonly declineRate?: number;
  /** Called after each stop with the simulated instant. */
  readonly onProgress?: (at: Date, stats: SimulationStats) => void;
}

/** One slot run of one job. */
export interface JobRun {
  readonly job: string;
  readonly slot: Date;
  readonly counts: JobCounts;
}

export interface SimulationStats {
  stops: number;
  steps: number;
  failedSteps: number;
  jobRuns: number;
  /** Subscriptions renewed so far (the renewal job's `renewed` counts), for the progress rate. */
  renewed: number;
}

export interface SimulatedWorld {
  readonly ctx: Context;
  readonly outcomes: StepOutcomes;
  readonly jobRuns: readonly JobRun[];
  readonly stats: SimulationStats;
  /** The accounts the scenario ran on, in scenario order. */
  readonly accounts: readonly string[];
}

/** A step that failed under --strict, or a job run that failed: the simulation stops. */
export class SimulationError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SimulationError';
  }
}

const FORECAST_ID_SALT = 0x19f0_7ca5;

/** Before every instant kessai dates (the lower bound of the jobs' due-work look-up). */
const OVERDUE_SINCE = new Date(0);

/** A scratch database on a PostgreSQL server, dropped when the simulation ends. */
async function scratchPostgres(url: string): Promise<{ url: string; citus: boolean; drop(): Promise<void> }> {
  const name = `kessai_sim_${randomBytes(6).toString('hex')}`;
  let citus: Awaited<ReturnType<typeof citusNodes>> = [];
  const admin = new pg.Client({ connectionString: url });
  await admin.connect().catch((error: unknown) => {
    throw new Error(`cannot connect to PostgreSQL at ${redactUrl(url)}: ${(error as Error).message}`, { cause: error });
  });
  try {
    // Text sorts by bytes, as on the embedded database (PGlite's collation is C), whatever the
    // server's default: the report's order cannot depend on the server's locale, and byte
    // comparison skips strcoll in every index and sort (PostgreSQL 15 treats only C and POSIX as
    // C, not C.UTF-8; the saving is in docs/decisions/performance.md). On a server whose
    // default locale provider is ICU (15 and later), the libc provider is asked for, or the C
    // collation would be ignored.
    const version = Number((await admin.query<{ v: string }>(`SELECT current_setting('server_version_num') AS v`)).rows[0]!.v);
    // On a Citus coordinator the scratch database is made on every node (propagation), then joins
    // the cluster and its account tables are distributed after migrating (src/db/citus.ts).
    citus = await citusNodes(admin);
    // Citus propagates CREATE DATABASE from template1 only, with its collation: on a cluster
    // initialised with C or C.UTF-8 text still sorts by bytes.
    if (citus.length > 0) await admin.query('SET citus.enable_create_database_propagation = on');
    if (citus.length > 0) await admin.query(`CREATE DATABASE ${name}`);
    else await admin.query(`CREATE DATABASE ${name} TEMPLATE template0 LC_COLLATE 'C'${version >= 150000 ? ' LOCALE_PROVIDER libc' : ''}`);
    // A scratch database: losing the last commits in a server crash loses nothing of value, and
    // not waiting for each commit's flush makes the many small transactions of a replay cheap.
    await admin.query(`ALTER DATABASE ${name} SET synchronous_commit = off`);
  } finally {
    await admin.end();
  }
  const target = new URL(url);
  target.pathname = `/${name}`;
  const drop = async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await dropScratchDatabase(client, name, citus.length > 0);
    } finally {
      await client.end();
    }
  };
  if (citus.length > 0) {
    await joinCitusCluster(target.toString(), citus).catch(async (error: unknown) => {
      await drop().catch(() => {});
      throw error;
    });
  }
  return { url: target.toString(), citus: citus.length > 0, drop };
}

/**
 * Indexes that only the API's list calls read (a customer's or a subscription's charges, a
 * customer's or a plan's subscriptions, an object's events, the newest-first lists), dropped from
 * a simulation's own database once it is migrated. No job, no report section and no bulk write
 * reads them, yet every renewal writes six of them (its charge's three, and its subscription's
 * three: a renewal moves `renews_at`, so its update is never a heap-only one) and every event one
 * more. A timeline's list call answers the same without them, since every
 * list orders its rows fully; it reads the account's rows instead of an index. What is kept: the
 * keys and unique indexes, the jobs' due indexes, charges by term (term close and statements),
 * and events by creation (the full report reads the event log in that order). A year of 10,000
 * subscriptions on PostgreSQL: simulation 64.3–68.8 s with them, 51.2–54.4 s without
 * (docs/decisions/performance.md).
 */
export const LIST_ONLY_INDEXES = [
  'charges_by_customer',
  'charges_by_subscription',
  'charges_by_created',
  'subscriptions_by_customer',
  'subscriptions_by_plan',
  'subscriptions_by_created',
  'customers_by_created',
  'events_by_resource',
] as const;

async function dropListOnlyIndexes(store: Store): Promise<void> {
  await sql`DROP INDEX IF EXISTS ${sql.join(LIST_ONLY_INDEXES.map((name) => sql.id(name)))}`.execute(store.db);
}

/**
 * From this many planned steps (10,000 generated sign-ups) the embedded database of a simulation
 * lives in a temporary data folder, below it in memory. In memory every page of the book is in
 * this process: a year of 10,000 subscriptions peaked at 1.6 GB RSS, of 100,000 at 6.5 GB. In a
 * folder the pages are in the operating system's file cache and PostgreSQL's buffer pool stays
 * at its data folder size (DATA_FOLDER_SHARED_BUFFERS): the 10,000 year ran within 5 % of the
 * time at about half the RSS. A small run is faster in memory (a folder costs seconds to lay out
 * and start), and a small book's pages weigh little (docs/decisions/simulation.md).
 */
const EMBEDDED_FOLDER_FROM_STEPS = 30_000;
/** A forecast's copied subscription weighs as much as a generated sign-up: its three steps (token, customer, subscription). */
const STEPS_PER_COPIED_SUBSCRIPTION = 3;

/**
 * Where a simulation's embedded database lives: in a temporary folder from EMBEDDED_FOLDER_FROM_STEPS
 * planned steps, counting a forecast's copied book (`subscriptions`) as the sign-ups that would have
 * made it, so that a forecast of a large book does not hold every page in memory either.
 */
export function embeddedPlace(steps: number, copiedSubscriptions: number): 'memory' | 'folder' {
  return steps + STEPS_PER_COPIED_SUBSCRIPTION * copiedSubscriptions >= EMBEDDED_FOLDER_FROM_STEPS ? 'folder' : 'memory';
}

/**
 * A fresh embedded PGlite, in memory or in a temporary data folder (EMBEDDED_FOLDER_FROM_STEPS;
 * removed by `drop`, and when the process exits before it), with every migration applied and
 * every table unlogged. Creating PGlite and migrating it takes seconds; a snapshot of the
 * migrated database, cached in the temp folder under the migrations' checksum, starts in about
 * one. A missing or unreadable snapshot just means the slow way.
 *
 * Unlogged: the database is gone when the run ends, so the write-ahead log protects nothing, and
 * on PGlite writing it is work on the one thread that runs everything (less time and memory:
 * figures in docs/decisions/performance.md). The tables and every statement are the migrations'
 * own; only persistence differs, and the indexes only the API's lists read are dropped after
 * migrating, as on a scratch PostgreSQL database (LIST_ONLY_INDEXES).
 */
async function scratchPglite(where: 'memory' | 'folder'): Promise<{ store: Store; drop(): void }> {
  const key = createHash('sha256')
    .update('unlogged\n')
    .update(readMigrations().map((file) => `${file.name}:${file.checksum}`).join('\n'))
    .digest('hex')
    .slice(0, 20);
  const file = join(tmpdir(), `kessai-simulation-${key}.tar`);
  const newFolder = () => (where === 'memory' ? 'memory://' : mkdtempSync(join(tmpdir(), 'kessai-simulation-db-')));
  let folder = newFolder();
  const remove = () => {
    if (where === 'folder') rmSync(folder, { recursive: true, force: true });
  };
  process.once('exit', remove);
  const drop = () => {
    process.off('exit', remove);
    remove();
  };
  try {
    if (existsSync(file)) {
      try {
        return { store: await openStore({ dataDir: folder, pgliteSnapshot: new Blob([readFileSync(file)]) }), drop };
      } catch {
        // A damaged snapshot: build a new one below, in a new folder.
        remove();
        folder = newFolder();
      }
    }
    const store = await openStore({ dataDir: folder });
    await migrate(store);
    // Not the migration ledger: a started snapshot empties its unlogged tables (the data tables are
    // empty anyway), and the ledger must still say every migration is applied.
    const tables = await sql<{ name: string }>`
      SELECT quote_ident(tablename) AS name FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'kessai_migrations' ORDER BY tablename`.execute(store.db);
    for (const { name } of tables.rows) await sql.raw(`ALTER TABLE ${name} SET UNLOGGED`).execute(store.db);
    if (store.snapshot) {
      try {
        const partial = `${file}.${process.pid}`;
        writeFileSync(partial, Buffer.from(await (await store.snapshot()).arrayBuffer()));
        renameSync(partial, file);
      } catch {
        // No cache this time; the next run builds it again.
      }
    }
    return { store, drop };
  } catch (error) {
    drop();
    throw error;
  }
}

/** Replaces `$label` / `$label.field` strings by the earlier results they name (deep). */
export function resolveParams(value: unknown, results: ReadonlyMap<string, Record<string, unknown> | KessaiError>, entry: string): unknown {
  if (typeof value === 'string') {
    if (value.startsWith('$$')) return value.slice(1);
    const ref = parseRef(value);
    if (!ref) return value;
    const result = results.get(ref.label);
    if (result === undefined) throw new KessaiError('invalid_param_key', { message: `${entry}: $${ref.label} does not name an earlier entry` });
    if (result instanceof KessaiError) {
      throw new KessaiError('invalid_param_key', { message: `${entry}: $${ref.label} refers to an entry that failed (${result.code})` });
    }
    let current: unknown = result;
    for (const field of ref.path.length > 0 ? ref.path : ['id']) {
      if (current === null || typeof current !== 'object' || !(field in current)) {
        throw new KessaiError('invalid_param_key', { message: `${entry}: ${value}: the result of ${ref.label} has no field ${field}` });
      }
      current = (current as Record<string, unknown>)[field];
    }
    return current;
  }
  if (Array.isArray(value)) return value.map((item) => resolveParams(item, results, entry));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, resolveParams(item, results, entry)]));
  }
  return value;
}

/**
 * Sets account settings by column name; the columns are read from the database so that a
 * setting added by a later migration is usable here without a change.
 */
async function applyAccountOptions(ctx: Context, accountId: string, settings: Readonly<Record<string, unknown>>): Promise<void> {
  const options = Object.entries(settings);
  if (options.length === 0) return;
  const columns = await ctx.db
    .selectFrom('information_schema.columns' as never)
    .select('column_name' as never)
    .where('table_name' as never, '=', 'accounts' as never)
    .execute();
  const known = new Set((columns as { column_name: string }[]).map((row) => row.column_name));
  for (const [key] of options) {
    if (!known.has(key) || ['account_id', 'name', 'created_at', 'term_cycle', 'live_enabled'].includes(key)) {
      throw new KessaiError('invalid_param_key', { param: `options[${key}]`, message: `unknown account setting ${JSON.stringify(key)}` });
    }
  }
  await ctx.db
    .updateTable('accounts')
    .set(Object.fromEntries(options) as never)
    .where('account_id', '=', accountId)
    .execute();
}

/** A what-if's account settings taking effect at their date (ACCOUNT_SETTINGS_OP): fee rates by brand, then options. */
async function changeAccountSettings(ctx: Context, accountId: string, params: JsonObject): Promise<Record<string, unknown>> {
  const rates = checkedFeeRates((params.fee_rates ?? {}) as Record<string, string>);
  for (const [brand, fee_rate] of Object.entries(rates)) {
    await ctx.db
      .insertInto('account_fee_rates')
      .values({ account_id: accountId, brand, fee_rate })
      .onConflict((oc) => oc.columns(['account_id', 'brand']).doUpdateSet({ fee_rate }))
      .execute();
  }
  await applyAccountOptions(ctx, accountId, (params.options ?? {}) as Record<string, unknown>);
  return { id: accountId, object: 'account' };
}

async function createAccounts(ctx: Context, scenario: Scenario): Promise<string[]> {
  const ids: string[] = [];
  // A forecast's accounts were copied from the source: only their settings are applied below.
  const copied = new Set((await ctx.db.selectFrom('accounts').select('account_id').execute()).map((row) => row.account_id));
  for (const account of scenarioAccounts(scenario)) {
    try {
      if (!copied.has(account.id)) await createAccount(ctx, { id: account.id, name: account.name ?? account.id, liveEnabled: account.live_enabled, termCycle: account.term_cycle, feeRates: account.fee_rates });
    } catch (error) {
      if (error instanceof KessaiError) throw new SimulationError(`accounts (${account.id}): ${error.param ?? ''} ${error.message}`.replace('  ', ' '));
      throw error;
    }
    try {
      await applyAccountOptions(ctx, account.id, account.options ?? {});
    } catch (error) {
      if (error instanceof KessaiError) throw new SimulationError(`accounts (${account.id}).options: ${error.message}`);
      throw error;
    }
    ids.push(account.id);
  }
  // Plan settings are dated: written now, each in force from its own instant (the start when it has none).
  for (const setting of servicePlanSettings(scenario)) {
    try {
      await setServicePlan(ctx, { accountId: setting.account, livemode: false }, { subject: setting.plan.subject, monthlyFee: setting.plan.monthly_fee, ...(setting.from ? { from: setting.from } : {}) });
    } catch (error) {
      if (error instanceof KessaiError) throw new SimulationError(`${setting.entry} (${setting.account}): ${error.param ?? ''} ${error.message}`.replace('  ', ' '));
      throw error;
    }
  }
  return ids;
}

/** An ADJUSTMENT_OP step: the operator's adjustment, booked as the adjustment command books it. */
async function addAdjustment(ctx: Context, caller: Caller, params: JsonObject): Promise<Record<string, unknown>> {
  const text = (name: string): string | undefined => {
    const value = params[name];
    if (value === undefined) return undefined;
    if (typeof value !== 'string') throw new KessaiError('invalid_param_key', { param: name, message: `${name} must be a string` });
    return value;
  };
  const unknown = Object.keys(params).filter((key) => !['amount', 'subject', 'reason', 'owner'].includes(key));
  if (unknown.length > 0) throw new KessaiError('invalid_param_key', { param: unknown[0]!, message: `unknown parameter of ${ADJUSTMENT_OP}: ${unknown.join(', ')}` });
  const amount = params.amount;
  if (typeof amount !== 'number') throw new KessaiError('invalid_amount', { param: 'amount', message: 'amount must be a whole number of yen' });
  const owner = text('owner');
  return (await bookAdjustment(ctx, caller, { amount, subject: text('subject') ?? '', reason: text('reason') ?? '', ...(owner === undefined ? {} : { owner }) })) as unknown as Record<string, unknown>;
}

/**
 * Runs a simulation and hands the resulting world to `consume` (for the report) before the
 * database is closed, and dropped when it was a scratch database.
 */
export async function simulate<T>(options: SimulationOptions, consume: (world: SimulatedWorld) => Promise<T>): Promise<T> {
  const scratch = options.databaseUrl ? await scratchPostgres(options.databaseUrl) : undefined;
  let embedded: Awaited<ReturnType<typeof scratchPglite>> | undefined;
  let store: Store | undefined;
  try {
    if (!scratch) embedded = await scratchPglite(embeddedPlace(options.steps.length, options.source?.subscriptions ?? 0));
    store = scratch ? await openStore({ databaseUrl: scratch.url, poolSize: 2, applicationName: 'kessai simulate' }) : embedded!.store;
    // A no-op on a snapshot that already has every migration.
    await migrate(store);
    await dropListOnlyIndexes(store);
    if (scratch?.citus) await distributeAccountTables(store);
    if (options.source) {
      await options.source.copyInto(store);
      await sql`ANALYZE`.execute(store.db);
    }
    const clock = new VirtualClock(options.from);
    const declineRate = options.declineRate ?? options.scenario.decline_rate;
    // Webhooks are answered in the process, as the scenario's endpoints say (never the network).
    const webhookBehaviours = new Map<string, SimulatedBehaviour>();
    const ctx = createContext({
      webhookTransport: simulatedWebhookTransport(webhookBehaviours),
      db: store.db,
      store,
      clock,
      // A forecast's ids are drawn apart from a scenario's, so that they cannot meet the ids of a
      // source built with seeded ids (tests, replays) with the same seed.
      ids: seededIds(options.source ? options.seed ^ FORECAST_ID_SALT : options.seed),
      log: options.log ?? silentLogger(),
      processor: simulatedCardNetwork({ seed: options.seed, ...(declineRate ? { declineRate } : {}) }),
      config: {
        simulation: true,
        // Statement URLs in a simulation are signed with a key of the simulation itself.
        statementUrlSecret: `kessai-simulation-seed-${options.seed}`,
        ...(options.batchSize ? { batchSize: options.batchSize } : {}) },
    });
    const accounts = await createAccounts(ctx, options.scenario);
    await createScenarioWebhooks(ctx, options.scenario, webhookBehaviours);
    const world = await advance(ctx, clock, options, accounts);
    return await consume(world);
  } finally {
    await store?.close();
    await scratch?.drop();
    embedded?.drop();
  }
}


/** Rows a job run reports having written (its counts other than `batches`). */
function rowsWritten(counts: JobCounts): number {
  return Object.entries(counts).reduce((sum, [name, n]) => (name === 'batches' ? sum : sum + n), 0);
}

/**
 * Keeps the query planner's statistics in step with a database that grows from empty within
 * seconds. A worker's server has autovacuum for this; the simulation's database does not (PGlite
 * has none, and a scratch PostgreSQL database outgrows it), and with statistics of empty tables
 * the planner joins thousands of rows by sequential scans (a batch's default-card lookup grew
 * with the table). ANALYZE runs whenever the work done since the last one reaches all the
 * work before it (at least 100 rows): a logarithmic number of times. Doubling is enough: the
 * planner scales stale statistics by a table's current size, what it needs is a first picture of
 * each table once it is no longer empty (analyzing at every quarter of growth cost more, for no
 * better plans: figures in docs/decisions/performance.md).
 *
 * `own` (a simulation's own database): every table but the outbox, sampled small. `shared` (a test
 * clock's advance, on the database the service runs on): also once before the first stop (the
 * clock's objects were just made), and only the tables whose rows changed since their last
 * ANALYZE by as many as they hold (pg_stat_user_tables), at the default sample, so the statistics
 * the service plans with are refreshed, never coarsened. Autovacuum gets there too, but a minute
 * or more later: a clock of a thousand subscriptions made just before its advance was planned on
 * the statistics of empty tables, and each stop's due probe joined every subscription with every
 * customer of the clock (docs/decisions/test-clocks.md).
 */
function plannerStatistics(ctx: Context, database: 'own' | 'shared') {
  let analyzedAt = database === 'shared' ? -1 : 0;
  let tables: string[] | undefined;
  return {
    async refreshIfGrown(work: number): Promise<void> {
      if (analyzedAt >= 0) {
        const grown = work - analyzedAt;
        if (grown < 100 || grown < analyzedAt) return;
      }
      if (database === 'shared') {
        const stale = await staleTables(ctx);
        // Nothing stale yet (the server's counters trail the writes by up to a second): look again at the next stop.
        if (stale.length > 0) await sql`ANALYZE ${sql.raw(stale.join(', '))}`.execute(ctx.db);
        if (stale.length > 0 || analyzedAt < 0) analyzedAt = Math.max(work, 0);
        return;
      }
      // Not the outbox: no job reads it, and sampling its documents was a third of the time.
      tables ??= (
        await sql<{ name: string }>`SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'events' ORDER BY tablename`.execute(ctx.db)
      ).rows.map((row) => `"${row.name}"`);
      // A small sample (3,000 rows a table instead of 30,000): the planner's choices here turn on
      // row counts and key spread, not on fine histograms (saving: docs/decisions/performance.md).
      await ctx.db.transaction().execute(async (trx) => {
        await sql`SET LOCAL default_statistics_target = 10`.execute(trx);
        await sql`ANALYZE ${sql.raw(tables!.join(', '))}`.execute(trx);
      });
      analyzedAt = work;
    },
  };
}

/**
 * The tables (not the outbox) whose rows changed since their last ANALYZE by at least as many as
 * they held then (at least 100), and those never analyzed that hold rows: an embedded database has
 * no autovacuum, and its change counters start again at zero when a process opens it, so a clock's
 * objects made by an earlier process are counted nowhere.
 */
async function staleTables(ctx: Context): Promise<string[]> {
  const rows = await sql<{ name: string }>`
    SELECT s.relname AS name FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
    WHERE s.schemaname = current_schema() AND s.relname <> 'events'
      AND (s.n_mod_since_analyze >= greatest(100, c.reltuples) OR (c.reltuples < 0 AND pg_relation_size(c.oid) > 0))
    ORDER BY s.relname`.execute(ctx.db);
  return rows.rows.map((row) => `"${row.name}"`);
}

/**
 * What the driver needs: the timeline (empty for a test clock's advance), the jobs, the end of the
 * range, and who runs it. A test clock's advance (src/test-clocks/advance.ts) runs this same driver
 * over its own objects, with its own ledger names and the real clock for its leases.
 */
export type DriverOptions = Pick<SimulationOptions, 'steps' | 'jobs' | 'to' | 'strict' | 'bulkSubscribers' | 'onProgress'> & {
  /** The scheduler's owner name in the run ledger (default `simulation`). */
  readonly owner?: string;
  /** The clock of the ledger's leases (default: the virtual clock). */
  readonly ledgerClock?: Clock;
  /**
   * How the driver refreshes the planner's statistics as the database grows (plannerStatistics):
   * `own` (default: a simulation's own database, which has no autovacuum) or `shared` (a test
   * clock's advance on the service's database: only stale tables, at the default sample).
   */
  readonly analyze?: 'own' | 'shared';
};

/**
 * The simulation driver: advances `clock` to `options.to`, running the timeline's steps at their
 * instants and every job at the stops described at the top of this file.
 */
export async function advance(ctx: Context, clock: VirtualClock, options: DriverOptions, accounts: string[]): Promise<SimulatedWorld> {
  const { steps, jobs, to } = options;
  const scheduler = new Scheduler(ctx, jobs, { owner: options.owner ?? 'simulation', ...(options.ledgerClock ? { ledgerClock: options.ledgerClock } : {}) });
  const order = new Map(jobs.map((job, i) => [job.name, i]));
  const results = new Map<string, Record<string, unknown> | KessaiError>();
  const lastUse = lastUses(steps);
  const outcomes = new StepOutcomes();
  const jobRuns: JobRun[] = [];
  const lastRun = new Map<string, Date>();
  const stats: SimulationStats = { stops: 0, steps: 0, failedSteps: 0, jobRuns: 0, renewed: 0 };
  // Due work is looked up from before anything kessai dates, not from the range's start: anything
  // not yet processed counts, however old. A scenario starts empty, but a forecast's copied book
  // may hold work the source's worker has not run yet (a renewal due before --from, a hold past
  // its expiry, a term past its end). Such work is due at once, so it runs at each job's first
  // slot at or after --from, as of that slot, as the live worker runs it on catching up: the first
  // slot it runs processes everything due before it, each item dated at its own due instant.
  const dueAfter = OVERDUE_SINCE;
  const end = new Date(to.getTime() - 1);
  const statistics = plannerStatistics(ctx, options.analyze ?? 'own');
  let next = 0;
  for (;;) {
    await statistics.refreshIfGrown(stats.steps + jobRuns.reduce((sum, run) => sum + rowsWritten(run.counts), 0));
    const step = steps[next];
    // Steps at one instant run back to back, as one burst of requests: work they make due runs
    // at the next stop. (A generated subscriber is three steps at one instant.)
    const previousStep = steps[next - 1];
    if (step && previousStep && next > 0 && step.at.getTime() === previousStep.at.getTime() && clock.now().getTime() === step.at.getTime()) {
      await runStep(ctx, step, results, outcomes, options.strict ?? false, stats);
      next += 1;
      forgetSpent(results, lastUse, steps, next - 1, next);
      continue;
    }
    // Jobs run at slots up to and including the next step's instant (the worker's slot at 10:30
    // runs before a request at 10:30:00), or the last instant of the range.
    const limit = step ? step.at : end;
    const slots = await jobSlots(ctx, jobs, dueAfter, clock.now(), lastRun, limit);
    const due = slots.filter((candidate) => candidate.slot.getTime() <= limit.getTime());
    if (due.length === 0) {
      if (!step) break;
      if (step.subscriber === 'token' && options.bulkSubscribers !== false) {
        // A run of generated subscribers up to the first job slot with due work: signed up in bulk.
        const horizon = slots.reduce((min, candidate) => Math.min(min, candidate.slot.getTime()), to.getTime());
        clock.advanceTo(step.at);
        const batchStart = next;
        next += await runSubscriberBatch(ctx, steps, next, horizon, { jobs, dueAfter, lastRun, results, outcomes, strict: options.strict ?? false, stats });
        forgetSpent(results, lastUse, steps, batchStart, next);
        clock.advanceTo(steps[next - 1]!.at);
        stats.stops += 1;
        options.onProgress?.(clock.now(), stats);
        continue;
      }
      clock.advanceTo(step.at);
      await runStep(ctx, step, results, outcomes, options.strict ?? false, stats);
      next += 1;
      forgetSpent(results, lastUse, steps, next - 1, next);
      stats.stops += 1;
      options.onProgress?.(step.at, stats);
      continue;
    }
    due.sort((a, b) => a.slot.getTime() - b.slot.getTime() || order.get(a.job.name)! - order.get(b.job.name)!);
    const first = due[0]!;
    // Run it as late as possible without passing another job's due slot or the next step; a job
    // that comes earlier in the registry runs first at a slot they share, so stop before it.
    let horizon = limit;
    for (const other of due.slice(1)) {
      if (other.job === first.job) continue;
      const bound = order.get(other.job.name)! < order.get(first.job.name)! ? new Date(other.slot.getTime() - 1) : other.slot;
      if (bound.getTime() < horizon.getTime()) horizon = bound;
    }
    const slot = slotAtOrBefore(first.job.schedule, horizon);
    const runAt = slot.getTime() < first.slot.getTime() ? first.slot : slot;
    clock.advanceTo(runAt);
    const outcome = await scheduler.runSlot(first.job.name, runAt);
    lastRun.set(first.job.name, runAt);
    stats.jobRuns += 1;
    stats.stops += 1;
    if (outcome.status !== 'succeeded') {
      throw new SimulationError(`job ${first.job.name} at slot ${formatJst(runAt)} did not succeed (${outcome.status}${'error' in outcome ? `: ${outcome.error}` : ''})`);
    }
    jobRuns.push({ job: first.job.name, slot: runAt, counts: outcome.counts });
    stats.renewed += outcome.counts.renewed ?? 0;
    options.onProgress?.(runAt, stats);
  }
  return { ctx, outcomes, jobRuns, stats, accounts };
}

/**
 * Each label a step names (`$label`), with the index of the last step naming it; but for the
 * call before it of a generated subscriber (the customer names its token, the subscription its
 * customer), a use forgetSpent knows without a map entry per sign-up.
 */
function lastUses(steps: readonly Step[]): Map<string, number> {
  const last = new Map<string, number>();
  for (const [i, step] of steps.entries()) {
    const own = step.subscriber === 'customer' || step.subscriber === 'subscription' ? steps[i - 1]?.ref : undefined;
    for (const label of refsIn(step.params)) if (label !== own) last.set(label, i);
    for (const label of refsIn(step.forEach?.params)) last.set(label, i);
  }
  return last;
}

/**
 * After steps [from, to) ran: drops the results no later step names (their own, and those they
 * named for the last time). The results map holds what is still to be resolved, not every object
 * the run made: a generated subscriber's token and customer are named only by its own next call
 * and its subscription by none, so a book of 100,000 sign-ups kept 300,000 API objects to the end.
 */
function forgetSpent(results: Map<string, unknown>, lastUse: ReadonlyMap<string, number>, steps: readonly Step[], from: number, to: number): void {
  for (let k = from; k < to; k += 1) {
    const step = steps[k]!;
    // A generated token or customer is named by the next call of its subscriber.
    const own = step.subscriber === 'token' || step.subscriber === 'customer' ? k + 1 : -1;
    if (step.ref !== undefined && Math.max(own, lastUse.get(step.ref) ?? -1) < to) results.delete(step.ref);
    for (const label of [...refsIn(step.params), ...refsIn(step.forEach?.params)]) {
      if ((lastUse.get(label) ?? -1) < to) results.delete(label);
    }
  }
}

/**
 * Each job's next slot with due work, never before `now` nor at or before a slot it already ran;
 * a job that cannot say when it has work gets its last slot up to `limit` (it runs before every
 * step and at the end). The jobs' due instants are independent reads, asked at once (two
 * connections on a server).
 */
async function jobSlots(
  ctx: Context,
  jobs: readonly JobDefinition[],
  dueAfter: Date,
  now: Date,
  lastRun: ReadonlyMap<string, Date>,
  limit: Date,
): Promise<{ job: JobDefinition; slot: Date }[]> {
  const dueAts = await Promise.all(jobs.map((job) => job.nextDueAt?.(ctx, dueAfter)));
  const slots: { job: JobDefinition; slot: Date }[] = [];
  for (const [i, job] of jobs.entries()) {
    const previous = lastRun.get(job.name);
    let slot: Date;
    if (job.nextDueAt) {
      const at = dueAts[i]!;
      if (at === null) continue;
      slot = slotAtOrAfter(job.schedule, at.getTime() > now.getTime() ? at : now);
    } else {
      slot = slotAtOrBefore(job.schedule, limit);
    }
    if (previous && slot.getTime() <= previous.getTime()) slot = nextSlotAfter(job.schedule, previous);
    if (slot.getTime() < now.getTime()) continue;
    slots.push({ job, slot });
  }
  return slots;
}

/** Most generated subscribers signed up in one transaction. */
const SUBSCRIBER_BATCH = 1000;

/** A bulk sign-up that made work due before its last subscriber: redone with the first `fits`. */
class SubscriberBatchCut extends Error {
  constructor(readonly fits: number) {
    super(`subscriber batch cut to ${fits}`);
  }
}

/**
 * Signs up the run of generated subscribers starting at `steps[first]` (token, customer and
 * subscription steps, three a subscriber) whose instants fall before `horizon` (the first slot
 * with due work), at most SUBSCRIBER_BATCH, in one transaction with set-based writes. Exact as
 * the steps one by one would be: the subscribers are independent of each other, and the
 * transaction asks every job again, before it commits, whether the batch made work due (a
 * renewal, a term to close) before its last subscriber; if so it is rolled back and redone with
 * only the subscribers before that slot, the rest running after the job as they would have.
 * Records the three steps' outcomes of each subscriber. Returns how many steps it ran (≥ 1).
 */
async function runSubscriberBatch(
  ctx: Context,
  steps: readonly Step[],
  first: number,
  horizon: number,
  state: {
    jobs: readonly JobDefinition[];
    dueAfter: Date;
    lastRun: ReadonlyMap<string, Date>;
    results: Map<string, Record<string, unknown> | KessaiError>;
    outcomes: StepOutcomes;
    strict: boolean;
    stats: SimulationStats;
  },
): Promise<number> {
  const lead = steps[first]!;
  const caller: Caller = { accountId: lead.account, livemode: lead.livemode, kind: 'secret' };
  // The token call's parameters, or undefined for a card the network refuses: tokens.create fails
  // and the customer and subscription calls fail on the failed label, each recorded; that sign-up
  // runs one by one, outside any batch.
  const acceptedCard = (token: Step): unknown => {
    try {
      const params = resolveParams(token.params, state.results, token.entry);
      tokenizedCardOf(caller, params, token.at);
      return params;
    } catch (error) {
      if (error instanceof KessaiError) return undefined;
      throw error;
    }
  };
  const triples: [Step, Step, Step][] = [];
  const cards: unknown[] = [];
  const labels = new Set<string>();
  for (let k = first; triples.length < SUBSCRIBER_BATCH && k + 2 < steps.length; k += 3) {
    const triple: [Step, Step, Step] = [steps[k]!, steps[k + 1]!, steps[k + 2]!];
    const [token, customer, subscription] = triple;
    if (token.subscriber !== 'token' || customer.subscriber !== 'customer' || subscription.subscriber !== 'subscription') break;
    if (token.account !== lead.account || token.livemode !== lead.livemode) break;
    if (triples.length > 0) {
      // The first always goes (nothing was due up to its instant); the others only before the
      // horizon (sign-ups sharing an instant go together: the batch writes each one's events
      // after the one before's, as their calls one after the other would),
      if (token.at.getTime() >= horizon) break;
      // and not naming a result of this batch, which exists only once the batch is written.
      if (triple.some((step) => refsIn(step.params).some((label) => labels.has(label)))) break;
    }
    const card = acceptedCard(token);
    if (card === undefined) break;
    triples.push(triple);
    cards.push(card);
    for (const step of triple) if (step.ref !== undefined) labels.add(step.ref);
  }
  if (triples.length === 0) {
    // The lead's card is refused: its calls, one by one.
    await runStep(ctx, lead, state.results, state.outcomes, state.strict, state.stats);
    return 1;
  }
  // Parameters resolved and decoded as runOne would (the subscription's `customer` is the new
  // customer, whose id the batch draws; the codec only checks that one is given).
  const people: NewSubscriber[] = triples.map(([token, , subscription], k) => {
    const { customer: _customer, ...params } = subscription.params;
    let resolved: NewSubscriber['subscription'];
    try {
      const { customerId: _new, ...command } = decodeCreateSubscription({ ...(resolveParams(params, state.results, subscription.entry) as Record<string, unknown>), customer: 'new' });
      resolved = command;
    } catch (error) {
      if (!(error instanceof KessaiError)) throw error;
      resolved = error;
    }
    return { at: token.at, token: cards[k], subscription: resolved };
  });
  let count = triples.length;
  let signedUp: NewSubscriberResult[];
  for (;;) {
    try {
      signedUp = await ctx.db.transaction().execute(async (trx) => {
        const batch = await subscribeNewCustomers(trx, ctx, caller, people.slice(0, count));
        if (count > 1) {
          const slots = await jobSlots({ ...ctx, db: trx }, state.jobs, state.dueAfter, lead.at, state.lastRun, new Date(horizon));
          const earliest = slots.reduce((min, candidate) => Math.min(min, candidate.slot.getTime()), Infinity);
          const fits = Math.max(1, people.slice(0, count).filter((person) => person.at.getTime() < earliest).length);
          if (fits < count) throw new SubscriberBatchCut(fits);
        }
        return batch;
      });
      break;
    } catch (error) {
      if (error instanceof SubscriberBatchCut) {
        count = error.fits;
        continue;
      }
      throw new SimulationError(`${lead.entry} (bulk sign-up of ${count} generated subscribers from ${formatJst(lead.at)}) failed: ${toError(error).message}`, { cause: error });
    }
  }
  // The batch's calls are steps[first], steps[first + 1], … (three a subscriber, back to back); a
  // run of successes is recorded as one part, a refused call on its own between runs.
  let runFirst = first;
  let run: { id: string; object: string }[] = [];
  for (const [k, result] of signedUp.entries()) {
    for (const [j, object] of [result.token, result.customer, result.subscription].entries()) {
      const index = first + 3 * k + j;
      const step = steps[index]!;
      state.stats.steps += 1;
      if (object instanceof KessaiError) {
        state.outcomes.addSignedUp(steps, runFirst, run);
        run = [];
        runFirst = index + 1;
        await recordFailure(step, object, state.results, state.outcomes, state.strict, state.stats);
        continue;
      }
      if (step.ref !== undefined) state.results.set(step.ref, object as unknown as Record<string, unknown>);
      run.push({ id: object.id, object: object.object });
    }
  }
  state.outcomes.addSignedUp(steps, runFirst, run);
  return 3 * signedUp.length;
}

async function runStep(
  ctx: Context,
  step: Step,
  results: Map<string, Record<string, unknown> | KessaiError>,
  outcomes: StepOutcomes,
  strict: boolean,
  stats: SimulationStats,
): Promise<void> {
  if (!step.forEach) {
    await runOne(ctx, step, results, outcomes, strict, stats);
    return;
  }
  // for_each: list everything first (all pages, at this instant), then run the entry per object.
  const caller: Caller = { accountId: step.account, livemode: step.livemode, kind: 'secret' };
  const items: Record<string, unknown>[] = [];
  try {
    const params = resolveParams(step.forEach.params ?? {}, results, step.entry) as JsonObject;
    // v1 lists page by offset, v2 lists by cursor (starting_after the last id); the first page
    // needs neither, and its url says which kind of list it is.
    let cursor: Record<string, unknown> = {};
    for (;;) {
      const page = (await runOperation(ctx, caller, step.forEach.op, { ...params, ...cursor })) as { data?: Record<string, unknown>[]; has_more?: boolean; url?: string };
      const data = page.data ?? [];
      items.push(...data);
      if (!page.has_more || data.length === 0) break;
      cursor = page.url?.startsWith('/v2/') ? { starting_after: data.at(-1)!.id } : { offset: items.length };
    }
  } catch (error) {
    await recordFailure(step, error, results, outcomes, strict, stats);
    return;
  }
  const scoped = new Map(results);
  for (const [k, item] of items.entries()) {
    scoped.set(ITEM_LABEL, item);
    await runOne(ctx, { ...step, entry: `${step.entry} #${k + 1}` }, scoped, outcomes, strict, stats);
  }
}

async function runOne(
  ctx: Context,
  step: Step,
  results: Map<string, Record<string, unknown> | KessaiError>,
  outcomes: StepOutcomes,
  strict: boolean,
  stats: SimulationStats,
): Promise<void> {
  const caller: Caller = { accountId: step.account, livemode: step.livemode, kind: 'secret' };
  stats.steps += 1;
  try {
    const params = resolveParams(step.params, results, step.entry) as JsonObject;
    const result =
      step.op === ACCOUNT_SETTINGS_OP
        ? await changeAccountSettings(ctx, step.account, params)
        : step.op === ADJUSTMENT_OP
          ? await addAdjustment(ctx, caller, params)
          : ((await runOperation(ctx, caller, step.op, params)) as Record<string, unknown>);
    if (step.ref !== undefined) results.set(step.ref, result);
    outcomes.add(outcomeOf(step, { id: typeof result.id === 'string' ? result.id : null, object: typeof result.object === 'string' ? result.object : null }));
  } catch (error) {
    await recordFailure(step, error, results, outcomes, strict, stats);
  }
}

async function recordFailure(
  step: Step,
  error: unknown,
  results: Map<string, Record<string, unknown> | KessaiError>,
  outcomes: StepOutcomes,
  strict: boolean,
  stats: SimulationStats,
): Promise<void> {
  if (!(error instanceof KessaiError)) throw new SimulationError(`${step.entry} (${step.op} at ${formatJst(step.at)}) failed: ${toError(error).message}`, { cause: error });
  stats.failedSteps += 1;
  if (step.ref !== undefined) results.set(step.ref, error);
  const failure = { code: error.code, status: error.status, type: error.type, param: error.param ?? null, message: error.message };
  if (strict) {
    throw new SimulationError(`${step.entry} (${step.op} at ${formatJst(step.at)}) failed: ${error.code}${error.param ? ` (param ${error.param})` : ''}: ${error.message}`);
  }
  outcomes.add(outcomeOf(step, null, failure));
}
