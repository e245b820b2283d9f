/**
 * The worker's wake-up loop: a tick now, then one per minute (node-cron, Asia/Tokyo), never two
 * ticks at once. Used by `kessai worker` and by `kessai serve` on the embedded database; both stop
 * it on src/engine/stop-signal.ts `listenForStop` (whose signal the scheduler is also given).
 */
import cron from 'node-cron';
import { ALL_JOBS } from '../../jobs/index';
import type { Logger } from '../engine/logger';
import type { Scheduler } from '../engine/scheduler';

export interface WorkerLoop {
  /** Stops waking up and waits for the current batch to finish. */
  stop(): Promise<void>;
}

export function startWorkerLoop(scheduler: Scheduler, log: Logger): WorkerLoop {
  let ticking: Promise<unknown> | null = null;
  const tick = (): void => {
    if (ticking || scheduler.stopping) {
      log.debug('previous tick still running; this wake-up is skipped');
      return;
    }
    ticking = scheduler
      .tick()
      .catch((error: unknown) => log.error({ err: error }, 'tick failed; the next wake-up tries again'))
      .finally(() => {
        ticking = null;
      });
  };
  const task = cron.schedule('* * * * *', tick, { timezone: 'Asia/Tokyo', noOverlap: true });
  log.info({ jobs: ALL_JOBS.map((job) => job.name) }, 'worker started');
  tick();
  return {
    async stop() {
      scheduler.stop();
      await task.stop();
      if (ticking) await ticking;
    },
  };
}

