/**
 * Benchmark of `kessai simulate --source` (`npm run bench:forecast -- [--n 100000] [--accounts 100] [--copy-only]`).
 *
 * On the PostgreSQL server of DATABASE_URL (default the local server) it creates a scratch source
 * database, migrates it and seeds N active monthly subscriptions over ACCOUNTS accounts with
 * set-based SQL (a customer and a Visa 4242 card each, four plans an account, signed up across
 * January 2027 so that renewals fall across every day of the month), then runs the forecast as the
 * CLI does (openForecast, the simulation on embedded PGlite, the report) from the snapshot over
 * twelve months, and prints the copy time against its ceiling (a plain `COPY … TO STDOUT` of the
 * same tables, same run), the forecast time and the peak RSS. Then, in the same
 * run, `bench:simulate` at the same n on the same backend (a child process), as the ceiling the
 * forecast is held to (forecast ≤ 1.5× the scenario simulation). `--copy-only` stops after the copy.
 * The source database is dropped at the end (also on failure). Not a timed test: targets are read
 * by a person.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { ALL_JOBS } from '../../jobs/index';
import { createAccount } from '../../src/accounts/accounts';
import { openStore } from '../../src/db/connect';
import { seededIds } from '../../src/domain/ids';
import { FixedClock } from '../../src/engine/clock';
import { migrate } from '../../src/db/migrate';
import { cardFingerprint } from '../../src/processor/test-cards';
import { openForecast } from '../../src/simulation/forecast';
import { keepHeapNearLiveData } from '../../src/simulation/heap';
import { writeReport } from '../../src/simulation/report';
import { simulate } from '../../src/simulation/simulate';
import { admin, ceilingRatioLine, log, seconds, SERVER, withDatabase } from './bench-support';

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', default: '100000' },
    accounts: { type: 'string', default: '100' },
    'copy-only': { type: 'boolean', default: false },
  },
});
const N = Number(args.n);
const ACCOUNTS = Number(args.accounts);
/** Sign-ups across January 2027 (JST); the forecast runs from the snapshot for twelve months. */
const JANUARY = new Date('2026-12-31T15:00:00Z');
const TO = new Date('2028-01-31T15:00:00Z');

async function seedSource(url: string): Promise<void> {
  const store = await openStore({ databaseUrl: url, poolSize: 1 });
  try {
    await migrate(store);
    const db = store.db;
    const ctx = { db, clock: new FixedClock(JANUARY), ids: seededIds(1) };
    for (let a = 0; a < ACCOUNTS; a += 1) await createAccount(ctx, { name: `Forecast ${a}`, id: `acct_f${a}` });
    await sql`
      INSERT INTO plans (account_id, livemode, plan_id, amount, interval, created_at, updated_at)
      SELECT 'acct_f' || a, false, 'pln_f' || p, 490 * p, 'month', ${JANUARY}::timestamptz, ${JANUARY}::timestamptz
      FROM generate_series(0, ${ACCOUNTS - 1}) AS a, generate_series(1, 4) AS p`.execute(db);
    // Signed up at an instant of January spread by a multiplicative hash; each one's first period ends a month later.
    await sql`
      CREATE TEMP TABLE signup AS
      SELECT i, 'acct_f' || (i % ${ACCOUNTS}) AS account_id, lpad(to_hex(i), 30, '0') AS hex,
             ${JANUARY}::timestamptz + make_interval(secs => (i::bigint * 7919) % (31 * 86400)) AS at
      FROM generate_series(1, ${N}) AS i`.execute(db);
    await sql`
      INSERT INTO customers (account_id, livemode, customer_id, default_card_id, created_at, updated_at)
      SELECT account_id, false, 'cus_' || hex, 'car_' || hex, at, at FROM signup`.execute(db);
    await sql`
      INSERT INTO cards (account_id, livemode, card_id, customer_id, fingerprint, brand, last4, exp_month, exp_year, funding, country, issuer, cvc_check, created_at, updated_at)
      SELECT account_id, false, 'car_' || hex, 'cus_' || hex, ${cardFingerprint('4242424242424242')}, 'Visa', '4242', 12, 2040, 'credit', 'JP', 'domestic', 'passed', at, at
      FROM signup`.execute(db);
    await sql`
      INSERT INTO subscriptions (account_id, livemode, subscription_id, customer_id, plan_id, status, start_at, current_period_start, current_period_end, renews_at, created_at, updated_at)
      SELECT account_id, false, 'sub_' || hex, 'cus_' || hex, 'pln_f' || (1 + i % 4), 'active', at, at, at + interval '1 month', at + interval '1 month', at, at
      FROM signup`.execute(db);
    await sql`VACUUM ANALYZE`.execute(db);
  } finally {
    await store.close();
  }
}

/**
 * The copy's ceiling, measured in the same run: the source's own `COPY … TO STDOUT` of the same
 * tables on one plain connection, each table's output read and dropped. What a copy that cost
 * nothing at the target would take.
 */
async function plainCopyOut(url: string, tables: readonly string[]): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const started = performance.now();
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    for (const table of tables) {
      for await (const chunk of client.query(copyTo(`COPY "${table}" TO STDOUT`)) as AsyncIterable<Buffer>) void chunk;
    }
    await client.query('ROLLBACK');
    return performance.now() - started;
  } finally {
    await client.end();
  }
}

async function main(): Promise<void> {
  // As `kessai simulate` runs.
  keepHeapNearLiveData();
  log(`forecast benchmark: n=${N} accounts=${ACCOUNTS} server=${new URL(SERVER).host}`);
  const name = `kessai_bench_forecast_${process.pid}_${Math.floor(performance.timeOrigin)}`;
  const url = withDatabase(SERVER, name);
  await admin((c) => c.query(`CREATE DATABASE "${name}"`));
  const dir = mkdtempSync(join(tmpdir(), 'kessai-bench-forecast-'));
  try {
    let started = performance.now();
    await seedSource(url);
    log(`seeded the source: ${N} subscriptions over ${ACCOUNTS} accounts in ${seconds(performance.now() - started)} s`);

    started = performance.now();
    const forecast = await openForecast({ source: url, from: 'now' });
    log(`snapshot opened at ${forecast.snapshot.instant.toISOString()} in ${seconds(performance.now() - started)} s`);
    let copyMs = 0;
    let copied: Record<string, number> = {};
    let simulatedAt = 0;
    let renewals = 0;
    const run = performance.now();
    try {
      await simulate(
        {
          scenario: forecast.scenario,
          steps: [],
          from: forecast.from,
          to: args['copy-only'] ? new Date(forecast.from.getTime() + 1) : TO,
          seed: 1,
          jobs: args['copy-only'] ? [] : ALL_JOBS,
          source: {
            subscriptions: forecast.snapshot.subscriptions,
            async copyInto(store) {
              const at = performance.now();
              copied = await forecast.snapshot.copyInto(store);
              copyMs = performance.now() - at;
              return copied;
            },
          },
        },
        async (world) => {
          simulatedAt = performance.now();
          renewals = world.jobRuns.filter((r) => r.job === 'subscriptions.renew').reduce((sum, r) => sum + (r.counts.renewed ?? 0), 0);
          if (!args['copy-only']) {
            await writeReport(world, { scenario: forecast.scenario.name ?? null, from: forecast.from, to: TO, seed: 1, source: { name: forecast.snapshot.name, snapshot_instant: forecast.snapshot.instant, assumptions: forecast.assumptions } }, dir);
          }
        },
      );
    } finally {
      await forecast.snapshot.close();
    }
    const forecastMs = performance.now() - run;
    const rows = Object.values(copied).reduce((sum, n) => sum + n, 0);
    const rss = Math.round(process.resourceUsage().maxRSS / 1024);
    const ceilingMs = await plainCopyOut(url, Object.keys(copied));
    log(`copy: ${rows.toLocaleString('en-US')} rows of ${Object.keys(copied).length} tables in ${seconds(copyMs)} s (target <= 10 s: ${copyMs <= 10_000 ? 'met' : 'MISSED'})`);
    log(`ceiling: a plain COPY … TO STDOUT of the same tables, read and dropped, ${seconds(ceilingMs)} s; copy / ceiling ${(copyMs / ceilingMs).toFixed(2)}`);
    log(`copy against a plain COPY TO STDOUT: ${ceilingRatioLine(ceilingMs / copyMs)}`);
    if (args['copy-only']) {
      log(`peak RSS ${rss} MB`);
      return;
    }
    log(
      `forecast: ${seconds(forecastMs)} s total (copy ${seconds(copyMs)} s, simulation ${seconds(simulatedAt - run - copyMs)} s, report ${seconds(run + forecastMs - simulatedAt)} s), ${renewals.toLocaleString('en-US')} renewals, peak RSS ${rss} MB`,
    );

    // The ceiling: the scenario simulation of the same population, same backend, same run.
    const script = fileURLToPath(new URL('./simulate.ts', import.meta.url));
    started = performance.now();
    const child = spawnSync(process.execPath, ['--import', 'tsx', script, '--n', String(N), '--backend', 'pglite'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    const simulateMs = performance.now() - started;
    if (child.status !== 0) throw new Error(`bench:simulate failed (${child.status})`);
    log(`bench:simulate n=${N}: ${child.stdout.trim()}`);
    log(`ratio forecast / bench:simulate: ${(forecastMs / simulateMs).toFixed(2)} (target <= 1.5: ${forecastMs <= 1.5 * simulateMs ? 'met' : 'MISSED'})`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await admin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
  }
}

await main();
