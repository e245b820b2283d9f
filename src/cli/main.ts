/**
 * The `kessai` command. A composition root: it reads the environment and the real clock, builds
 * the engine, and turns every failure into one clear line and a non-zero exit (the stack only
 * with --verbose).
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { KessaiError, toError } from '../domain/errors';
import { parseInstant } from '../domain/time';
import type { GlobalOptions } from './command-runtime';
import { registerAdjustments } from './adjustments';
import { registerServe } from './serve';
import { registerSimulate } from './simulate';
import { registerWebhooks } from './webhooks';
import { packageVersion } from './version';

// What each command runs is loaded when it runs: `--help`, `--version` and bad arguments load
// neither the database drivers nor the engine, and each command only what it uses.
const accountCommands = () => import('./account-commands');
const jobCommands = () => import('./job-commands');
const clockCommands = () => import('./clock-commands');

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

/**
 * `--at` of the commands that run jobs: the engine acts as if it were that instant, past or future
 * (a what-if day on a scratch database), through a fixed clock; the run ledger's leases keep the
 * real clock (docs/decisions/jobs-and-scheduler.md, "Scheduler under crash loops and polite stops").
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
    .action(async (options: { citus?: boolean }, command: Command) => {
      await (await accountCommands()).migrateCommand(options, globals(command));
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
    .action(async (options: { name: string; id?: string; live: boolean; termCycle: 'monthly' | 'semi_monthly'; feeRate?: Record<string, string>; json?: boolean }, command: Command) => {
      await (await accountCommands()).createAccountCommand(options, globals(command));
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
      await (await accountCommands()).reauthCommand(accountId, options, globals(command));
    });
  accounts
    .command('list')
    .description('list merchant accounts')
    .action(async (_options, command: Command) => {
      await (await accountCommands()).listAccountsCommand(globals(command));
    });

  const clocks = program.command('clocks').description("test clocks: a test-mode account's own time for the customers attached to them");
  clocks
    .command('create')
    .description('create a test clock frozen at an instant')
    .requiredOption('--account <id>', 'the account (test mode)')
    .requiredOption('--frozen-time <instant>', 'the instant the clock starts at (JST unless it has a zone)', instantArg)
    .option('--name <name>', 'a name for the clock')
    .option('--json', 'print the clock as JSON')
    .action(async (options: { account: string; frozenTime: Date; name?: string; json?: boolean }, command: Command) => {
      await (await clockCommands()).createClockCommand(options, globals(command));
    });
  clocks
    .command('advance')
    .description("run every job for the clock's objects up to an instant, then freeze it there (waits until ready; resumes an advance whose process died)")
    .argument('<clock>', 'the test clock id')
    .requiredOption('--account <id>', 'the account (test mode)')
    .requiredOption('--to <instant>', 'the instant to advance to (JST unless it has a zone; at most 732 days ahead)', instantArg)
    .option('--json', 'print the clock as JSON')
    .action(async (id: string, options: { account: string; to: Date; json?: boolean }, command: Command) => {
      await (await clockCommands()).advanceClockCommand(id, options, globals(command));
    });
  clocks
    .command('list')
    .description("the account's test clocks, newest first")
    .requiredOption('--account <id>', 'the account (test mode)')
    .option('--json', 'print the list as JSON')
    .action(async (options: { account: string; json?: boolean }, command: Command) => {
      await (await clockCommands()).listClocksCommand(options, globals(command));
    });
  clocks
    .command('delete')
    .description('delete a test clock and every object on it')
    .argument('<clock>', 'the test clock id')
    .requiredOption('--account <id>', 'the account (test mode)')
    .action(async (id: string, options: { account: string }, command: Command) => {
      await (await clockCommands()).deleteClockCommand(id, options, globals(command));
    });

  const jobs = program.command('jobs').description('scheduled jobs');
  jobs
    .command('list')
    .description('list the jobs, their schedules (Asia/Tokyo), next slots and latest runs')
    .option('--at <instant>', 'compute next slots from this instant (JST unless it has a zone)', instantArg)
    .action(async (options: { at?: Date }, command: Command) => {
      await (await jobCommands()).listJobsCommand(options, globals(command));
    });
  jobs
    .command('run')
    .description('run, or replay, one slot of one job now (replays create nothing twice; an abandoned slot is run again this way)')
    .argument('<job>', 'job name (see jobs list)')
    .requiredOption('--at <instant>', `the slot, e.g. 2027-01-01T09:00 (JST) or 2027-01-01T00:00:00Z: ${AT_HELP}`, instantArg)
    .option('--batch-size <n>', 'rows per batch transaction', positiveIntArg)
    .addHelpText('after', STOP_HELP)
    .action(async (jobName: string, options: { at: Date; batchSize?: number }, command: Command) => {
      await (await jobCommands()).runJobCommand(jobName, options, globals(command));
    });

  // Settlement (service rules §4): the nightly statement generation on demand. Runs the daily slot
  // of terms.close, then service_fees.bill (the 1st), then balances.close, at or before --at (default now), as `jobs run` would.
  program
    .command('statements')
    .description('statement generation')
    .command('run')
    .description('close every term ended as of the slot at or before --at (default now), bill the plan fees due by then, then close balances due by then')
    .option('--at <instant>', `e.g. 2027-02-01T00:00 (JST) or 2027-01-31T15:00:00Z; the daily 00:00 JST slot at or before it runs: ${AT_HELP}`, instantArg)
    .option('--batch-size <n>', 'rows per batch transaction', positiveIntArg)
    .addHelpText('after', STOP_HELP)
    .action(async (options: { at?: Date; batchSize?: number }, command: Command) => {
      await (await jobCommands()).runStatementsCommand(options, globals(command));
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
      if (options.at && !options.once) throw new Error('--at goes with --once (a running worker follows the real clock)');
      await (await jobCommands()).workerCommand(options, globals(command));
    });

  registerSimulate(program);
  registerServe(program);
  registerWebhooks(program);
  registerAdjustments(program, accounts);
  return program;
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
