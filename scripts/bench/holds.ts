/**
 * Benchmark of the hold-expiry job (`npm run bench:holds -- --n 1000000 [--batch 5000]`).
 *
 * On the PostgreSQL server named by DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 * it creates a scratch database, migrates it, seeds N uncaptured v1 holds with set-based SQL (mixed
 * brands, domestic and overseas issuers, credit, debit and prepaid funding; four in five on a
 * customer's stored card, one in five on a token's card), half of them past `expired_at` at the
 * slot and half not yet, copies the seed (CREATE DATABASE … TEMPLATE), then:
 *
 *   1. engine: runs the `charges.expire_holds` slot once through the Scheduler and checks with SQL
 *      that every due hold was released exactly once (released_at = its own expired_at, one
 *      `charge.updated` event at that instant, `charge.refunded` for a debit or prepaid card's
 *      hold, whose money was taken at authorization and is refunded) and no other hold was touched;
 *   2. ceiling: on the copy, writes the same rows (charge updates and events with the charge
 *      objects) with plain set-based SQL in batches of the same size taken account by account
 *      through the due index exactly as the engine takes them (ceilingBatches), no network call,
 *      no engine logic and no data through Node;
 *
 * and prints released holds/s, the ratio engine/ceiling (above 1.25 it says the ceiling is wrong)
 * and the process's peak RSS. Both databases
 * are dropped at the end (also on failure) unless --keep. Not a timed test: targets are read by a person.
 */
import { parseArgs } from 'node:util';
import { sql, type Kysely } from 'kysely';
import { holdExpiryJob } from '../../jobs/hold-expiry';
import { DEBITED_AT_AUTHORIZATION } from '../../src/charges/hold-jobs';
import { createAccount } from '../../src/accounts/accounts';
import { inAccounts } from '../../src/db/account-scope';
import type { Store } from '../../src/db/connect';
import type { Database } from '../../src/db/schema';
import { seededIds } from '../../src/domain/ids';
import { dueAccounts } from '../../src/engine/account-batches';
import { FixedClock } from '../../src/engine/clock';
import { DEFAULT_CONFIG } from '../../src/engine/context';
import { cardFingerprint, TEST_CARDS } from '../../src/processor/test-cards';
import { ceilingBatches, ceilingRatioLine, eventDocumentsDigest, log, runEngineAgainstCeiling, SERVER } from './bench-support';

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', default: '1000000' },
    // The engine's own batch size unless told otherwise (as bench:renewals).
    batch: { type: 'string', default: String(DEFAULT_CONFIG.batchSize) },
    accounts: { type: 'string', default: '20' },
    keep: { type: 'boolean', default: false },
  },
});
const N = Number(args.n);
const BATCH = Number(args.batch);
const ACCOUNTS = Number(args.accounts);
/** The slot the job runs: 2027-01-01 09:00 JST. Odd holds lapsed in the hour before it, even ones lapse in the hour after. */
const SLOT = new Date('2027-01-01T00:00:00.000Z');
const DUE = Math.ceil(N / 2);



/** The card mix: brand, last4, funding, issuer, country, fingerprint of real test cards. */
const MIX = [TEST_CARDS.visa, TEST_CARDS.mastercard, TEST_CARDS.jcb, TEST_CARDS.overseas, TEST_CARDS.debit, TEST_CARDS.prepaid, TEST_CARDS.americanExpress];

async function seed(db: Kysely<Database>): Promise<void> {
  const ctx = { db, clock: new FixedClock(SLOT), ids: seededIds(1) };
  for (let a = 0; a < ACCOUNTS; a += 1) await createAccount(ctx, { name: `Bench ${a}`, id: `acct_h${a}` });
  const created = new Date(SLOT.getTime() - 10 * 24 * 3600 * 1000);
  const mix = JSON.stringify(MIX.map((c, m) => ({ m, brand: c.brand, last4: c.last4, funding: c.funding, issuer: c.issuer, country: c.country, fp: cardFingerprint(c.number) })));
  await sql`CREATE TEMP TABLE mix AS SELECT * FROM json_to_recordset(${mix}::json) AS x(m int, brand text, last4 text, funding text, issuer text, country text, fp text)`.execute(db);
  // i % 5 = 0: the card of a token (charge without customer); otherwise a customer's stored card.
  await sql`
    INSERT INTO customers (account_id, livemode, customer_id, default_card_id, created_at, updated_at)
    SELECT 'acct_h' || (i % ${ACCOUNTS}), false, 'cus_' || lpad(to_hex(i), 30, '0'), 'car_' || lpad(to_hex(i), 30, '0'), ${created}, ${created}
    FROM generate_series(1, ${N}) AS i WHERE i % 5 <> 0`.execute(db);
  await sql`
    INSERT INTO cards (account_id, livemode, card_id, customer_id, fingerprint, brand, last4, exp_month, exp_year, funding, country, issuer, cvc_check, created_at, updated_at)
    SELECT 'acct_h' || (i % ${ACCOUNTS}), false, 'car_' || lpad(to_hex(i), 30, '0'), 'cus_' || lpad(to_hex(i), 30, '0'), x.fp, x.brand, x.last4, 12, 2040,
           x.funding, x.country, x.issuer, 'passed', ${created}, ${created}
    FROM generate_series(1, ${N}) AS i JOIN mix x ON x.m = i % ${MIX.length} WHERE i % 5 <> 0`.execute(db);
  await sql`
    INSERT INTO tokens (account_id, livemode, token_id, card_id, fingerprint, brand, last4, exp_month, exp_year, funding, country, issuer, cvc_check, created_at, used_at)
    SELECT 'acct_h' || (i % ${ACCOUNTS}), false, 'tok_' || lpad(to_hex(i), 30, '0'), 'car_' || lpad(to_hex(i), 30, '0'), x.fp, x.brand, x.last4, 12, 2040,
           x.funding, x.country, x.issuer, 'passed', ${created}, ${created}
    FROM generate_series(1, ${N}) AS i JOIN mix x ON x.m = i % ${MIX.length} WHERE i % 5 = 0`.execute(db);
  // Odd i: expired_at in the hour before the slot (due); even i: in the hour after (not due).
  await sql`
    INSERT INTO charges (account_id, livemode, charge_id, amount, currency, paid, captured, expired_at, card_id, customer_id, fee_rate, metadata,
                         created_at, updated_at, capture_requested, expiry_days, card_funding, card_issuer, authorization_code, authorized_at)
    SELECT 'acct_h' || (i % ${ACCOUNTS}), false, 'ch_' || lpad(to_hex(i), 30, '0'), 100 + i % 9000, 'jpy', true, false, e.at,
           'car_' || lpad(to_hex(i), 30, '0'), CASE WHEN i % 5 <> 0 THEN 'cus_' || lpad(to_hex(i), 30, '0') END, 3.00, '{}',
           e.at - interval '7 days', e.at - interval '7 days', false, 7, x.funding, x.issuer, lpad(((i::bigint * 7919) % 1000000)::text, 6, '0'), e.at - interval '7 days'
    FROM generate_series(1, ${N}) AS i JOIN mix x ON x.m = i % ${MIX.length},
         LATERAL (SELECT ${SLOT}::timestamptz + CASE WHEN i % 2 = 1 THEN -1 ELSE 1 END * make_interval(secs => 1 + (i::bigint * 7919) % 3599) AS at) e`.execute(db);
  await sql`VACUUM ANALYZE`.execute(db);
}

/** The events of a release: `charge.updated`, or `charge.refunded` for a hold debited at authorization. */
const RELEASE_EVENT_TYPES = ['charge.updated', 'charge.refunded'];
const RELEASE_EVENTS = sql.join(RELEASE_EVENT_TYPES);

/** The due predicate of the job (expireHolds), for its list of accounts with due holds. */
const DUE_HOLD = sql`d.paid AND NOT d.captured AND NOT d.refunded AND d.released_at IS NULL AND d.expired_at IS NOT NULL AND d.expired_at < ${SLOT}`;

/**
 * The plain-SQL ceiling: the same charge updates and events, computed in the server, batch by
 * batch through the engine's own loop (ceilingBatches: account by account, the due index).
 */
async function ceiling(store: Store): Promise<number> {
  return ceilingBatches(store, SLOT, BATCH, (d, cap) => dueAccounts(d, 'charges', DUE_HOLD, cap), ceilingBatch);
}

/** One batch of the ceiling: the accounts' oldest lapsed holds released, each with its event. */
async function ceilingBatch(trx: Kysely<Database>, accountIds: readonly string[], limit: number): Promise<number> {
  // Key probes rather than a hash of the whole table for the UPDATE's join (the engine addresses
  // its locked rows by tuple id in a separate statement; inside one statement a tuple id would
  // miss a row a concurrent update moved, so the ceiling joins by key).
  await sql`SET LOCAL enable_hashjoin = off`.execute(trx);
  await sql`SET LOCAL enable_mergejoin = off`.execute(trx);
  const result = await sql<{ n: number }>`
    WITH due AS (
      SELECT account_id, livemode, charge_id FROM charges
      WHERE ${inAccounts('account_id', accountIds)} AND paid AND NOT captured AND NOT refunded AND released_at IS NULL AND expired_at IS NOT NULL AND expired_at < ${SLOT}
      ORDER BY expired_at, account_id, livemode, charge_id LIMIT ${limit} FOR UPDATE SKIP LOCKED
    ), released AS (
      UPDATE charges c SET released_at = c.expired_at, updated_at = c.expired_at,
        refunded = c.refunded OR ${DEBITED_AT_AUTHORIZATION}, amount_refunded = CASE WHEN ${DEBITED_AT_AUTHORIZATION} THEN c.amount ELSE c.amount_refunded END
      FROM due WHERE ${inAccounts('c.account_id', accountIds)} AND c.account_id = due.account_id AND c.livemode = due.livemode AND c.charge_id = due.charge_id
      RETURNING c.*
    ), written AS (
      INSERT INTO events (account_id, event_id, livemode, api_version, type, object_type, resource_id, data, created_at)
      SELECT c.account_id, 'evnt_' || substr(md5(c.charge_id), 1, 30), c.livemode, 'v1', CASE WHEN c.refunded THEN 'charge.refunded' ELSE 'charge.updated' END, 'charge', c.charge_id,
        json_build_object(
          'id', c.charge_id, 'object', 'charge', 'livemode', c.livemode, 'created', floor(extract(epoch FROM c.created_at))::bigint,
          'amount', c.amount, 'currency', c.currency, 'paid', c.paid, 'expired_at', floor(extract(epoch FROM c.expired_at))::bigint,
          'captured', c.captured, 'captured_at', NULL,
          'card', json_build_object(
            'id', c.card_id, 'object', 'card', 'livemode', c.livemode, 'created', floor(extract(epoch FROM coalesce(cd.created_at, tk.created_at)))::bigint,
            'customer', cd.customer_id, 'brand', coalesce(cd.brand, tk.brand), 'last4', coalesce(cd.last4, tk.last4),
            'exp_month', coalesce(cd.exp_month, tk.exp_month), 'exp_year', coalesce(cd.exp_year, tk.exp_year),
            'fingerprint', coalesce(cd.fingerprint, tk.fingerprint), 'name', coalesce(cd.name, tk.name), 'country', coalesce(cd.country, tk.country),
            'address_zip', cd.address_zip, 'address_state', cd.address_state, 'address_city', cd.address_city,
            'address_line1', cd.address_line1, 'address_line2', cd.address_line2, 'address_zip_check', 'unchecked',
            'cvc_check', coalesce(cd.cvc_check, tk.cvc_check), 'three_d_secure_status', NULL, 'email', cd.email, 'phone', cd.phone,
            'metadata', coalesce(cd.metadata, '{}'::jsonb)),
          'customer', c.customer_id, 'description', c.description, 'failure_code', NULL, 'failure_message', NULL,
          'fee_rate', c.fee_rate::text, 'refunded', c.refunded, 'amount_refunded', c.amount_refunded, 'refund_reason', NULL,
          'subscription', NULL, 'metadata', c.metadata, 'platform_fee', c.platform_fee, 'tenant', c.tenant_id, 'platform_fee_rate', c.platform_fee_rate::text,
          'total_platform_fee', c.total_platform_fee, 'three_d_secure_status', NULL, 'term_id', c.term_id),
        c.expired_at
      FROM released c
      LEFT JOIN cards cd ON ${inAccounts('cd.account_id', accountIds)} AND cd.account_id = c.account_id AND cd.livemode = c.livemode AND cd.card_id = c.card_id
      LEFT JOIN tokens tk ON cd.card_id IS NULL AND ${inAccounts('tk.account_id', accountIds)} AND tk.account_id = c.account_id AND tk.livemode = c.livemode AND tk.card_id = c.card_id
      ORDER BY c.expired_at, c.account_id, c.charge_id
    )
    SELECT count(*)::int AS n FROM due`.execute(trx);
  return result.rows[0]!.n;
}

interface Verification {
  readonly holds: number;
  readonly released: number;
  readonly released_at_own_expiry: number;
  readonly released_early: number;
  readonly events: number;
  readonly events_at_expiry: number;
  readonly charges_with_two_events: number;
  /** A digest of the release events' documents without their ids: the engine's and the ceiling's must be equal. */
  readonly documents: string;
}

async function verify(db: Kysely<Database>): Promise<Verification> {
  const result = await sql<Verification>`
    SELECT (SELECT count(*) FROM charges)::int AS holds,
           (SELECT count(*) FROM charges WHERE released_at IS NOT NULL)::int AS released,
           (SELECT count(*) FROM charges WHERE released_at = expired_at AND expired_at < ${SLOT})::int AS released_at_own_expiry,
           (SELECT count(*) FROM charges WHERE released_at IS NOT NULL AND expired_at >= ${SLOT})::int AS released_early,
           (SELECT count(*) FROM events WHERE type IN (${RELEASE_EVENTS}))::int AS events,
           (SELECT count(*) FROM events e JOIN charges c ON c.account_id = e.account_id AND c.charge_id = e.resource_id
             WHERE e.type IN (${RELEASE_EVENTS}) AND e.created_at = c.expired_at)::int AS events_at_expiry,
           (SELECT count(*) FROM (SELECT 1 FROM events WHERE type IN (${RELEASE_EVENTS}) GROUP BY account_id, resource_id HAVING count(*) > 1) d)::int AS charges_with_two_events,
           ${eventDocumentsDigest(RELEASE_EVENT_TYPES)} AS documents`.execute(db);
  return result.rows[0]!;
}

function exact(check: Verification): boolean {
  return check.holds === N && check.released === DUE && check.released_at_own_expiry === DUE && check.released_early === 0 && check.events === DUE && check.events_at_expiry === DUE && check.charges_with_two_events === 0;
}

async function main(): Promise<void> {
  log(`hold-expiry benchmark: n=${N} (due ${DUE}) batch=${BATCH} accounts=${ACCOUNTS} server=${new URL(SERVER).host}`);
  const { engineMs, ceilingMs, rssMb } = await runEngineAgainstCeiling({
    name: 'holds',
    seeded: `${N} holds`,
    unit: 'releases',
    job: holdExpiryJob,
    slot: SLOT,
    batchSize: BATCH,
    keep: args.keep ?? false,
    seed,
    ceiling,
    verify,
    exact,
    same: (check, engine) => exact(check) && check.documents === engine.documents,
  });
  const engineRate = DUE / (engineMs / 1000);
  const rawRate = DUE / (ceilingMs / 1000);
  log(`released holds/s: ${Math.round(engineRate)} (ceiling ${Math.round(rawRate)}/s, ratio ${(engineRate / rawRate).toFixed(2)})`);
  log(ceilingRatioLine(engineRate / rawRate));
  log(`peak RSS: ${rssMb.toFixed(0)} MB`);
  log(`targets: >= 50000/s ${engineRate >= 50_000 ? 'met' : 'MISSED'}`);
}

await main();
