/**
 * The planner's statistics for a test clock's advance on an embedded data folder: the clock's
 * objects were made by an earlier process, whose change counters the advancing process never sees
 * (PGlite has no autovacuum, and its counters start again at zero when a process opens the
 * folder). The advance must still analyze the tables that hold them, or every stop's due probe is
 * planned on the statistics of empty tables.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, expect, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { runOperation } from '../../src/api/operations';
import { openStore } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import { seededIds } from '../../src/domain/ids';
import { parseInstant } from '../../src/domain/time';
import { FixedClock } from '../../src/engine/clock';
import { createContext } from '../../src/engine/context';
import { silentLogger } from '../../src/engine/logger';
import { systemClock } from '../../src/engine/system-clock';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { claimAdvance, runAdvance } from '../../src/test-clocks/advance';
import { createTestClock, requestOnClock } from '../../src/test-clocks/test-clocks';

const dataDir = mkdtempSync(join(tmpdir(), 'kessai-clock-statistics-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

it('an advance on a reopened data folder analyzes the tables holding the clock\'s objects', async () => {
  const from = parseInstant('2027-01-01');
  const caller: Caller = { accountId: 'acct_clock_statistics', livemode: false, kind: 'secret' };
  let store = await openStore({ dataDir });
  let ctx = createContext({ db: store.db, store, clock: new FixedClock(from), ids: seededIds(1), log: silentLogger() });
  await migrate(store);
  await createAccount(ctx, { name: 'Clock statistics', id: caller.accountId });
  const clock = await createTestClock(ctx, caller, { frozenTime: from });
  const plan = (await runOperation(ctx, caller, 'plans.create', { amount: 980, currency: 'jpy', interval: 'month' })) as { id: string };
  for (let i = 0; i < 3; i += 1) {
    const card = { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: 2035, cvc: '123' };
    const token = (await runOperation(ctx, caller, 'tokens.create', { card })) as { id: string };
    const customerParams = { card: token.id, test_clock: clock.id };
    const customer = (await runOperation(await requestOnClock(ctx, caller, 'customers.create', customerParams), caller, 'customers.create', customerParams)) as { id: string };
    const subscriptionParams = { customer: customer.id, plan: plan.id };
    await runOperation(await requestOnClock(ctx, caller, 'subscriptions.create', subscriptionParams), caller, 'subscriptions.create', subscriptionParams);
  }
  await store.close();

  store = await openStore({ dataDir });
  try {
    ctx = createContext({ db: store.db, store, clock: systemClock, ids: seededIds(2), log: silentLogger() });
    const analyzed = async () =>
      (await sql<{ table: string; analyzed: boolean }>`
        SELECT relname AS table, reltuples >= 0 AS analyzed FROM pg_class
        WHERE relnamespace = current_schema()::regnamespace AND relname IN ('customers', 'subscriptions') ORDER BY relname`.execute(ctx.db)).rows;
    expect(await analyzed()).toEqual([
      { table: 'customers', analyzed: false },
      { table: 'subscriptions', analyzed: false },
    ]);
    const claim = await claimAdvance(ctx, systemClock, caller, clock.id, parseInstant('2027-01-02').getTime() / 1000, 'statistics test');
    await runAdvance(ctx, systemClock, claim, ALL_JOBS);
    expect(await analyzed()).toEqual([
      { table: 'customers', analyzed: true },
      { table: 'subscriptions', analyzed: true },
    ]);
  } finally {
    await store.close();
  }
}, 120_000);
