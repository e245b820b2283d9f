/**
 * A worker in its own process, for the tests that need real concurrency or a real crash: it runs
 * one scheduler tick of the batch-writer job against DATABASE_URL at a fixed instant, printing a
 * line per committed batch and a final JSON line with its outcomes.
 *
 * Env: DATABASE_URL, KESSAI_AT (ISO instant), KESSAI_OWNER, KESSAI_BATCH_SIZE, KESSAI_PAUSE_MS,
 * KESSAI_LEASE_MS, KESSAI_SCHEDULE (cron, default every minute).
 */
import { Scheduler } from '../../src/engine/scheduler';
import { batchWriterJob } from './batch-writer-job';
import { workerContext } from './env';

const { owner, store, ctx } = await workerContext({ config: { batchSize: Number(process.env.KESSAI_BATCH_SIZE ?? 100) } });
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
