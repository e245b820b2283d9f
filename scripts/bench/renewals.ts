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
 *   2. ceiling: on the copy, writes the same rows (charges settled with their fee and term,
 *      subscription updates, charge.succeeded and subscription.renewed events with the resource
 *      objects) with plain set-based SQL in batches of the same size taken account by account
 *      through the due index exactly as the engine takes them (ceilingBatches), no engine logic
 *      and no data through Node; the two runs' event documents (ids aside) must be equal;
 *
 * and prints renewals/s, the ratio engine/ceiling (above 1.25 it says the ceiling is wrong) and
 * the process's peak RSS. Both databases are
 * dropped at the end (also on failure). Not a timed test: targets are read by a person.
 */
import { parseArgs } from 'node:util';
import { subscriptionRenewalsJob } from '../../jobs/subscription-renewals';
import { DEFAULT_CONFIG } from '../../src/engine/context';
import { ceilingRatioLine, log, runEngineAgainstCeiling, SERVER } from './bench-support';
import { renewalCeiling, seedDueSubscriptions, SLOT, verifyRenewals } from './renewal-ceiling';

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
    seed: (db) => seedDueSubscriptions(db, N, ACCOUNTS),
    ceiling: (store) => renewalCeiling(store, BATCH),
    verify: verifyRenewals,
    exact: (check) => check.subscriptions === N && check.renewed === N && check.charges === N && check.charged_twice === 0 && check.settled === N && check.renewed_events === N && check.charge_events === N,
    same: (check, engine) => check.renewed === N && check.settled === N && check.renewed_events === N && check.charge_events === N && check.documents === engine.documents,
  });
  const engineRate = N / (engineMs / 1000);
  const rawRate = N / (ceilingMs / 1000);
  log(`renewals/s: ${Math.round(engineRate)} (ceiling ${Math.round(rawRate)}/s, ratio ${(engineRate / rawRate).toFixed(2)})`);
  log(ceilingRatioLine(engineRate / rawRate));
  log(`peak RSS: ${rssMb.toFixed(0)} MB`);
  log(
    `targets: >= 20000/s ${engineRate >= 20_000 ? 'met' : 'MISSED'}; ratio >= 0.8 ${engineRate / rawRate >= 0.8 ? 'met' : 'MISSED'}; RSS <= 512 MB ${rssMb <= 512 ? 'met' : 'MISSED'}`,
  );
}

await main();
