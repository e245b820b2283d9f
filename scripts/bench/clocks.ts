/**
 * Benchmark of test clock advances as a merchant runs them (`npm run bench:clocks -- [--n 1000]
 * [--small 10] [--store postgres,pglite] [--profile-server DIR]`), on the PostgreSQL server of DATABASE_URL (default the
 * local server) and on the embedded database (PGlite in a scratch folder).
 *
 * On each store: a clock frozen at 2027-01-01 (JST) with N customers on it, each subscribed to a
 * monthly plan at that instant, and a clock with `--small` such customers, made through the
 * operations in this process (as the API makes them). Then a real `kessai serve` on that store (its
 * defaults: on the embedded database it runs the worker too) is asked over HTTP, as the README
 * shows, `POST /_kessai/v1/test_clocks/:id/advance`, and `GET /_kessai/v1/test_clocks/:id` is
 * polled every 25 ms until the clock is `ready`: the N clock twelve months (to the last second of
 * 2027), the small clock one month (to 2027-02-01 00:00 JST inclusive: their first renewal is in
 * it). The time is from the POST to the GET that answers `ready`. Beside it, in the same run and on
 * the same kind of store, `kessai simulate` of the N population (the same plan, N customers with
 * the same card, N sign-ups at 2027-01-01) over [2027-01-01, 2028-01-01) (on PostgreSQL a scratch
 * database of the same server, embedded: PGlite in memory, as the CLI runs it): its total, and its
 * driver alone, timed from a marker step one second after the sign-ups (one more customer, without
 * a card: the driver reports progress after a step at a new instant, not between the steps of one
 * instant). Prints the times, the ratio, the charges each side made (they must agree) and the load
 * average. Not a timed test: the targets (advance ≤ 1.5 × simulate and ≤ 10 s at 1,000; ≤ 1 s at
 * 10) are read by a person. `--profile-server DIR`: a CPU profile of each server, written when it stops.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { ALL_JOBS } from '../../jobs/index';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { runOperation, operationNames } from '../../src/api/operations';
import { openStore, type OpenStoreOptions } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import { seededIds } from '../../src/domain/ids';
import { parseInstant } from '../../src/domain/time';
import { FixedClock } from '../../src/engine/clock';
import { createContext, type Context } from '../../src/engine/context';
import { silentLogger } from '../../src/engine/logger';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { parseScenario, planSteps } from '../../src/simulation/scenario';
import { simulate } from '../../src/simulation/simulate';
import { createTestClock, requestOnClock } from '../../src/test-clocks/test-clocks';
import { startServe } from '../../test/support/spawn-worker';
import { admin, log, seconds, SERVER, withDatabase } from './bench-support';

const { values: args } = parseArgs({ options: { n: { type: 'string', default: '1000' }, small: { type: 'string', default: '10' }, store: { type: 'string', default: 'postgres,pglite' }, 'profile-server': { type: 'string' } } });
const N = Number(args.n);
const SMALL = Number(args.small);
const STORES = args.store.split(',').map((x) => x.trim());
const FROM = parseInstant('2027-01-01');
const YEAR_END = parseInstant('2028-01-01');
const MONTH_END = parseInstant('2027-02-01');
/** One second after the sign-ups: the simulation's marker step. */
const SIGNED_UP = new Date(FROM.getTime() + 1000);
const PLAN = { amount: 980, currency: 'jpy', interval: 'month' } as const;
const CARD = { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: 2035, cvc: '123' };
const ACCOUNT = 'acct_bench_clocks';
const caller: Caller = { accountId: ACCOUNT, livemode: false, kind: 'secret' };
const POLL_MS = 25;
const load = (): string => loadavg().map((l) => l.toFixed(1)).join(' ');

/** A clock at FROM with `n` subscribers made through the operations, as the API makes them. */
async function clockWithSubscribers(ctx: Context, n: number): Promise<string> {
  const clock = await createTestClock(ctx, caller, { frozenTime: FROM, name: `bench ${n}` });
  const plan = (await runOperation(ctx, caller, 'plans.create', PLAN)) as { id: string };
  for (let i = 0; i < n; i += 1) {
    const token = (await runOperation(ctx, caller, 'tokens.create', { card: CARD })) as { id: string };
    const customerParams = { card: token.id, test_clock: clock.id };
    const customer = (await runOperation(await requestOnClock(ctx, caller, 'customers.create', customerParams), caller, 'customers.create', customerParams)) as { id: string };
    const subscriptionParams = { customer: customer.id, plan: plan.id };
    await runOperation(await requestOnClock(ctx, caller, 'subscriptions.create', subscriptionParams), caller, 'subscriptions.create', subscriptionParams);
  }
  return clock.id;
}

/** The README's calls: POST …/advance, then GET …/:id every POLL_MS until `ready`; ms from the POST to the answer `ready`. */
async function advanceOverHttp(base: string, secret: string, clockId: string, target: number): Promise<number> {
  const headers = { authorization: `Bearer ${secret}`, 'content-type': 'application/x-www-form-urlencoded' };
  const started = performance.now();
  const answer = await fetch(`${base}/${clockId}/advance`, { method: 'POST', headers, body: new URLSearchParams({ frozen_time: String(target) }).toString() });
  const claimed = (await answer.json()) as { status?: string };
  if (answer.status !== 200 || claimed.status !== 'advancing') throw new Error(`advance of ${clockId} answered ${answer.status} ${JSON.stringify(claimed)}`);
  for (;;) {
    const got = await fetch(`${base}/${clockId}`, { headers });
    const clock = (await got.json()) as { status?: string; frozen_time?: number };
    if (got.status !== 200) throw new Error(`GET ${clockId} answered ${got.status} ${JSON.stringify(clock)}`);
    if (clock.status === 'ready') {
      if (clock.frozen_time !== target) throw new Error(`clock ${clockId} ready at ${clock.frozen_time}, not ${target}`);
      return performance.now() - started;
    }
    await sleep(POLL_MS);
  }
}

/** `kessai simulate` of the same population over [FROM, to) on the store kind: total, and its driver alone (after the sign-ups at FROM). */
async function simulateRun(n: number, to: Date, databaseUrl: string | undefined): Promise<{ totalMs: number; driverMs: number; charges: number }> {
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
    { scenario, steps, from: FROM, to, seed: 1, jobs: ALL_JOBS, databaseUrl, strict: true, onProgress: (at) => void (at.getTime() <= SIGNED_UP.getTime() && (signedUp = performance.now())) },
    async (world) => {
      charges = (await sql<{ n: number }>`SELECT count(*)::int AS n FROM charges`.execute(world.ctx.db)).rows[0]!.n;
    },
  );
  const done = performance.now();
  return { totalMs: done - started, driverMs: done - signedUp, charges };
}

/** One store: the two clocks made, advanced over HTTP by a `kessai serve` on it, their charges counted; then simulate beside it. */
async function benchStore(kind: string): Promise<void> {
  const postgres = kind === 'postgres';
  if (!postgres && kind !== 'pglite') throw new Error(`--store takes postgres and pglite, not ${kind}`);
  const name = `kessai_bench_clocks_${process.pid}_${Math.floor(performance.timeOrigin)}`;
  const dir = postgres ? undefined : mkdtempSync(join(tmpdir(), 'kessai-bench-clocks-'));
  const storeOptions: OpenStoreOptions = postgres ? { databaseUrl: withDatabase(SERVER, name) } : { dataDir: dir! };
  if (postgres) await admin((c) => c.query(`CREATE DATABASE "${name}"`));
  try {
    // The population, made in this process; then the store is closed (the embedded one has one owner).
    let store = await openStore(storeOptions);
    let ctx = createContext({ db: store.db, store, clock: new FixedClock(FROM), ids: seededIds(1), log: silentLogger() });
    await migrate(store);
    const { keys } = await createAccount(ctx, { name: 'Clocks bench', id: ACCOUNT });
    const signUps = performance.now();
    const year = await clockWithSubscribers(ctx, N);
    const month = await clockWithSubscribers(ctx, SMALL);
    const signUpMs = performance.now() - signUps;
    await store.close();

    const limit = 1_000_000;
    const { server, apibase } = await startServe([], {
      ...(postgres ? { DATABASE_URL: storeOptions.databaseUrl! } : { DATABASE_URL: '', KESSAI_DATA_DIR: dir! }),
      KESSAI_RATE_LIMITS: JSON.stringify({ accounts: { [ACCOUNT]: { test: { pk: limit, payment: limit, sk: limit } } } }),
      KESSAI_STATEMENT_URL_SECRET: 'bench-clocks-statement-secret',
    }, { discardLogs: true, ...(args['profile-server'] === undefined ? {} : { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${args['profile-server']}`] }) });
    let yearMs: number;
    let monthMs: number;
    try {
      const base = `${new URL(apibase).origin}/_kessai/v1/test_clocks`;
      yearMs = await advanceOverHttp(base, keys.test.secret, year, YEAR_END.getTime() / 1000 - 1);
      monthMs = await advanceOverHttp(base, keys.test.secret, month, MONTH_END.getTime() / 1000);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }

    store = await openStore(storeOptions);
    ctx = createContext({ db: store.db, store, clock: new FixedClock(FROM), ids: seededIds(2), log: silentLogger() });
    const chargesOf = async (clockId: string) =>
      (await sql<{ n: number }>`SELECT count(*)::int AS n FROM charges h JOIN customers c ON c.account_id = h.account_id AND c.livemode = h.livemode AND c.customer_id = h.customer_id
        WHERE h.account_id = ${ACCOUNT} AND c.test_clock_id = ${clockId}`.execute(ctx.db)).rows[0]!.n;
    const [yearCharges, monthCharges] = [await chargesOf(year), await chargesOf(month)];
    await store.close();

    const sim = await simulateRun(N, YEAR_END, postgres ? SERVER : undefined);
    const label = postgres ? `PostgreSQL (${new URL(SERVER).host})` : 'embedded PGlite';
    log(
      `${label}: ${N.toLocaleString('en-US')} subscriptions, 12 months: advance over HTTP ${seconds(yearMs)} s, ${yearCharges.toLocaleString('en-US')} charges` +
        ` | simulate ${seconds(sim.totalMs)} s total, driver ${seconds(sim.driverMs)} s, ${sim.charges.toLocaleString('en-US')} charges` +
        ` | advance / simulate driver ${(yearMs / sim.driverMs).toFixed(2)}, / simulate total ${(yearMs / sim.totalMs).toFixed(2)}` +
        ` (sign-ups of both clocks before, in process: ${seconds(signUpMs)} s)`,
    );
    log(`${label}: ${SMALL} subscriptions, 1 month: advance over HTTP ${seconds(monthMs)} s, ${monthCharges} charges; load average ${load()}`);
  } finally {
    if (postgres) await admin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

log(`test clocks benchmark: ${N} and ${SMALL} subscriptions, stores ${STORES.join(', ')}, server=${new URL(SERVER).host}, advance polled every ${POLL_MS} ms, load average ${load()}`);
for (const kind of STORES) await benchStore(kind);
