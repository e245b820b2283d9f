/**
 * Benchmark of the term close (`npm run bench:statements -- --charges 1000000 --refunds 50000`).
 *
 * On the PostgreSQL server named by DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 * it creates a scratch database, migrates it and seeds, with set-based SQL, one monthly term
 * (January 2027) per account holding N captured charges and M refunds spread over the merchants
 * and tenants (default 250 accounts × (1 merchant + 3 tenants) = 1,000 owners, a third of the
 * charges without a tenant), fees and term ids filled as settleCaptured/settleRefunds would.
 * Then it:
 *
 *   1. runs the `terms.close` slot of 2027-02-01 00:00 JST once through the Scheduler, and checks
 *      with SQL that every term closed, every owner got its statements and balance, and that per
 *      term money in = statement nets + service fees;
 *   2. runs the raw aggregation the close is built on (GROUP BY over the same charges and refunds,
 *      nothing written) as the ceiling;
 *
 * and prints both in seconds and their ratio. The database is dropped at the end (also on failure)
 * unless --keep. Not a timed test: the target (≤ 15 s) is read by a person.
 */
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { sql, type Kysely } from 'kysely';
import { termCloseJob } from '../../jobs/term-close';
import { openStore } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import type { Database } from '../../src/db/schema';
import { seededIds } from '../../src/domain/ids';
import { FixedClock } from '../../src/engine/clock';
import { createContext } from '../../src/engine/context';
import { silentLogger } from '../../src/engine/logger';
import { Scheduler } from '../../src/engine/scheduler';
import { admin, ceilingRatioLine, log, SERVER, seconds, withDatabase } from './bench-support';

const { values: args } = parseArgs({
  options: {
    charges: { type: 'string', default: '1000000' },
    refunds: { type: 'string', default: '50000' },
    accounts: { type: 'string', default: '250' },
    tenants: { type: 'string', default: '3' },
    keep: { type: 'boolean', default: false },
  },
});
const CHARGES = Number(args.charges);
const REFUNDS = Number(args.refunds);
const ACCOUNTS = Number(args.accounts);
const TENANTS = Number(args.tenants);
const TERM_START = new Date('2027-01-01T00:00:00+09:00');
const SLOT = new Date('2027-02-01T00:00:00+09:00');



async function seed(db: Kysely<Database>): Promise<void> {
  const created = new Date(TERM_START.getTime() - 30 * 24 * 3600 * 1000);
  await sql`INSERT INTO accounts (account_id, name, created_at) SELECT 'acct_b' || a, 'Bench ' || a, ${created} FROM generate_series(0, ${ACCOUNTS - 1}) AS a`.execute(db);
  // Tenant t of account a: rate 5–14 %, every other one with payjp_fee_included.
  await sql`
    INSERT INTO tenants (account_id, livemode, tenant_id, platform_fee_rate, payjp_fee_included, minimum_transfer_amount, created_at, updated_at)
    SELECT 'acct_b' || a, false, 'ten_b' || a || '_' || t, 5 + (a + t) % 10, (a + t) % 2 = 0, 10000, ${created}, ${created}
    FROM generate_series(0, ${ACCOUNTS - 1}) AS a, generate_series(1, ${TENANTS}) AS t`.execute(db);
  await sql`
    INSERT INTO terms (account_id, livemode, term_id, cycle, start_at, end_at, created_at)
    SELECT 'acct_b' || a, false, 'tm_b' || a, 'monthly', ${TERM_START}, ${SLOT}, ${TERM_START} FROM generate_series(0, ${ACCOUNTS - 1}) AS a`.execute(db);
  // Charge i: account i % A, tenant (i / A) % (T + 1) (0 = none), amount 50..99,999, fee 3.00 / 3.30 %.
  await sql`
    INSERT INTO charges (account_id, livemode, charge_id, amount, paid, captured, captured_at, amount_captured, card_id, fee_rate, created_at, updated_at,
                         tenant_id, platform_fee, platform_fee_rate, payjp_fee_included, fee, total_platform_fee, term_id)
    SELECT x.acct, false, 'ch_b' || x.i, x.amount, true, true, x.at, x.amount, 'car_b', x.rate, x.at, x.at,
           ten.tenant_id, CASE WHEN ten.tenant_id IS NULL THEN NULL ELSE floor(x.amount * ten.platform_fee_rate / 100) END,
           ten.platform_fee_rate, ten.payjp_fee_included, floor(x.amount * x.rate / 100),
           CASE WHEN ten.tenant_id IS NULL THEN 0 ELSE floor(x.amount * ten.platform_fee_rate / 100) END, 'tm_b' || (x.i % ${ACCOUNTS})
    FROM (
      SELECT i, 'acct_b' || (i % ${ACCOUNTS}) AS acct, (i / ${ACCOUNTS}) % ${TENANTS + 1} AS t, 50 + (i * 7919) % 99950 AS amount,
             CASE WHEN i % 5 = 0 THEN 3.30 ELSE 3.00 END::numeric(5,2) AS rate,
             ${TERM_START}::timestamptz + (i % 2678400) * interval '1 second' AS at
      FROM generate_series(0::bigint, ${CHARGES - 1}) AS i
    ) x
    LEFT JOIN tenants ten ON ten.account_id = x.acct AND ten.livemode = false AND ten.tenant_id = 'ten_b' || (x.i % ${ACCOUNTS}) || '_' || x.t`.execute(db);
  // Refund j: half (rounded up) of charge j * (N / M), made on Jan 30.
  await sql`
    INSERT INTO refunds (account_id, livemode, refund_id, charge_id, amount, created_at, tenant_id, payjp_fee_included, refund_fee_offset, refund_platform_fee_offset, term_id)
    SELECT c.account_id, false, 're_b' || j, c.charge_id, r.amount, ${new Date('2027-01-30T12:00:00+09:00')}, c.tenant_id, coalesce(c.payjp_fee_included, false),
           floor(r.amount * c.fee_rate / 100), CASE WHEN c.platform_fee IS NULL THEN 0 ELSE floor(c.platform_fee * r.amount / c.amount) END, c.term_id
    FROM generate_series(0, ${REFUNDS - 1}) AS j
    JOIN charges c ON c.account_id = 'acct_b' || ((j * ${Math.max(1, Math.floor(CHARGES / REFUNDS))}) % ${ACCOUNTS}) AND c.livemode = false
                  AND c.charge_id = 'ch_b' || (j * ${Math.max(1, Math.floor(CHARGES / REFUNDS))})
    CROSS JOIN LATERAL (SELECT (c.amount + 1) / 2 AS amount) r`.execute(db);
  // As autovacuum would have by the end of a month: statistics and the visibility map.
  await sql`VACUUM ANALYZE charges`.execute(db);
  await sql`VACUUM ANALYZE refunds`.execute(db);
}

/** The raw aggregation the close rests on: the same GROUP BY over the same rows, nothing written. */
async function ceiling(db: Kysely<Database>): Promise<number> {
  const [charges, refunds] = await Promise.all([
    sql<{ n: number }>`SELECT count(*)::int AS n FROM (
      SELECT c.account_id, c.term_id, c.tenant_id, coalesce(c.payjp_fee_included, false), count(*), sum(c.amount_captured), sum(c.fee), sum(c.platform_fee)
      FROM charges c JOIN terms t ON c.account_id = t.account_id AND c.livemode = t.livemode AND c.term_id = t.term_id
      WHERE t.end_at <= ${SLOT} GROUP BY 1, 2, 3, 4) g`.execute(db),
    sql<{ n: number }>`SELECT count(*)::int AS n FROM (
      SELECT r.account_id, r.term_id, r.tenant_id, coalesce(r.payjp_fee_included, false), count(*), sum(r.amount), sum(r.refund_fee_offset), sum(r.refund_platform_fee_offset)
      FROM refunds r JOIN terms t ON r.account_id = t.account_id AND r.livemode = t.livemode AND r.term_id = t.term_id
      WHERE t.end_at <= ${SLOT} GROUP BY 1, 2, 3, 4) g`.execute(db),
  ]);
  return charges.rows[0]!.n + refunds.rows[0]!.n;
}

async function verify(db: Kysely<Database>) {
  const result = await sql<{ closed: number; statements: number; balances: number; unbalanced_terms: number; bad_statements: number }>`
    SELECT (SELECT count(*) FROM terms WHERE closed)::int AS closed,
           (SELECT count(*) FROM statements)::int AS statements,
           (SELECT count(*) FROM balances)::int AS balances,
           (SELECT count(*) FROM terms t WHERE t.closed AND
              (SELECT coalesce(sum(amount_captured), 0) - coalesce(sum(fee), 0) FROM charges c WHERE c.account_id = t.account_id AND c.term_id = t.term_id)
              - (SELECT coalesce(sum(amount), 0) - coalesce(sum(refund_fee_offset), 0) FROM refunds r WHERE r.account_id = t.account_id AND r.term_id = t.term_id)
              <> (SELECT coalesce(sum(net), 0) FROM statements s WHERE s.account_id = t.account_id AND s.term_id = t.term_id AND s.type = 'sales'))::int AS unbalanced_terms,
           (SELECT count(*) FROM statements s WHERE s.net <> (SELECT sum(amount) FROM statement_items i WHERE i.account_id = s.account_id AND i.statement_id = s.statement_id))::int AS bad_statements`.execute(db);
  return result.rows[0]!;
}

async function main(): Promise<void> {
  const stamp = `${process.pid}_${Math.floor(performance.timeOrigin)}`;
  const dbName = `kessai_bench_statements_${stamp}`;
  log(`statements benchmark: charges=${CHARGES} refunds=${REFUNDS} accounts=${ACCOUNTS} tenants/account=${TENANTS} server=${new URL(SERVER).host}`);
  await admin((c) => c.query(`CREATE DATABASE "${dbName}"`));
  try {
    const store = await openStore({ databaseUrl: withDatabase(SERVER, dbName), poolSize: 4 });
    try {
      let started = performance.now();
      await migrate(store);
      await seed(store.db);
      log(`seeded in ${seconds(performance.now() - started)} s`);

      // The ceiling first, on the same rows (its run also warms the cache for both).
      started = performance.now();
      const groups = await ceiling(store.db);
      const rawMs = performance.now() - started;
      log(`ceiling: raw aggregation (${groups} groups) in ${seconds(rawMs)} s`);

      const ctx = createContext({ db: store.db, store, clock: new FixedClock(SLOT), ids: seededIds(42), log: silentLogger() });
      started = performance.now();
      const outcome = await new Scheduler(ctx, [termCloseJob], { owner: 'bench' }).runSlot(termCloseJob.name, SLOT);
      const engineMs = performance.now() - started;
      if (outcome.status !== 'succeeded') throw new Error(`the slot did not succeed: ${JSON.stringify(outcome)}`);
      log(`engine:  ${JSON.stringify(outcome.counts)} in ${seconds(engineMs)} s`);
      const check = await verify(store.db);
      log(`verify:  ${JSON.stringify(check)}`);
      if (check.closed !== ACCOUNTS || check.unbalanced_terms !== 0 || check.bad_statements !== 0) throw new Error('verification failed');
      log(`close: ${seconds(engineMs)} s for ${CHARGES} charges + ${REFUNDS} refunds; ratio to the raw aggregation ${(engineMs / rawMs).toFixed(2)}×`);
      log(ceilingRatioLine(rawMs / engineMs));
      log(`target: <= 15 s ${engineMs <= 15_000 ? 'met' : 'MISSED'}`);
    } finally {
      await store.close();
    }
  } finally {
    if (!args.keep) await admin((c) => c.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`));
  }
}

await main();
