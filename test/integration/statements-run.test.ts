/**
 * `statements run` (the operator's runStatements, which `kessai statements run`, the operator API
 * and the console call) gives the statements the worker gives: it runs the term close, the plan
 * fee billing of the service and the balance close, as the worker's scheduler does at the same
 * instants. Two databases with the same book: one driven by runStatements, one by the scheduler
 * with the same three jobs; their statements are the same, and the plan fee is on them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { createAccount } from '../../src/accounts/accounts';
import { localOperator, STATEMENT_JOBS } from '../../src/api/admin/operator';
import { FixedClock } from '../../src/engine/clock';
import { Scheduler } from '../../src/engine/scheduler';
import { setServicePlan } from '../../src/settlement/service-fees';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';
import { captureCharge } from '../support/settlement-seed';

const jst = (local: string): Date => new Date(`${local}+09:00`);
const ACCOUNT = 'acct_stmt_run';
const RUNS = [jst('2027-01-01T09:30:00'), jst('2027-02-01T09:30:00')];

let byCommand: TestDatabase;
let byWorker: TestDatabase;

async function seed(database: TestDatabase): Promise<void> {
  const ctx = testContext(database.store, { seed: 5, at: jst('2026-12-20T12:00:00') });
  await createAccount(ctx, { name: 'Plan', id: ACCOUNT });
  await setServicePlan(ctx, { accountId: ACCOUNT, livemode: false }, { subject: 'proplan', monthlyFee: 5_000, from: jst('2027-01-01T00:00:00') });
  await captureCharge(database.store.db, ctx, { accountId: ACCOUNT, chargeId: 'ch_stmt_run', amount: 20_000, at: jst('2027-01-10T12:00:00') });
}

/** The account's statements with their items, in an order both databases share (ids and write instants aside). */
async function statementsOf(database: TestDatabase) {
  const db = database.store.db;
  const rows = await db
    .selectFrom('statements as s')
    .leftJoin('terms as t', (join) => join.onRef('t.account_id', '=', 's.account_id').onRef('t.livemode', '=', 's.livemode').onRef('t.term_id', '=', 's.term_id'))
    .select(['s.statement_id', 's.type', 's.net', 't.start_at'])
    .where('s.account_id', '=', ACCOUNT)
    .execute();
  const items = await db.selectFrom('statement_items').select(['statement_id', 'subject', 'amount', 'tax_rate', 'position']).where('account_id', '=', ACCOUNT).orderBy('position').execute();
  return rows
    .map((row) => ({
      term: row.start_at?.toISOString() ?? null,
      type: row.type,
      net: row.net,
      items: items.filter((item) => item.statement_id === row.statement_id).map(({ subject, amount, tax_rate }) => ({ subject, amount, tax_rate })),
    }))
    .sort((a, b) => `${a.term}${a.type}`.localeCompare(`${b.term}${b.type}`));
}

beforeAll(async () => {
  [byCommand, byWorker] = [await createTestDatabase(), await createTestDatabase()];
  await seed(byCommand);
  await seed(byWorker);
});
afterAll(async () => {
  await byCommand?.drop();
  await byWorker?.drop();
});

describe('statements run bills the plan fees as the worker does', () => {
  it('runs terms.close, service_fees.bill and balances.close, and closes the term with the same statements as the worker, the plan fee included', async () => {
    expect(STATEMENT_JOBS).toEqual(['terms.close', 'service_fees.bill', 'balances.close']);
    const settlementJobs = ALL_JOBS.filter((job) => (STATEMENT_JOBS as readonly string[]).includes(job.name));
    // The worker's order is the command's.
    expect(settlementJobs.map((job) => job.name)).toEqual([...STATEMENT_JOBS]);
    for (const [i, at] of RUNS.entries()) {
      const ctx = testContext(byCommand.store, { seed: 20 + i, at });
      const operator = localOperator({ ctx, who: 'test', jobs: ALL_JOBS, owner: 'test-command', ledgerClock: new FixedClock(at) });
      const outcomes = await operator.jobs.runStatements(at);
      expect(outcomes.map((o) => [o.job, o.status])).toEqual(STATEMENT_JOBS.map((job) => [job, 'succeeded']));
      const workerCtx = testContext(byWorker.store, { seed: 20 + i, at });
      await new Scheduler(workerCtx, settlementJobs, { owner: 'test-worker' }).tick();
    }
    const fromCommand = await statementsOf(byCommand);
    expect(fromCommand).toEqual(await statementsOf(byWorker));
    // January's term: the sale, the plan fee billed on Jan 1 (tax rate 10.00), and the payout fee.
    const january = fromCommand.filter((s) => s.term === jst('2027-01-01T00:00:00').toISOString());
    expect(january.map((s) => [s.type, s.net])).toEqual([
      ['sales', 19_400],
      ['service_fee', -5_000],
      ['transfer_fee', -250],
    ]);
    expect(january.find((s) => s.type === 'service_fee')!.items).toEqual([{ subject: 'proplan', amount: -5_000, tax_rate: '10.00' }]);
    // February's fee is billed into February's open term.
    const billed = await byCommand.store.db.selectFrom('service_fee_charges').select('period_start').where('account_id', '=', ACCOUNT).orderBy('period_start').execute();
    expect(billed.map((row) => row.period_start.toISOString())).toEqual([jst('2027-01-01T00:00:00').toISOString(), jst('2027-02-01T00:00:00').toISOString()]);
  });
});
