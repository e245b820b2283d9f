/**
 * The renewal benchmark's seed and plain-SQL ceiling (bench:renewals; bench:simulate's floor):
 * due subscriptions written set-based, and the rows one renewal slot writes for them (charges
 * with their settlement — fee at the account's rate, the open term — subscription updates,
 * charge.succeeded and subscription.renewed events with the same resource objects) by plain SQL
 * through the engine's own batch loop.
 */
import { sql, type Kysely } from 'kysely';
import { createAccount } from '../../src/accounts/accounts';
import { openTermIdsOpening } from '../../src/settlement/terms';
import { inAccounts } from '../../src/db/account-scope';
import type { Store } from '../../src/db/connect';
import type { Database } from '../../src/db/schema';
import { seededIds } from '../../src/domain/ids';
import { dueAccounts } from '../../src/engine/account-batches';
import { FixedClock } from '../../src/engine/clock';
import { cardFingerprint } from '../../src/processor/test-cards';
import { ceilingBatches, eventDocumentsDigest } from './bench-support';

/** The slot the job runs: 2027-01-01 09:00 JST; every subscription falls due in the hour before it. */
export const SLOT = new Date('2027-01-01T00:00:00.000Z');
/** The earliest due instant of the seed: an hour before the slot (one JST day, so one term). */
const FIRST_DUE = new Date(SLOT.getTime() - 3600 * 1000);

/** Seeds `n` due subscriptions over `accounts` accounts (a customer and a Visa 4242 card each, four plans an account), due in the hour before SLOT. */
export async function seedDueSubscriptions(db: Kysely<Database>, n: number, accounts: number): Promise<void> {
  const ctx = { db, clock: new FixedClock(SLOT), ids: seededIds(1) };
  for (let a = 0; a < accounts; a += 1) await createAccount(ctx, { name: `Bench ${a}`, id: `acct_b${a}` });
  // The term the renewals settle into, opened here so that the engine and the ceiling both find it
  // open (the engine's settlement would open it in its first batch; the ceiling looks terms up only).
  const cycles = await db.selectFrom('accounts').select(['account_id', 'term_cycle']).execute();
  await openTermIdsOpening(
    db,
    ctx.ids,
    cycles.map((account) => ({ accountId: account.account_id, livemode: false, cycle: account.term_cycle, at: FIRST_DUE, testClockId: null })),
  );
  const fingerprint = cardFingerprint('4242424242424242');
  const created = new Date(SLOT.getTime() - 40 * 24 * 3600 * 1000);
  await sql`
    INSERT INTO plans (account_id, livemode, plan_id, amount, interval, created_at, updated_at)
    SELECT 'acct_b' || a, false, 'pln_b' || p, 500 * p, 'month', ${created}, ${created}
    FROM generate_series(0, ${accounts - 1}) AS a, generate_series(1, 4) AS p`.execute(db);
  await sql`
    INSERT INTO customers (account_id, livemode, customer_id, default_card_id, created_at, updated_at)
    SELECT 'acct_b' || (i % ${accounts}), false, 'cus_' || lpad(to_hex(i), 30, '0'), 'car_' || lpad(to_hex(i), 30, '0'), ${created}, ${created}
    FROM generate_series(1, ${n}) AS i`.execute(db);
  await sql`
    INSERT INTO cards (account_id, livemode, card_id, customer_id, fingerprint, brand, last4, exp_month, exp_year, funding, country, issuer, cvc_check, created_at, updated_at)
    SELECT 'acct_b' || (i % ${accounts}), false, 'car_' || lpad(to_hex(i), 30, '0'), 'cus_' || lpad(to_hex(i), 30, '0'), ${fingerprint}, 'Visa', '4242', 12, 2040,
           'credit', 'JP', 'domestic', 'passed', ${created}, ${created}
    FROM generate_series(1, ${n}) AS i`.execute(db);
  // Due instants to the second over the hour before the slot; periods started one month earlier.
  await sql`
    INSERT INTO subscriptions (account_id, livemode, subscription_id, customer_id, plan_id, status, start_at, current_period_start, current_period_end, renews_at, created_at, updated_at)
    SELECT 'acct_b' || (i % ${accounts}), false, 'sub_' || lpad(to_hex(i), 30, '0'), 'cus_' || lpad(to_hex(i), 30, '0'), 'pln_b' || (1 + i % 4), 'active',
           due - interval '1 month', due - interval '1 month', due, due, due - interval '1 month', due - interval '1 month'
    FROM generate_series(1, ${n}) AS i, LATERAL (SELECT ${SLOT}::timestamptz - make_interval(secs => (i::bigint * 7919) % 3600) AS due) d`.execute(db);
  await sql`VACUUM ANALYZE`.execute(db);
}

/**
 * The plain-SQL ceiling: the same rows the job writes, computed in the server, batch by batch
 * through the engine's own loop (ceilingBatches: account by account, the due index), one statement
 * a batch that names the batch's accounts on every table it reads.
 */
export async function renewalCeiling(store: Store, batchSize: number): Promise<number> {
  return ceilingBatches(store, SLOT, batchSize, (d, cap) => dueAccounts(d, 'subscriptions', sql`d.renews_at IS NOT NULL AND d.renews_at <= ${SLOT}`, cap), ceilingBatch);
}

/** One batch of the ceiling: the accounts' oldest due subscriptions, renewed with their charges and events. */
async function ceilingBatch(trx: Kysely<Database>, accountIds: readonly string[], limit: number): Promise<number> {
  const result = await sql<{ n: number }>`
    WITH due AS (
      SELECT s.*, row_number() OVER () AS k FROM (
        SELECT * FROM subscriptions WHERE ${inAccounts('account_id', accountIds)} AND renews_at IS NOT NULL AND renews_at <= ${SLOT}
        ORDER BY renews_at, account_id, livemode, subscription_id LIMIT ${limit} FOR UPDATE SKIP LOCKED) s
    ), held_terms AS (
      -- The accounts' open terms, held FOR SHARE as the engine's settlement holds the term it settles into.
      SELECT t.account_id, t.livemode, t.term_id, t.start_at, t.end_at FROM terms t
      WHERE ${inAccounts('t.account_id', accountIds)} AND t.test_clock_id IS NULL AND NOT t.closed FOR SHARE
    ), priced AS (
      SELECT d.*, p.amount, fr.fee_rate, floor(p.amount * fr.fee_rate / 100)::int AS fee, tm.term_id, p.created_at AS plan_created, p.name AS plan_name, p.trial_days, p.billing_day, p.metadata AS plan_metadata,
             card.card_id, card.created_at AS card_created, card.brand, card.last4, card.exp_month, card.exp_year, card.fingerprint, card.country, card.cvc_check,
             'ch_' || substr(md5(d.subscription_id || 'c'), 1, 30) AS charge_id,
             d.current_period_end + interval '1 month' AS new_end
      FROM due d
      JOIN plans p ON ${inAccounts('p.account_id', accountIds)} AND p.account_id = d.account_id AND p.livemode = d.livemode AND p.plan_id = d.plan_id
      JOIN customers cu ON ${inAccounts('cu.account_id', accountIds)} AND cu.account_id = d.account_id AND cu.livemode = d.livemode AND cu.customer_id = d.customer_id AND cu.deleted_at IS NULL
      JOIN cards card ON ${inAccounts('card.account_id', accountIds)} AND card.account_id = cu.account_id AND card.livemode = cu.livemode AND card.card_id = cu.default_card_id AND card.deleted_at IS NULL
      JOIN account_fee_rates fr ON ${inAccounts('fr.account_id', accountIds)} AND fr.account_id = d.account_id AND fr.brand = card.brand
      JOIN held_terms tm ON tm.account_id = d.account_id AND tm.livemode = d.livemode AND tm.start_at <= d.renews_at AND d.renews_at < tm.end_at
    ), charged AS (
      INSERT INTO charges (account_id, livemode, charge_id, amount, currency, paid, captured, captured_at, amount_captured, card_id, customer_id, subscription_id, period_start, fee_rate,
                           created_at, updated_at, fee, total_platform_fee, term_id)
      SELECT account_id, livemode, charge_id, amount, 'jpy', true, true, renews_at, amount, card_id, customer_id, subscription_id, current_period_end, fee_rate,
             renews_at, renews_at, fee, 0, term_id FROM priced
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
          'customer', p.customer_id, 'description', null, 'failure_code', null, 'failure_message', null, 'fee_rate', p.fee_rate::text, 'refunded', false, 'amount_refunded', 0,
          'refund_reason', null, 'subscription', p.subscription_id, 'metadata', '{}'::jsonb, 'platform_fee', null, 'tenant', null, 'platform_fee_rate', null,
          'total_platform_fee', 0, 'three_d_secure_status', null, 'term_id', p.term_id)),
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

export interface RenewalVerification {
  readonly subscriptions: number;
  readonly renewed: number;
  readonly charges: number;
  readonly charged_twice: number;
  /** Charges settled as the engine settles a capture: in the open term of their instant, fee floor(amount × fee_rate / 100). */
  readonly settled: number;
  readonly renewed_events: number;
  readonly charge_events: number;
  /** A digest of those events' documents without their ids (order-free): the engine's and the ceiling's must be equal. */
  readonly documents: string;
}

/** What a renewal slot wrote, read back. */
export async function verifyRenewals(db: Kysely<Database>): Promise<RenewalVerification> {
  const result = await sql<RenewalVerification>`
    SELECT (SELECT count(*) FROM subscriptions)::int AS subscriptions,
           (SELECT count(*) FROM subscriptions s JOIN charges c ON c.account_id = s.account_id AND c.livemode = s.livemode AND c.charge_id = s.last_charge_id
             WHERE s.status = 'active' AND s.renews_at > ${SLOT} AND s.current_period_start = c.period_start AND c.created_at = c.period_start AND c.paid)::int AS renewed,
           (SELECT count(*) FROM charges)::int AS charges,
           (SELECT count(*) FROM (SELECT 1 FROM charges GROUP BY account_id, livemode, subscription_id HAVING count(*) > 1) d)::int AS charged_twice,
           (SELECT count(*) FROM charges c JOIN terms t ON t.account_id = c.account_id AND t.livemode = c.livemode AND t.term_id = c.term_id
             WHERE t.start_at <= c.captured_at AND c.captured_at < t.end_at AND c.amount_captured = c.amount AND c.fee = floor(c.amount * c.fee_rate / 100))::int AS settled,
           (SELECT count(*) FROM events WHERE type = 'subscription.renewed')::int AS renewed_events,
           (SELECT count(*) FROM events WHERE type = 'charge.succeeded')::int AS charge_events,
           ${eventDocumentsDigest(['charge.succeeded', 'subscription.renewed'])} AS documents`.execute(db);
  return result.rows[0]!;
}
