/**
 * Bulk populations of due subscriptions for the renewal job's tests, written with set-based SQL
 * (generate_series): one customer with one default card per subscription, across a few accounts
 * and plans. The subscriptions operations are not needed: rows are written as they would stand.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/db/schema';
import { cardFingerprint } from '../../src/processor/test-cards';

export interface DueSeed {
  readonly count: number;
  /** Every subscription's current_period_end (= renews_at). */
  readonly dueAt: Date;
  /** Accounts the rows spread over (ids acct_r0 …), created when missing (settlement reads their term cycle). */
  readonly accounts?: number;
  /** Test card number of every card; default Visa 4242…, approved for renewals. */
  readonly cardNumber?: string;
  /** Id prefix, so two seeds do not collide. */
  readonly prefix?: string;
}

/** Writes plans (1000 and 2000 yen, monthly, no billing_day) and `count` active subscriptions due at `dueAt`. */
export async function seedDueSubscriptions(db: Kysely<Database>, seed: DueSeed): Promise<void> {
  const accounts = seed.accounts ?? 3;
  const prefix = seed.prefix ?? 'r';
  const fingerprint = cardFingerprint(seed.cardNumber ?? '4242424242424242');
  const start = new Date(seed.dueAt.getTime() - 31 * 24 * 60 * 60 * 1000);
  await sql`
    INSERT INTO accounts (account_id, name, term_cycle, created_at)
    SELECT 'acct_r' || a, 'Renewal seed ' || a, 'monthly', ${start}
    FROM generate_series(0, ${accounts - 1}) AS a
    ON CONFLICT DO NOTHING`.execute(db);
  await sql`
    INSERT INTO plans (account_id, livemode, plan_id, amount, interval, created_at, updated_at)
    SELECT 'acct_r' || a, false, 'pln_' || ${prefix} || p, 1000 * p, 'month', ${start}, ${start}
    FROM generate_series(0, ${accounts - 1}) AS a, generate_series(1, 2) AS p
    ON CONFLICT DO NOTHING`.execute(db);
  await sql`
    INSERT INTO customers (account_id, livemode, customer_id, default_card_id, created_at, updated_at)
    SELECT 'acct_r' || (i % ${accounts}), false, 'cus_' || ${prefix} || i, 'car_' || ${prefix} || i, ${start}, ${start}
    FROM generate_series(1, ${seed.count}) AS i`.execute(db);
  await sql`
    INSERT INTO cards (account_id, livemode, card_id, customer_id, fingerprint, brand, last4, exp_month, exp_year, funding, country, issuer, cvc_check, created_at, updated_at)
    SELECT 'acct_r' || (i % ${accounts}), false, 'car_' || ${prefix} || i, 'cus_' || ${prefix} || i, ${fingerprint}, 'Visa', '4242', 12, 2040, 'credit', 'JP', 'domestic', 'passed', ${start}, ${start}
    FROM generate_series(1, ${seed.count}) AS i`.execute(db);
  await sql`
    INSERT INTO subscriptions (account_id, livemode, subscription_id, customer_id, plan_id, status, start_at, current_period_start, current_period_end, renews_at, created_at, updated_at)
    SELECT 'acct_r' || (i % ${accounts}), false, 'sub_' || ${prefix} || lpad(i::text, 8, '0'), 'cus_' || ${prefix} || i, 'pln_' || ${prefix} || (1 + i % 2), 'active',
           ${start}, ${start}, ${seed.dueAt}, ${seed.dueAt}, ${start}, ${start}
    FROM generate_series(1, ${seed.count}) AS i`.execute(db);
}

export interface RenewalTally {
  /** Subscriptions seeded under the prefix. */
  readonly subscriptions: number;
  /** Of them, renewed (renews_at moved past the seed's due instant). */
  readonly renewed: number;
  readonly charges: number;
  /** Subscriptions with more than one charge. */
  readonly charged_twice: number;
  /** Renewed subscriptions whose last_charge_id is not their charge, or charges without a renewal. */
  readonly mismatched: number;
  readonly renewed_events: number;
  readonly charge_events: number;
}

/** Counts that prove "every due subscription charged exactly once" for a seed. */
export async function tallyRenewals(db: Kysely<Database>, dueAt: Date, prefix = 'r'): Promise<RenewalTally> {
  const like = `sub_${prefix}%`;
  const result = await sql<RenewalTally>`
    SELECT
      (SELECT count(*) FROM subscriptions WHERE subscription_id LIKE ${like})::int AS subscriptions,
      (SELECT count(*) FROM subscriptions WHERE subscription_id LIKE ${like} AND renews_at > ${dueAt} AND current_period_start = ${dueAt})::int AS renewed,
      (SELECT count(*) FROM charges WHERE subscription_id LIKE ${like})::int AS charges,
      (SELECT count(*) FROM (SELECT 1 FROM charges WHERE subscription_id LIKE ${like} GROUP BY account_id, livemode, subscription_id HAVING count(*) > 1) d)::int AS charged_twice,
      (SELECT count(*) FROM charges c FULL JOIN (SELECT * FROM subscriptions WHERE last_charge_id IS NOT NULL) s
         ON s.account_id = c.account_id AND s.livemode = c.livemode AND s.last_charge_id = c.charge_id
       WHERE (c.subscription_id LIKE ${like} OR s.subscription_id LIKE ${like}) AND (c.charge_id IS NULL OR s.subscription_id IS NULL))::int AS mismatched,
      (SELECT count(*) FROM events WHERE type = 'subscription.renewed' AND resource_id LIKE ${like})::int AS renewed_events,
      (SELECT count(*) FROM events WHERE type = 'charge.succeeded' AND data->>'subscription' LIKE ${like})::int AS charge_events`.execute(db);
  return result.rows[0]!;
}
