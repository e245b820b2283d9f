/**
 * The `kessai` command. A composition root: it reads the environment and the real clock, builds
 * the engine, and turns every failure into one clear line and a non-zero exit (the stack only
 * with --verbose).
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { ALL_JOBS } from '../../jobs/index';
import { createAccount, listAccounts, type TermCycle } from '../accounts/accounts';
import { openStore } from '../db/connect';
import { setReauthSettings } from '../charges/hold-jobs';
import { migrate } from '../db/migrate';
import { assertCitus, distributeAccountTables } from '../db/citus';
import { KessaiError, toError } from '../domain/errors';
import { formatJst, parseInstant, toUnixSeconds } from '../domain/time';
import { nextSlotAfter } from '../engine/cron';
import type { EngineConfig, EngineObserver } from '../engine/context';
import { createLogger, silentLogger, type Logger } from '../engine/logger';
import { randomIds } from '../engine/random-ids';
import { openRuntime, workerName } from '../engine/runtime';
import { Scheduler, abandonedRuns, recentRuns, type SlotOutcome } from '../engine/scheduler';
import { listenForStop, type StopSignal } from '../engine/stop-signal';
import { systemClock } from '../engine/system-clock';
import { FixedClock } from '../engine/clock';
import { environmentConfig } from './environment';
import { registerAdjustments } from './adjustments';
import { registerServe } from './serve';
import { registerSimulate } from './simulate';
import { registerWebhooks, startWebhookPoller } from './webhooks';
import { packageVersion } from './version';
import { startWorkerLoop } from './worker-loop';

interface GlobalOptions {
  readonly databaseUrl?: string;
  readonly dataDir?: string;
  readonly verbose?: boolean;
  readonly logLevel: string;
}

function instantArg(value: string): Date {
  try {
    return parseInstant(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

function leaseSecondsArg(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 10) throw new InvalidArgumentError(`expected whole seconds, at least 10 (a heartbeat renews the lease every third of it), got ${JSON.stringify(value)}`);
  return n;
}

function positiveIntArg(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError(`expected a positive whole number, got ${JSON.stringify(value)}`);
  return n;
}

function feeRateArg(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const eq = value.lastIndexOf('=');
  if (eq <= 0) throw new InvalidArgumentError(`expected BRAND=RATE such as Visa=2.59, got ${JSON.stringify(value)}`);
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
}

function metricsPortArg(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65_535) throw new InvalidArgumentError(`expected a port from 0 to 65535, got ${JSON.stringify(value)}`);
  return n;
}

function integerArg(value: string): number {
  if (!/^-?\d+$/.test(value)) throw new InvalidArgumentError(`expected a whole number, got ${JSON.stringify(value)}`);
  return Number(value);
}

function globals(command: Command): GlobalOptions {
  return command.optsWithGlobals() as GlobalOptions;
}

function logger(options: GlobalOptions): Logger {
  return options.logLevel === 'silent' ? silentLogger() : createLogger({ level: options.verbose ? 'debug' : options.logLevel });
}

async function runtime(options: GlobalOptions, log: Logger, clock = systemClock, config: Partial<EngineConfig> = {}, observer?: EngineObserver) {
  return openRuntime({ databaseUrl: options.databaseUrl, dataDir: options.dataDir, clock, ids: randomIds(), log, config: { ...environmentConfig(), ...config }, ...(observer ? { observer } : {}) });
}

/** Engine settings from the options of the commands that run jobs. */
const jobConfig = (options: { leaseSeconds?: number; batchSize?: number }): Partial<EngineConfig> => ({
  ...(options.leaseSeconds === undefined ? {} : { leaseMs: options.leaseSeconds * 1000 }),
  ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
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
  }
}

/** Statuses after which a command that runs jobs exits non-zero. */
const troubled = (outcome: SlotOutcome): boolean => outcome.status === 'failed' || outcome.status === 'abandoned' || outcome.status === 'lost';

/**
 * `--at` of the commands that run jobs: the engine acts as if it were that instant, past or future
 * (a what-if day on a scratch database), through a fixed clock; the run ledger's leases keep the
 * real clock (docs/decisions.md, issue 20).
 */
const AT_HELP = 'act as if it were this instant, past or future (JST unless it has a zone); leases keep the real clock';

const STOP_HELP = `
SIGTERM or SIGINT (Ctrl-C): the current batch commits, its slot goes back to pending with the
attempt not counted (the next run resumes it), nothing more starts, and the command exits 0.`;

export function buildProgram(): Command {
  const program = new Command();
  program
    .name('kessai')
    .description('Deterministic billing and settlement batch engine.')
    .version(packageVersion(), '-V, --version', 'print the version')
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string; without it the embedded database is used').env('DATABASE_URL'))
    .addOption(new Option('--data-dir <dir>', 'folder of the embedded database').env('KESSAI_DATA_DIR').default('.kessai'))
    .addOption(new Option('--log-level <level>', 'log level (logs go to stderr)').choices(['debug', 'info', 'warn', 'error', 'silent']).env('KESSAI_LOG_LEVEL').default('warn'))
    .option('--verbose', 'show stack traces and debug logs')
    .showHelpAfterError('(add --help for usage)')
    .exitOverride();

  program
    .command('migrate')
    .description('apply the numbered SQL migrations in sql/ (a no-op when up to date)')
    .addOption(new Option('--citus', 'on a Citus coordinator: then distribute every account table by account_id (see README, "Running on Citus")').env('KESSAI_CITUS'))
    .action(async (migrateOptions: { citus?: boolean }, command: Command) => {
      const options = globals(command);
      const store = await openStore({ databaseUrl: options.databaseUrl, dataDir: options.dataDir });
      try {
        // Checked before migrating, so a mistyped URL migrates nothing it would not distribute.
        if (migrateOptions.citus) await assertCitus(store);
        const result = await migrate(store);
        const where = `${store.kind} ${store.location}`;
        if (result.applied.length === 0) console.log(`${where}: up to date (${result.alreadyApplied} migrations)`);
        else console.log(`${where}: applied ${result.applied.join(', ')}`);
        if (migrateOptions.citus) {
          const citus = await distributeAccountTables(store);
          console.log(`citus: distributed ${citus.distributed.length === 0 ? 'nothing new' : citus.distributed.join(', ')} (${citus.alreadyDistributed} already); local: ${citus.local.join(', ')}`);
        }
      } finally {
        await store.close();
      }
    });

  const accounts = program.command('accounts').description('merchant accounts');
  accounts
    .command('create')
    .description('provision a merchant account and print its test and live API keys (shown once)')
    .requiredOption('--name <name>', 'merchant name')
    .option('--id <id>', 'account id (acct_...); generated when omitted')
    .option('--live', 'allow live mode', false)
    .addOption(new Option('--term-cycle <cycle>', 'settlement term cycle').choices(['monthly', 'semi_monthly']).default('monthly'))
    .option('--fee-rate <brand=rate>', 'fee rate for a card brand, in percent (repeatable), e.g. Visa=2.59', feeRateArg)
    .option('--json', 'print the account and keys as JSON')
    .action(async (options: { name: string; id?: string; live: boolean; termCycle: TermCycle; feeRate?: Record<string, string>; json?: boolean }, command: Command) => {
      const g = globals(command);
      const rt = await runtime(g, logger(g));
      try {
        const { account, keys } = await createAccount(rt.ctx, {
          name: options.name,
          ...(options.id === undefined ? {} : { id: options.id }),
          liveEnabled: options.live,
          termCycle: options.termCycle,
          feeRates: options.feeRate ?? {},
        });
        if (options.json) {
          // snake_case and UNIX seconds, like every other JSON this command and the API print.
          const object = { id: account.id, object: 'account', name: account.name, live_enabled: account.liveEnabled, term_cycle: account.termCycle, fee_rates: account.feeRates, created: toUnixSeconds(account.createdAt) };
          console.log(JSON.stringify({ account: object, keys }, null, 2));
          return;
        }
        console.log(`account ${account.id} (${account.name}), term cycle ${account.termCycle}, live mode ${account.liveEnabled ? 'enabled' : 'not enabled'}`);
        console.log(`fee rates: ${Object.entries(account.feeRates).map(([brand, rate]) => `${brand} ${rate}%`).join(', ')}`);
        console.log(`test secret key: ${keys.test.secret}`);
        console.log(`test public key: ${keys.test.public}`);
        console.log(`live secret key: ${keys.live.secret}`);
        console.log(`live public key: ${keys.live.public}`);
        console.log('Keep the secret keys now: only their digests are stored.');
      } finally {
        await rt.close();
      }
    });
  accounts
    .command('reauth')
    .description('scheduled reauthorization of held charges for an account (opt-in; never debit or prepaid cards): show or change it')
    .argument('<account>', 'account id')
    .option('--enable', 'reauthorize holds before they lapse')
    .option('--disable', 'let holds lapse (the default)')
    .option('--lead-hours <n>', 'reauthorize holds lapsing within this many hours (1-720)', integerArg)
    .option('--max-count <n>', 'scheduled attempts per charge at most (0-100)', integerArg)
    .action(async (accountId: string, options: { enable?: boolean; disable?: boolean; leadHours?: number; maxCount?: number }, command: Command) => {
      if (options.enable && options.disable) throw new Error('--enable and --disable exclude each other');
      const g = globals(command);
      const rt = await runtime(g, logger(g));
      try {
        const settings = await setReauthSettings(rt.ctx.db, accountId, {
          ...(options.enable ? { enabled: true } : options.disable ? { enabled: false } : {}),
          ...(options.leadHours === undefined ? {} : { leadHours: options.leadHours }),
          ...(options.maxCount === undefined ? {} : { maxCount: options.maxCount }),
        });
        console.log(
          settings.enabled
            ? `${accountId}: scheduled reauthorization on: holds lapsing within ${settings.leadHours} h are reauthorized, at most ${settings.maxCount} time(s) per charge`
            : `${accountId}: scheduled reauthorization off (holds lapse at expired_at)`,
        );
      } finally {
        await rt.close();
      }
    });
  accounts
    .command('list')
    .description('list merchant accounts')
    .action(async (_options, command: Command) => {
      const g = globals(command);
      const rt = await runtime(g, logger(g));
      try {
        const rows = await listAccounts(rt.ctx);
        if (rows.length === 0) console.log('no accounts yet: ./bin/kessai.mjs accounts create --name <name>');
        for (const row of rows) console.log(`${row.id}\t${row.name}\t${row.termCycle}\t${row.liveEnabled ? 'live' : 'test only'}\t${formatJst(row.createdAt)}`);
      } finally {
        await rt.close();
      }
    });

  const jobs = program.command('jobs').description('scheduled jobs');
  jobs
    .command('list')
    .description('list the jobs, their schedules (Asia/Tokyo), next slots and latest runs')
    .option('--at <instant>', 'compute next slots from this instant (JST unless it has a zone)', instantArg)
    .action(async (options: { at?: Date }, command: Command) => {
      const g = globals(command);
      const now = options.at ?? systemClock.now();
      const rt = await runtime(g, logger(g));
      try {
        if (ALL_JOBS.length === 0) console.log('no jobs registered');
        for (const job of ALL_JOBS) {
          const next: Date[] = [];
          let after = now;
          for (let i = 0; i < 3; i += 1) next.push((after = nextSlotAfter(job.schedule, after)));
          const [last] = await recentRuns(rt.ctx, job.name, 1);
          const lastText = last ? `${formatJst(last.slot)} ${last.status}` : 'never run';
          console.log(`${job.name}  "${job.schedule}"  ${job.description}`);
          console.log(`  next: ${next.map(formatJst).join(', ')}`);
          console.log(`  last: ${lastText}`);
          const abandoned = await abandonedRuns(rt.ctx, job.name);
          if (abandoned.total > 0) {
            console.log(`  ABANDONED: ${abandoned.total} slot(s) given up; run each again with: kessai jobs run ${job.name} --at SLOT`);
            for (const run of abandoned.rows) {
              console.log(`    ${run.slot.toISOString()}  attempt ${run.attempt}, ${run.attempts_without_progress} in a row without progress: ${(run.error ?? '').split('\n')[0]}`);
            }
            if (abandoned.total > abandoned.rows.length) console.log(`    … and ${abandoned.total - abandoned.rows.length} older`);
          }
        }
      } finally {
        await rt.close();
      }
    });
  jobs
    .command('run')
    .description('run, or replay, one slot of one job now (replays create nothing twice; an abandoned slot is run again this way)')
    .argument('<job>', 'job name (see jobs list)')
    .requiredOption('--at <instant>', `the slot, e.g. 2027-01-01T09:00 (JST) or 2027-01-01T00:00:00Z: ${AT_HELP}`, instantArg)
    .option('--batch-size <n>', 'rows per batch transaction', positiveIntArg)
    .addHelpText('after', STOP_HELP)
    .action(async (jobName: string, options: { at: Date; batchSize?: number }, command: Command) => {
      const g = globals(command);
      const log = logger(g);
      const stop = listenForStop(log);
      try {
        const rt = await runtime(g, log, new FixedClock(options.at), jobConfig(options));
        try {
          const scheduler = new Scheduler(rt.ctx, ALL_JOBS, { owner: workerName(), ledgerClock: systemClock, stopSignal: stop.signal });
          const outcome = await scheduler.runSlot(jobName, options.at);
          console.log(describeOutcome(outcome));
          if (troubled(outcome)) process.exitCode = 1;
        } finally {
          await rt.close();
        }
      } finally {
        stop.dispose();
      }
    });

  // Settlement (service rules §4): the nightly statement generation on demand. Runs the daily slot
  // of terms.close, then of balances.close, at or before --at (default now), as `jobs run` would.
  program
    .command('statements')
    .description('statement generation')
    .command('run')
    .description('close every term ended as of the slot at or before --at (default now), then close balances due by then')
    .option('--at <instant>', `e.g. 2027-02-01T00:00 (JST) or 2027-01-31T15:00:00Z; the daily 00:00 JST slot at or before it runs: ${AT_HELP}`, instantArg)
    .option('--batch-size <n>', 'rows per batch transaction', positiveIntArg)
    .addHelpText('after', STOP_HELP)
    .action(async (options: { at?: Date; batchSize?: number }, command: Command) => {
      const g = globals(command);
      const log = logger(g);
      const stop = listenForStop(log);
      // As `worker --once --at`: the engine acts as if it were --at (a past or a what-if instant);
      // the run ledger's leases follow the real clock.
      const at = options.at ?? systemClock.now();
      try {
        const rt = await runtime(g, log, new FixedClock(at), jobConfig(options));
        try {
          const scheduler = new Scheduler(rt.ctx, ALL_JOBS, { owner: workerName(), ledgerClock: systemClock, stopSignal: stop.signal });
          for (const name of ['terms.close', 'balances.close']) {
            // Stopped: the slot that was running has been handed back; the next one is not started.
            if (scheduler.stopping) break;
            const job = ALL_JOBS.find((candidate) => candidate.name === name)!;
            // The latest slot at or before `at`: the first one strictly after `at` − 1 day (daily schedules).
            const outcome = await scheduler.runSlot(name, nextSlotAfter(job.schedule, new Date(at.getTime() - 24 * 60 * 60 * 1000)));
            console.log(describeOutcome(outcome));
            if (troubled(outcome)) process.exitCode = 1;
          }
        } finally {
          await rt.close();
        }
      } finally {
        stop.dispose();
      }
    });

  program
    .command('worker')
    .description('run the scheduler: wake every minute (node-cron), run every due slot, backfill missed ones')
    .option('--once', 'run the due slots once, print one line per slot, and exit (non-zero when a slot failed or was abandoned)')
    .option('--at <instant>', `with --once: ${AT_HELP}`, instantArg)
    .option('--lease-seconds <n>', 'how long a claimed slot is reserved for this worker (at least 10)', leaseSecondsArg)
    .option('--batch-size <n>', 'rows per batch transaction', positiveIntArg)
    .option('--metrics-port <n>', 'serve Prometheus metrics at http://HOST:N/metrics while running (0: any free port, printed)', metricsPortArg)
    .option('--metrics-host <address>', 'address of --metrics-port', '127.0.0.1')
    .addHelpText('after', STOP_HELP)
    .action(async (options: { once?: boolean; at?: Date; leaseSeconds?: number; batchSize?: number; metricsPort?: number; metricsHost: string }, command: Command) => {
      const g = globals(command);
      if (options.at && !options.once) throw new Error('--at goes with --once (a running worker follows the real clock)');
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
        // Leases follow the real clock even when the slots follow --at (docs/decisions.md).
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
          if (outcomes.some(troubled)) process.exitCode = 1;
        } finally {
          await metricsServer?.close();
          await rt.close();
        }
      } finally {
        stop.dispose();
      }
    });

  registerSimulate(program);
  registerServe(program);
  registerWebhooks(program, (command) => runtime(globals(command), logger(globals(command))));
  registerAdjustments(program, accounts, (command) => runtime(globals(command), logger(globals(command))));
  return program;
}

/** The long-running worker: a tick now, then one per minute until SIGTERM or SIGINT. */
async function runWorker(scheduler: Scheduler, log: Logger, stop: StopSignal, close: () => Promise<void>): Promise<void> {
  const loop = startWorkerLoop(scheduler, log);
  await stop.stopped;
  await loop.stop();
  await close();
  log.info('worker stopped');
}

export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv as string[]);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version are "errors" to commander; they already printed what they had to.
      return error.exitCode;
    }
    const verbose = argv.includes('--verbose');
    const normalised = toError(error);
    if (normalised instanceof KessaiError) {
      console.error(`kessai: ${normalised.code}${normalised.param ? ` (${normalised.param})` : ''}: ${normalised.message}`);
    } else {
      console.error(`kessai: ${normalised.message}`);
    }
    if (verbose && normalised.stack) console.error(normalised.stack);
    return 1;
  }
}

// Run when executed directly (`tsx src/cli/main.ts`); bin/kessai.mjs imports and calls main itself.
const invokedDirectly = process.argv[1] !== undefined && /(?:^|[\\/])src[\\/]cli[\\/]main\.ts$/.test(process.argv[1]);
if (invokedDirectly) {
  main(process.argv).then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
