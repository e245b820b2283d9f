/**
 * Benchmark of the renewal job (`npm run bench:renewals -- --n 1000000 [--batch 5000] [--workers N]`;
 * with `--workers N` the slot is run by N kessai worker processes sharing its account groups).
 *
 * On the PostgreSQL server named by DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 * it creates a scratch database, migrates it, seeds N due subscriptions with set-based SQL (one
 * customer and one Visa 4242 card each, over several accounts and plans, due instants spread over
 * the hour before the slot), copies the seed (CREATE DATABASE … TEMPLATE), then:
 *
 *   1. engine: runs the `subscriptions.renew` slot once through the Scheduler, and checks with SQL
 *      that every subscription was renewed exactly once (one charge, two events, new period);
 *   2. ceiling: on the copy, writes the same rows (charges, subscription updates, charge.succeeded
 *      and subscription.renewed events with the resource objects) with plain set-based SQL in
 *      batches of the same size taken account by account through the due index exactly as the
 *      engine takes them (ceilingBatches), no engine logic and no data through Node;
 *
 * and prints renewals/s, the ratio engine/ceiling (above 1.25 it says the ceiling is wrong) and
 * the process's peak RSS. Both databases are
 * dropped at the end (also on failure). Not a timed test: targets are read by a person.
 */
import { parseArgs } from 'node:util';
import { sql, type Kysely } from 'kysely';
import { subscriptionRenewalsJob } from '../../jobs/subscription-renewals';
import { createAccount } from '../../src/accounts/accounts';
import { inAccounts } from '../../src/db/account-scope';
import type { Store } from '../../src/db/connect';
import type { Database } from '../../src/db/schema';
import { seededIds } from '../../src/domain/ids';
import { dueAccounts } from '../../src/engine/account-batches';
import { FixedClock } from '../../src/engine/clock';
import { DEFAULT_CONFIG } from '../../src/engine/context';
import { cardFingerprint } from '../../src/processor/test-cards';
import { ceilingBatches, ceilingRatioLine, log, runEngineAgainstCeiling, SERVER } from './bench-support';

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', default: '1000000' },
    // The engine's own batch size unless told otherwise: at 100,000 renewals, 5,000 a batch ran at
    // 6,313/s with 371 MB peak RSS against 5,893/s and 608 MB for 10,000 a batch.
    batch: { type: 'string', default: String(DEFAULT_CONFIG.batchSize) },
    accounts: { type: 'string', default: '20' },
    // Kessai worker processes sharing the slot (its account groups); unset: one scheduler in this process.
    workers: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
const N = Number(args.n);
const BATCH = Number(args.batch);
const ACCOUNTS = Number(args.accounts);
const WORKERS = args.workers === undefined ? undefined : Number(args.workers);
/** The slot the job runs: 2027-01-01 09:00 JST; every subscription falls due in the hour before it. */
const SLOT = new Date('2027-01-01T00:00:00.000Z');



async function seed(db: Kysely<Database>): Promise<void> {
  const ctx = { db, clock: new FixedClock(SLOT), ids: seededIds(1) };
  for (let a = 0; a < ACCOUNTS; a += 1) await createAccount(ctx, { name: `Bench ${a}`, id: `acct_b${a}` });
  const fingerprint = cardFingerprint('4242424242424242');
  const created = new Date(SLOT.getTime() - 40 * 24 * 3600 * 1000);
  await sql`
    INSERT INTO plans (account_id, livemode, plan_id, amount, interval, created_at, updated_at)
    SELECT 'acct_b' || a, false, 'pln_b' || p, 500 * p, 'month', ${created}, ${created}
    FROM generate_series(0, ${ACCOUNTS - 1}) AS a, generate_series(1, 4) AS p`.execute(db);
  await sql`
    INSERT INTO customers (account_id, livemode, customer_id, default_card_id, created_at, updated_at)
    SELECT 'acct_b' || (i % ${ACCOUNTS}), false, 'cus_' || lpad(to_hex(i), 30, '0'), 'car_' || lpad(to_hex(i), 30, '0'), ${created}, ${created}
    FROM generate_series(1, ${N}) AS i`.execute(db);
  await sql`
    INSERT INTO cards (account_id, livemode, card_id, customer_id, fingerprint, brand, last4, exp_month, exp_year, funding, country, issuer, cvc_check, created_at, updated_at)
    SELECT 'acct_b' || (i % ${ACCOUNTS}), false, 'car_' || lpad(to_hex(i), 30, '0'), 'cus_' || lpad(to_hex(i), 30, '0'), ${fingerprint}, 'Visa', '4242', 12, 2040,
           'credit', 'JP', 'domestic', 'passed', ${created}, ${created}
    FROM generate_series(1, ${N}) AS i`.execute(db);
  // Due instants to the second over the hour before the slot; periods started one month earlier.
  await sql`
    INSERT INTO subscriptions (account_id, livemode, subscription_id, customer_id, plan_id, status, start_at, current_period_start, current_period_end, renews_at, created_at, updated_at)
    SELECT 'acct_b' || (i % ${ACCOUNTS}), false, 'sub_' || lpad(to_hex(i), 30, '0'), 'cus_' || lpad(to_hex(i), 30, '0'), 'pln_b' || (1 + i % 4), 'active',
           due - interval '1 month', due - interval '1 month', due, due, due - interval '1 month', due - interval '1 month'
    FROM generate_series(1, ${N}) AS i, LATERAL (SELECT ${SLOT}::timestamptz - make_interval(secs => (i::bigint * 7919) % 3600) AS due) d`.execute(db);
  await sql`VACUUM ANALYZE`.execute(db);
}

/**
 * The plain-SQL ceiling: the same rows the job writes, computed in the server, batch by batch
 * through the engine's own loop (ceilingBatches: account by account, the due index), one statement
 * a batch that names the batch's accounts on every table it reads.
 */
async function ceiling(store: Store): Promise<number> {
  return ceilingBatches(store, SLOT, BATCH, (d, cap) => dueAccounts(d, 'subscriptions', sql`d.renews_at IS NOT NULL AND d.renews_at <= ${SLOT}`, cap), ceilingBatch);
}

/** One batch of the ceiling: the accounts' oldest due subscriptions, renewed with their charges and events. */
async function ceilingBatch(trx: Kysely<Database>, accountIds: readonly string[], limit: number): Promise<number> {
  const result = await sql<{ n: number }>`
    WITH due AS (
      SELECT s.*, row_number() OVER () AS k FROM (
        SELECT * FROM subscriptions WHERE ${inAccounts('account_id', accountIds)} AND renews_at IS NOT NULL AND renews_at <= ${SLOT}
        ORDER BY renews_at, account_id, livemode, subscription_id LIMIT ${limit} FOR UPDATE SKIP LOCKED) s
    ), priced AS (
      SELECT d.*, p.amount, p.created_at AS plan_created, p.name AS plan_name, p.trial_days, p.billing_day, p.metadata AS plan_metadata,
             card.card_id, card.created_at AS card_created, card.brand, card.last4, card.exp_month, card.exp_year, card.fingerprint, card.country, card.cvc_check,
             'ch_' || substr(md5(d.subscription_id || 'c'), 1, 30) AS charge_id,
             d.current_period_end + interval '1 month' AS new_end
      FROM due d
      JOIN plans p ON ${inAccounts('p.account_id', accountIds)} AND p.account_id = d.account_id AND p.livemode = d.livemode AND p.plan_id = d.plan_id
      JOIN customers cu ON ${inAccounts('cu.account_id', accountIds)} AND cu.account_id = d.account_id AND cu.livemode = d.livemode AND cu.customer_id = d.customer_id AND cu.deleted_at IS NULL
      JOIN cards card ON ${inAccounts('card.account_id', accountIds)} AND card.account_id = cu.account_id AND card.livemode = cu.livemode AND card.card_id = cu.default_card_id AND card.deleted_at IS NULL
    ), charged AS (
      INSERT INTO charges (account_id, livemode, charge_id, amount, currency, paid, captured, captured_at, card_id, customer_id, subscription_id, period_start, fee_rate, created_at, updated_at)
      SELECT account_id, livemode, charge_id, amount, 'jpy', true, true, renews_at, card_id, customer_id, subscription_id, current_period_end, 3.00, renews_at, renews_at FROM priced
    ), updated AS (
      UPDATE subscriptions s SET status = 'active', current_period_start = p.current_period_end, current_period_end = p.new_end, renews_at = p.new_end,
             last_charge_id = p.charge_id, updated_at = p.renews_at
      FROM priced p WHERE ${inAccounts('s.account_id', accountIds)} AND s.account_id = p.account_id AND s.livemode = p.livemode AND s.subscription_id = p.subscription_id
    ), events_written AS (
      INSERT INTO events (account_id, event_id, livemode, api_version, type, object_type, resource_id, data, created_at)
      SELECT account_id, 'evnt_' || substr(md5(subscription_id || e.type), 1, 30), livemode, 'v1', e.type, e.object, e.id, e.data, renews_at
      FROM priced p, LATERAL (VALUES
        (1, 'charge.succeeded', 'charge', p.charge_id, json_build_object(
          'id', p.charge_id, 'object', 'charge', 'livemode', p.livemode, 'created', extract(epoch FROM p.renews_at)::bigint, 'amount', p.amount, 'currency', 'jpy',
          'paid', true, 'expired_at', null, 'captured', true, 'captured_at', extract(epoch FROM p.renews_at)::bigint,
          'card', json_build_object('id', p.card_id, 'object', 'card', 'livemode', p.livemode, 'created', extract(epoch FROM p.card_created)::bigint, 'customer', p.customer_id,
            'brand', p.brand, 'last4', p.last4, 'exp_month', p.exp_month, 'exp_year', p.exp_year, 'fingerprint', p.fingerprint, 'name', null, 'country', p.country,
            'address_zip', null, 'address_state', null, 'address_city', null, 'address_line1', null, 'address_line2', null, 'address_zip_check', 'unchecked',
            'cvc_check', p.cvc_check, 'three_d_secure_status', null, 'email', null, 'phone', null, 'metadata', '{}'::jsonb),
          'customer', p.customer_id, 'description', null, 'failure_code', null, 'failure_message', null, 'fee_rate', '3.00', 'refunded', false, 'amount_refunded', 0,
          'refund_reason', null, 'subscription', p.subscription_id, 'metadata', '{}'::jsonb, 'platform_fee', null, 'tenant', null, 'platform_fee_rate', null,
          'total_platform_fee', 0, 'three_d_secure_status', null, 'term_id', null)),
        (2, 'subscription.renewed', 'subscription', p.subscription_id, json_build_object(
          'id', p.subscription_id, 'object', 'subscription', 'livemode', p.livemode, 'created', extract(epoch FROM p.created_at)::bigint,
          'start', extract(epoch FROM p.start_at)::bigint, 'customer', p.customer_id,
          'plan', json_build_object('id', p.plan_id, 'object', 'plan', 'livemode', p.livemode, 'created', extract(epoch FROM p.plan_created)::bigint, 'amount', p.amount,
            'currency', 'jpy', 'interval', 'month', 'name', p.plan_name, 'trial_days', p.trial_days, 'billing_day', p.billing_day, 'metadata', p.plan_metadata),
          'next_cycle_plan', null, 'status', 'active', 'prorate', p.prorate, 'current_period_start', extract(epoch FROM p.current_period_end)::bigint,
          'current_period_end', extract(epoch FROM p.new_end)::bigint, 'trial_start', null, 'trial_end', null, 'paused_at', null, 'canceled_at', null,
          'resumed_at', null, 'metadata', p.metadata))
      ) AS e(ord, type, object, id, data)
      ORDER BY p.k, e.ord
    )
    SELECT count(*)::int AS n FROM due`.execute(trx);
  return result.rows[0]!.n;
}

interface Verification {
  readonly subscriptions: number;
  readonly renewed: number;
  readonly charges: number;
  readonly charged_twice: number;
  readonly renewed_events: number;
  readonly charge_events: number;
}

async function verify(db: Kysely<Database>): Promise<Verification> {
  const result = await sql<Verification>`
    SELECT (SELECT count(*) FROM subscriptions)::int AS subscriptions,
           (SELECT count(*) FROM subscriptions s JOIN charges c ON c.account_id = s.account_id AND c.livemode = s.livemode AND c.charge_id = s.last_charge_id
             WHERE s.status = 'active' AND s.renews_at > ${SLOT} AND s.current_period_start = c.period_start AND c.created_at = c.period_start AND c.paid)::int AS renewed,
           (SELECT count(*) FROM charges)::int AS charges,
           (SELECT count(*) FROM (SELECT 1 FROM charges GROUP BY account_id, livemode, subscription_id HAVING count(*) > 1) d)::int AS charged_twice,
           (SELECT count(*) FROM events WHERE type = 'subscription.renewed')::int AS renewed_events,
           (SELECT count(*) FROM events WHERE type = 'charge.succeeded')::int AS charge_events`.execute(db);
  return result.rows[0]!;
}

async function main(): Promise<void> {
  log(`renewal benchmark: n=${N} batch=${BATCH} accounts=${ACCOUNTS} workers=${WORKERS ?? 'in-process'} server=${new URL(SERVER).host}`);
  const { engineMs, ceilingMs, rssMb } = await runEngineAgainstCeiling({
    name: 'renew',
    seeded: `${N} due subscriptions`,
    unit: 'renewals',
    job: subscriptionRenewalsJob,
    slot: SLOT,
    batchSize: BATCH,
    workers: WORKERS,
    keep: args.keep ?? false,
    seed,
    ceiling,
    verify,
    exact: (check) => check.subscriptions === N && check.renewed === N && check.charges === N && check.charged_twice === 0 && check.renewed_events === N && check.charge_events === N,
    same: (check) => check.renewed === N && check.renewed_events === N && check.charge_events === N,
  });
  const engineRate = N / (engineMs / 1000);
  const rawRate = N / (ceilingMs / 1000);
  log(`renewals/s: ${Math.round(engineRate)} (ceiling ${Math.round(rawRate)}/s, ratio ${(engineRate / rawRate).toFixed(2)})`);
  log(ceilingRatioLine(engineRate / rawRate));
  log(`peak RSS: ${rssMb.toFixed(0)} MB`);
  log(
    `targets: >= 20000/s ${engineRate >= 20_000 ? 'met' : 'MISSED'}; ratio >= 0.5 ${engineRate / rawRate >= 0.5 ? 'met' : 'MISSED'}; RSS <= 512 MB ${rssMb <= 512 ? 'met' : 'MISSED'}`,
  );
}

await main();
