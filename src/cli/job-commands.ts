/**
 * `kessai jobs …`, `kessai statements run` and `kessai worker`: what they run, loaded by main.ts
 * only when one of them runs (the options and help stay in main.ts).
 */
import { ALL_JOBS } from '../../jobs/index';
import { formatJst, MS_PER_DAY } from '../domain/time';
import { FixedClock } from '../engine/clock';
import type { EngineConfig } from '../engine/context';
import { nextSlotAfter } from '../engine/cron';
import { createLogger, type Logger } from '../engine/logger';
import { workerName } from '../engine/runtime';
import { Scheduler, type SlotOutcome } from '../engine/scheduler';
import { listenForStop, type StopSignal } from '../engine/stop-signal';
import { systemClock } from '../engine/system-clock';
import { logger, runtime, type GlobalOptions } from './command-runtime';
import { withOperator } from './operator-access';
import { startWebhookPoller } from './webhook-commands';
import { startWorkerLoop } from './worker-loop';

/** Days the run ledger keeps a succeeded slot unless KESSAI_JOB_RUN_RETENTION_DAYS says otherwise. */
const DEFAULT_RUN_RETENTION_DAYS = 30;

/** KESSAI_JOB_RUN_RETENTION_DAYS: a whole number of days, 1 or more (the backfill window is one day). */
export function runRetentionMs(value: string | undefined): number {
  if (value === undefined || value === '') return DEFAULT_RUN_RETENTION_DAYS * MS_PER_DAY;
  if (!/^[1-9][0-9]{0,4}$/.test(value)) throw new Error(`KESSAI_JOB_RUN_RETENTION_DAYS must be a whole number of days from 1, got ${JSON.stringify(value)}`);
  return Number(value) * MS_PER_DAY;
}

/** Engine settings from the options of the commands that run jobs. */
const jobConfig = (options: { leaseSeconds?: number; batchSize?: number }): Partial<EngineConfig> => ({
  ...(options.leaseSeconds === undefined ? {} : { leaseMs: options.leaseSeconds * 1000 }),
  ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
  runRetentionMs: runRetentionMs(process.env.KESSAI_JOB_RUN_RETENTION_DAYS),
});

/** What kind of run an outcome was, in words (a first run says nothing). */
function runKind(outcome: SlotOutcome): string {
  switch (outcome.claimedFrom) {
    case 'succeeded':
      return ' (replayed)';
    case 'abandoned':
      return ' (re-run of an abandoned slot)';
    case 'failed':
      return ` (retry, attempt ${outcome.attempt})`;
    case 'lapsed':
      return ` (taken over from a worker that stopped, attempt ${outcome.attempt})`;
    case 'pending':
      return outcome.attempt > 1 ? ` (resumed, attempt ${outcome.attempt})` : '';
    case null:
      return '';
  }
}

const sameCounts = (a: Readonly<Record<string, number>>, b: Readonly<Record<string, number>>): boolean =>
  Object.keys(a).length === Object.keys(b).length && Object.entries(a).every(([name, value]) => b[name] === value);

/** One line per slot run: what ran, what it did, and what an operator may have to do. */
function describeOutcome(outcome: SlotOutcome): string {
  const head = `${outcome.job} @ ${outcome.slot.toISOString()}${runKind(outcome)}`;
  const counts = JSON.stringify(outcome.counts);
  switch (outcome.status) {
    case 'succeeded':
      return `${head}: succeeded ${counts}${sameCounts(outcome.counts, outcome.slotCounts) ? '' : `; slot total over all attempts ${JSON.stringify(outcome.slotCounts)}`}`;
    case 'released':
      return `${head}: stopped after committing ${counts}; the slot is pending again and resumes on the next run`;
    case 'lost':
      return `${head}: lost its claim to another worker, which records the outcome`;
    case 'failed':
      return `${head}: failed: ${outcome.error} (retried later; ${outcome.attemptsWithoutProgress} attempt(s) in a row without progress)`;
    case 'abandoned':
      return `${head}: ABANDONED: ${outcome.error}; re-run it with: kessai jobs run ${outcome.job} --at ${outcome.slot.toISOString()}`;
    case 'partial':
      return `${head}: PARTIAL: committed ${counts}, every other account group done; ${outcome.error} (retried from ${outcome.retryAt.toISOString()}, pending groups only)`;
    case 'shared':
      return `${head}: shared the slot with its lead: committed ${counts} on its account groups`;
  }
}

/** Statuses after which a command that runs jobs exits non-zero. */
const troubled = (outcome: SlotOutcome): boolean => outcome.status === 'failed' || outcome.status === 'abandoned' || outcome.status === 'lost';

/** Exit status of a command that runs jobs when every trouble was a slot left partly done (account groups pending). */
export const PARTIAL_EXIT_CODE = 3;

/** 1 after any failed, abandoned or lost slot; PARTIAL_EXIT_CODE when slots were only left partly done; else 0. */
const exitCodeOf = (outcomes: readonly SlotOutcome[]): number => (outcomes.some(troubled) ? 1 : outcomes.some((outcome) => outcome.status === 'partial') ? PARTIAL_EXIT_CODE : 0);

/** Abandoned slots listed per job at most (then "… and N older"). */
const ABANDONED_LISTED = 5;

export async function listJobsCommand(options: { at?: Date }, g: GlobalOptions): Promise<void> {
  const now = options.at ?? systemClock.now();
  // Through a running serve's operator API when it holds the embedded database (operator-access.ts).
  await withOperator({ databaseUrl: g.databaseUrl, dataDir: g.dataDir, log: logger(g) }, async (operator) => {
    if (ALL_JOBS.length === 0) console.log('no jobs registered');
    const abandonedBy = new Map((await operator.jobs.states()).map((state) => [state.job, state.abandonedSlots]));
    for (const job of ALL_JOBS) {
      const next: Date[] = [];
      let after = now;
      for (let i = 0; i < 3; i += 1) next.push((after = nextSlotAfter(job.schedule, after)));
      const [last] = await operator.jobs.slots({ job: job.name, limit: 1 });
      const lastText = last ? `${formatJst(last.slot)} ${last.status}` : 'never run';
      console.log(`${job.name}  "${job.schedule}"  ${job.description}`);
      console.log(`  next: ${next.map(formatJst).join(', ')}`);
      console.log(`  last: ${lastText}`);
      const total = abandonedBy.get(job.name) ?? 0;
      if (total > 0) {
        const rows = await operator.jobs.slots({ job: job.name, status: 'abandoned', limit: ABANDONED_LISTED });
        console.log(`  ABANDONED: ${total} slot(s) given up; run each again with: kessai jobs run ${job.name} --at SLOT`);
        for (const run of rows) {
          console.log(`    ${run.slot.toISOString()}  attempt ${run.attempt}, ${run.attemptsWithoutProgress} in a row without progress: ${(run.error ?? '').split('\n')[0]}`);
        }
        if (total > rows.length) console.log(`    … and ${total - rows.length} older`);
      }
    }
  });
}

export async function runJobCommand(jobName: string, options: { at: Date; batchSize?: number }, g: GlobalOptions): Promise<void> {
  const log = logger(g);
  const stop = listenForStop(log);
  try {
    // Through a running serve's operator API when it holds the embedded database (operator-access.ts).
    await withOperator({ databaseUrl: g.databaseUrl, dataDir: g.dataDir, log, config: jobConfig(options), stopSignal: stop.signal }, async (operator) => {
      const outcome = await operator.jobs.run(jobName, options.at);
      console.log(describeOutcome(outcome));
      process.exitCode = exitCodeOf([outcome]);
    });
  } finally {
    stop.dispose();
  }
}

// Settlement (service rules §4): the nightly statement generation on demand. Runs the daily slot
// of terms.close, then service_fees.bill (the 1st), then balances.close, at or before --at (default now), as `jobs run` would.
// As `worker --once --at`: the engine acts as if it were --at (a past or a what-if instant); the
// run ledger's leases follow the real clock.
export async function runStatementsCommand(options: { at?: Date; batchSize?: number }, g: GlobalOptions): Promise<void> {
  const log = logger(g);
  const stop = listenForStop(log);
  try {
    await withOperator({ databaseUrl: g.databaseUrl, dataDir: g.dataDir, log, config: jobConfig(options), stopSignal: stop.signal }, async (operator) => {
      const outcomes = await operator.jobs.runStatements(options.at ?? systemClock.now());
      for (const outcome of outcomes) console.log(describeOutcome(outcome));
      process.exitCode = exitCodeOf(outcomes);
    });
  } finally {
    stop.dispose();
  }
}

export interface WorkerOptions {
  readonly once?: boolean;
  readonly at?: Date;
  readonly leaseSeconds?: number;
  readonly batchSize?: number;
  readonly metricsPort?: number;
  readonly metricsHost: string;
}

export async function workerCommand(options: WorkerOptions, g: GlobalOptions): Promise<void> {
  // The long-running worker's logs are its output (info by default); `--once` prints a line
  // per slot on stdout and logs only warnings and errors unless asked for more.
  const log = createLogger({ level: g.verbose ? 'debug' : g.logLevel === 'warn' && !options.once ? 'info' : g.logLevel });
  // First, before the database is opened: until the handlers exist, a signal kills the process.
  const stop = listenForStop(log);
  try {
    // Loaded only when asked for: prom-client is not part of every command's start-up.
    const metricsModules = options.metricsPort === undefined ? undefined : await Promise.all([import('../metrics/metrics'), import('../metrics/metrics-server')]);
    const metrics = metricsModules === undefined ? undefined : new metricsModules[0].KessaiMetrics({ jobs: ALL_JOBS });
    const rt = await runtime(g, log, options.at ? new FixedClock(options.at) : systemClock, jobConfig(options), metrics?.observer);
    const metricsServer = metrics === undefined ? undefined : await metricsModules![1].startMetricsServer({ metrics, ctx: rt.ctx, clock: systemClock, host: options.metricsHost, port: options.metricsPort! }).catch(async (error: unknown) => {
      await rt.close();
      throw error;
    });
    if (metricsServer) console.log(`metrics on ${metricsServer.url}`);
    // Leases follow the real clock even when the slots follow --at (docs/decisions/jobs-and-scheduler.md, "Scheduler hardening").
    const scheduler = new Scheduler(rt.ctx, ALL_JOBS, { owner: workerName(), ledgerClock: systemClock, stopSignal: stop.signal });
    if (!options.once) {
      // The running worker also sends new events' webhooks within a second of their commit.
      const poller = startWebhookPoller(rt.ctx, workerName(), log);
      await runWorker(scheduler, log, stop, () => poller.stop().finally(async () => {
        await metricsServer?.close();
        await rt.close();
      }));
      return;
    }
    try {
      const outcomes = await scheduler.tick();
      for (const outcome of outcomes) console.log(describeOutcome(outcome));
      const stopped = stop.signal.aborted ? `; stopped by ${String(stop.signal.reason)}` : '';
      console.log(`${outcomes.length} slot(s) run for ${ALL_JOBS.length} job(s) on ${rt.store.kind} ${rt.store.location}${stopped}`);
      process.exitCode = exitCodeOf(outcomes);
    } finally {
      await metricsServer?.close();
      await rt.close();
    }
  } finally {
    stop.dispose();
  }
}

/** The long-running worker: a tick now, then one per minute until SIGTERM or SIGINT. */
async function runWorker(scheduler: Scheduler, log: Logger, stop: StopSignal, close: () => Promise<void>): Promise<void> {
  const loop = startWorkerLoop(scheduler, log);
  await stop.stopped;
  await loop.stop();
  await close();
  log.info('worker stopped');
}
