/**
 * Benchmark of test clock advances (`npm run bench:clocks -- [--n 1000] [--small 10]`), on the
 * PostgreSQL server of DATABASE_URL (default the local server).
 *
 * A clock frozen at 2027-01-01 (JST) with N customers on it, each subscribed to a monthly plan at
 * that instant, is advanced twelve months (to the last second of 2027): the advance as the API
 * runs it (claimAdvance, then runAdvance: the simulation's driver over the clock's objects),
 * timed alone. Beside it, in the same run, `kessai simulate` of the same population (the same
 * plan, N customers with the same card, N sign-ups at 2027-01-01) over [2027-01-01, 2028-01-01) on
 * a scratch database of the same server: its total, and its driver alone, timed from a marker step
 * one second after the sign-ups (one more customer, without a card: the driver reports progress
 * after a step at a new instant, not between the steps of one instant). Then a clock with `--small` subscriptions advanced one month (to 2027-02-01 00:00 JST
 * inclusive: their first renewal is in it). Prints the times,
 * the charges each side made (they must agree) and the load average. Not a timed test: the
 * targets (advance ≤ 1.5 × simulate and ≤ 10 s at 1,000; ≤ 1 s at 10) are read by a person.
 */
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { ALL_JOBS } from '../../jobs/index';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { runOperation, operationNames } from '../../src/api/operations';
import { openStore } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import { seededIds } from '../../src/domain/ids';
import { parseInstant } from '../../src/domain/time';
import { FixedClock } from '../../src/engine/clock';
import { createContext, type Context } from '../../src/engine/context';
import { silentLogger } from '../../src/engine/logger';
import { systemClock } from '../../src/engine/system-clock';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { parseScenario, planSteps } from '../../src/simulation/scenario';
import { simulate } from '../../src/simulation/simulate';
import { claimAdvance, runAdvance } from '../../src/test-clocks/advance';
import { createTestClock, requestOnClock } from '../../src/test-clocks/test-clocks';
import { admin, log, seconds, SERVER, withDatabase } from './bench-support';

const { values: args } = parseArgs({ options: { n: { type: 'string', default: '1000' }, small: { type: 'string', default: '10' } } });
const N = Number(args.n);
const SMALL = Number(args.small);
const FROM = parseInstant('2027-01-01');
const YEAR_END = parseInstant('2028-01-01');
const MONTH_END = parseInstant('2027-02-01');
/** One second after the sign-ups: the simulation's marker step. */
const SIGNED_UP = new Date(FROM.getTime() + 1000);
const PLAN = { amount: 980, currency: 'jpy', interval: 'month' } as const;
const CARD = { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: 2035, cvc: '123' };
const ACCOUNT = 'acct_bench_clocks';
const caller: Caller = { accountId: ACCOUNT, livemode: false, kind: 'secret' };

/** A clock at FROM with `n` subscribers made through the operations, as the API makes them; then its advance to `target` (UNIX seconds, run inclusive), timed. */
async function clockRun(ctx: Context, n: number, target: number): Promise<{ setupMs: number; advanceMs: number; charges: number }> {
  const started = performance.now();
  const clock = await createTestClock(ctx, caller, { frozenTime: FROM, name: `bench ${n}` });
  const plan = (await runOperation(ctx, caller, 'plans.create', PLAN)) as { id: string };
  for (let i = 0; i < n; i += 1) {
    const token = (await runOperation(ctx, caller, 'tokens.create', { card: CARD })) as { id: string };
    const customerParams = { card: token.id, test_clock: clock.id };
    const customer = (await runOperation(await requestOnClock(ctx, caller, 'customers.create', customerParams), caller, 'customers.create', customerParams)) as { id: string };
    const subscriptionParams = { customer: customer.id, plan: plan.id };
    await runOperation(await requestOnClock(ctx, caller, 'subscriptions.create', subscriptionParams), caller, 'subscriptions.create', subscriptionParams);
  }
  const advancing = performance.now();
  const claim = await claimAdvance(ctx, systemClock, caller, clock.id, target, `bench-clocks:${process.pid}`);
  const ready = await runAdvance(ctx, systemClock, claim, ALL_JOBS);
  const done = performance.now();
  if (ready.status !== 'ready') throw new Error(`clock ${clock.id} ended ${ready.status}`);
  const charges = await sql<{ n: number }>`SELECT count(*)::int AS n FROM charges h JOIN customers c ON c.account_id = h.account_id AND c.livemode = h.livemode AND c.customer_id = h.customer_id
    WHERE h.account_id = ${ACCOUNT} AND c.test_clock_id = ${clock.id}`.execute(ctx.db);
  return { setupMs: advancing - started, advanceMs: done - advancing, charges: charges.rows[0]!.n };
}

/** `kessai simulate` of the same population over [FROM, to): total, and its driver alone (after the sign-ups at FROM). */
async function simulateRun(n: number, to: Date): Promise<{ totalMs: number; driverMs: number; charges: number }> {
  const scenario = parseScenario(
    JSON.stringify({
      name: `bench: ${n} subscriptions on a clock's population`,
      plans: [{ ref: 'monthly', params: PLAN }],
      customers: Array.from({ length: n }, (_, i) => ({ ref: `c${i}`, card: CARD })),
      timeline: [
        ...Array.from({ length: n }, (_, i) => ({ at: '2027-01-01', op: 'subscriptions.create', params: { customer: `$c${i}`, plan: '$monthly' } })),
        { at: SIGNED_UP.toISOString(), op: 'customers.create', params: { description: 'marker: the sign-ups are done' } },
      ],
    }),
    'clocks bench scenario',
  );
  const steps = planSteps(scenario, { from: FROM, to, seed: 1, operations: operationNames() });
  const started = performance.now();
  let signedUp = started;
  let charges = 0;
  await simulate(
    { scenario, steps, from: FROM, to, seed: 1, jobs: ALL_JOBS, databaseUrl: SERVER, strict: true, onProgress: (at) => void (at.getTime() <= SIGNED_UP.getTime() && (signedUp = performance.now())) },
    async (world) => {
      charges = (await sql<{ n: number }>`SELECT count(*)::int AS n FROM charges`.execute(world.ctx.db)).rows[0]!.n;
    },
  );
  const done = performance.now();
  return { totalMs: done - started, driverMs: done - signedUp, charges };
}

const name = `kessai_bench_clocks_${process.pid}_${Math.floor(performance.timeOrigin)}`;
log(`test clocks benchmark: ${N} and ${SMALL} subscriptions, server=${new URL(SERVER).host}, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
await admin((c) => c.query(`CREATE DATABASE "${name}"`));
const store = await openStore({ databaseUrl: withDatabase(SERVER, name) });
try {
  await migrate(store);
  const ctx = createContext({ db: store.db, store, clock: new FixedClock(FROM), ids: seededIds(1), log: silentLogger() });
  await createAccount(ctx, { name: 'Clocks bench', id: ACCOUNT });
  const year = await clockRun(ctx, N, YEAR_END.getTime() / 1000 - 1);
  const sim = await simulateRun(N, YEAR_END);
  log(
    `${N.toLocaleString('en-US')} subscriptions, 12 months: clock advance ${seconds(year.advanceMs)} s (sign-ups before it ${seconds(year.setupMs)} s), ${year.charges.toLocaleString('en-US')} charges` +
      ` | simulate ${seconds(sim.totalMs)} s total, driver ${seconds(sim.driverMs)} s, ${sim.charges.toLocaleString('en-US')} charges` +
      ` | advance / simulate driver ${(year.advanceMs / sim.driverMs).toFixed(2)}, / simulate total ${(year.advanceMs / sim.totalMs).toFixed(2)}`,
  );
  const month = await clockRun(ctx, SMALL, MONTH_END.getTime() / 1000);
  log(`${SMALL} subscriptions, 1 month: clock advance ${seconds(month.advanceMs)} s, ${month.charges} charges`);
  log(`load average at the end ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
} finally {
  await store.close();
  await admin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
}
