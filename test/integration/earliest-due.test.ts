import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/accounts/accounts';
import type { Database } from '../../src/db/schema';
import { earliestDueAt, earliestDueQuery } from '../../src/engine/account-batches';
import { nextRenewalDueAt } from '../../src/subscriptions/renewals';
import { createTestDatabase, isPostgres, testContext, type TestDatabase } from '../support/database';

const ACCOUNTS = ['acct_due_a', 'acct_due_b', 'acct_due_c'];
const BASE = new Date('2027-01-01T00:00:00.000Z');
const at = (seconds: number) => new Date(BASE.getTime() + seconds * 1000);

let database: TestDatabase;
let db: Kysely<Database>;

beforeAll(async () => {
  database = await createTestDatabase();
  db = database.store.db;
  for (const id of ACCOUNTS) await createAccount(testContext(database.store), { name: id, id });
  // Account a: due at +300 s and later; b: at +100 s (the earliest) and later; c: nothing due (no
  // renews_at) but an earlier canceled row; 3,000 subscriptions each, so that a plan reading the
  // whole due index differs from one probe per account.
  await sql`
    INSERT INTO subscriptions (account_id, livemode, subscription_id, customer_id, plan_id, status, start_at, current_period_start, current_period_end, renews_at, created_at, updated_at)
    SELECT x.account_id, false, 'sub_' || x.account_id || '_' || i, 'cus_' || i, 'pln', 'active', ${BASE}, ${BASE}, ${BASE},
           CASE x.account_id WHEN 'acct_due_a' THEN ${BASE}::timestamptz + make_interval(secs => 300 + i)
                             WHEN 'acct_due_b' THEN ${BASE}::timestamptz + make_interval(secs => 100 + i) END,
           ${BASE}, ${BASE}
    FROM unnest(${ACCOUNTS}::text[]) AS x(account_id), generate_series(0, 2999) AS i`.execute(db);
  await sql`ANALYZE subscriptions`.execute(db);
});
afterAll(async () => database?.drop());

describe('earliestDueAt: where the simulator stops next, over every account', () => {
  it('is the earliest due instant of all accounts, strictly after the instant given, or at it when inclusive', async () => {
    expect(await nextRenewalDueAt(db, new Date(0))).toEqual(at(100));
    expect(await nextRenewalDueAt(db, at(100))).toEqual(at(101));
    expect(await earliestDueAt(db, 'subscriptions', 'renews_at', sql`d.renews_at IS NOT NULL`, at(100), true)).toEqual(at(100));
    // Past account b's last (+3,099 s) only account a's remain.
    expect(await nextRenewalDueAt(db, at(3099))).toEqual(at(3100));
    expect(await nextRenewalDueAt(db, at(3299))).toBeNull();
  });

  it('applies the due condition to each account', async () => {
    expect(await earliestDueAt(db, 'subscriptions', 'renews_at', sql`d.renews_at IS NOT NULL AND d.account_id <> 'acct_due_b'`, new Date(0))).toEqual(at(300));
  });

  it.runIf(isPostgres())('reads one probe of the due index per account, never the whole table or index', async () => {
    const plan = await sql<{ 'QUERY PLAN': string }>`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ${earliestDueQuery('subscriptions', 'renews_at', sql`d.renews_at IS NOT NULL`, new Date(0))}`.execute(db);
    const text = plan.rows.map((row) => row['QUERY PLAN']).join('\n');
    expect(text).not.toMatch(/Seq Scan on subscriptions/);
    // Each account's probe stops at its first entry: one row per account read from the index.
    const scans = text.split('\n').filter((line) => /Index (Only )?Scan using subscriptions_due on subscriptions/.test(line));
    expect(scans.length, text).toBe(1);
    expect(scans[0], text).toMatch(/rows=[01] loops=3/);
  });
});
