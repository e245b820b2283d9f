/**
 * A worker in its own process, for the tests that need real concurrency or a real crash: it runs
 * one scheduler tick of the batch-writer job against DATABASE_URL at a fixed instant, printing a
 * line per committed batch and a final JSON line with its outcomes.
 *
 * Env: DATABASE_URL, KESSAI_AT (ISO instant), KESSAI_OWNER, KESSAI_BATCH_SIZE, KESSAI_PAUSE_MS,
 * KESSAI_LEASE_MS, KESSAI_SCHEDULE (cron, default every minute).
 */
import { openStore } from '../../src/db/connect';
import { seededIds } from '../../src/domain/ids';
import { FixedClock } from '../../src/engine/clock';
import { createContext } from '../../src/engine/context';
import { silentLogger } from '../../src/engine/logger';
import { Scheduler } from '../../src/engine/scheduler';
import { batchWriterJob } from './batch-writer-job';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};

const owner = env('KESSAI_OWNER');
const store = await openStore({ databaseUrl: env('DATABASE_URL'), poolSize: 2 });
const ctx = createContext({
  db: store.db,
  store,
  clock: new FixedClock(new Date(env('KESSAI_AT'))),
  ids: seededIds(7),
  log: silentLogger(),
  config: { batchSize: Number(process.env.KESSAI_BATCH_SIZE ?? 100), leaseMs: Number(process.env.KESSAI_LEASE_MS ?? 300_000) },
});
const job = batchWriterJob({
  owner,
  ...(process.env.KESSAI_SCHEDULE ? { schedule: process.env.KESSAI_SCHEDULE } : {}),
  pauseMs: Number(process.env.KESSAI_PAUSE_MS ?? 0),
  onBatch: (batch, rows) => process.stdout.write(`batch ${batch} committed ${rows}\n`),
});
const scheduler = new Scheduler(ctx, [job], { owner });
const outcomes = await scheduler.tick();
process.stdout.write(`${JSON.stringify({ owner, outcomes })}\n`);
await store.close();
