/**
 * A renewal worker in its own process, for the tests that need real concurrency or a real crash:
 * one scheduler tick of `subscriptions.renew` against DATABASE_URL at a fixed instant. It prints
 * `batch N authorizing` when a batch (its transaction open, its rows locked) asks the card network,
 * then waits KESSAI_PAUSE_MS, so a test can kill it in the middle of a batch; and a final JSON line
 * with its outcomes.
 *
 * Env: DATABASE_URL, KESSAI_AT (ISO instant), KESSAI_OWNER, KESSAI_BATCH_SIZE, KESSAI_PAUSE_MS,
 * KESSAI_LEASE_MS.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { subscriptionRenewalsJob } from '../../jobs/subscription-renewals';
import { openStore } from '../../src/db/connect';
import { seededIds } from '../../src/domain/ids';
import { FixedClock } from '../../src/engine/clock';
import { createContext } from '../../src/engine/context';
import { silentLogger } from '../../src/engine/logger';
import { Scheduler } from '../../src/engine/scheduler';
import { simulatedCardNetwork, type CardNetwork } from '../../src/processor/card-network';
import { requiredEnv } from './env';

const env = requiredEnv;

const owner = env('KESSAI_OWNER');
const pauseMs = Number(process.env.KESSAI_PAUSE_MS ?? 0);
const network = simulatedCardNetwork();
let batch = 0;
const processor: CardNetwork = {
  ...network,
  async authorize(requests) {
    batch += 1;
    process.stdout.write(`batch ${batch} authorizing ${requests.length}\n`);
    if (pauseMs > 0) await sleep(pauseMs);
    return network.authorize(requests);
  },
};
const store = await openStore({ databaseUrl: env('DATABASE_URL'), poolSize: 2 });
const ctx = createContext({
  db: store.db,
  store,
  clock: new FixedClock(new Date(env('KESSAI_AT'))),
  // Ids differ per owner, as they do between real workers (two workers never share a stream).
  ids: seededIds([...owner].reduce((h, c) => h * 31 + c.charCodeAt(0), 7) % 1_000_000),
  processor,
  log: silentLogger(),
  config: { batchSize: Number(process.env.KESSAI_BATCH_SIZE ?? 100), leaseMs: Number(process.env.KESSAI_LEASE_MS ?? 300_000) },
});
const scheduler = new Scheduler(ctx, [subscriptionRenewalsJob], { owner });
const outcomes = await scheduler.tick();
process.stdout.write(`${JSON.stringify({ owner, outcomes })}\n`);
await store.close();
