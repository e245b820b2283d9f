/**
 * `kessai simulate`: the command's options and help. What it runs is in simulate-run.ts, loaded
 * only when the command runs: the scenario schema, the simulation driver and the report are not
 * compiled and loaded for every other command (part of the embedded commands' start-up time).
 */
import { InvalidArgumentError, type Command } from 'commander';
import { parseInstant } from '../domain/time';
import { REPORT_DETAILS, type ReportDetail } from '../simulation/report-detail';
import type { SimulateOptions } from './simulate-run';

function instantArg(value: string): Date {
  try {
    return parseInstant(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

function seedArg(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new InvalidArgumentError(`expected a whole number, got ${JSON.stringify(value)}`);
  return n;
}

function batchArg(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError(`expected a positive whole number, got ${JSON.stringify(value)}`);
  return n;
}

function fromArg(value: string): Date | 'now' {
  return value === 'now' ? 'now' : instantArg(value);
}

function rateArg(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !(n >= 0 && n <= 1)) throw new InvalidArgumentError(`expected a share from 0 to 1, got ${JSON.stringify(value)}`);
  return n;
}

function detailArg(value: string): ReportDetail {
  if (!(REPORT_DETAILS as readonly string[]).includes(value)) throw new InvalidArgumentError(`expected one of ${REPORT_DETAILS.join(', ')}, got ${JSON.stringify(value)}`);
  return value as ReportDetail;
}

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

export function registerSimulate(program: Command): void {
  program
    .command('simulate')
    .description('replay a scenario over [from, to) on a virtual clock with the worker\'s own jobs, and report what billing does')
    .option('--scenario <file>', 'scenario file (JSON, see scripts/scenarios/scenario.schema.json); optional with --source')
    .requiredOption('--from <date|instant|now>', 'start of the range; a date or a date-time without zone is read in JST; now = the source\'s newest instant (--source)', fromArg)
    .requiredOption('--to <date|instant>', 'end of the range (exclusive)', instantArg)
    .option('--seed <n>', 'seed of ids and card outcomes', seedArg, 1)
    .option('--what-if <file>', 'a scenario overlay run beside the baseline; the report adds a month-by-month diff')
    .option('--out <dir>', 'output folder', './sim-out')
    .option('--json', 'print the summary as JSON and nothing else')
    .option('--progress', 'show the progress line (simulated date, renewals/s, ETA) even when stderr is not a terminal, a line every two seconds; not with --json')
    .option('--strict', 'stop at the first timeline entry that fails')
    .option('--batch-size <n>', 'rows per job batch', batchArg)
    .option('--source <database-url|data-dir>', 'forecast: start from a read-only snapshot of this kessai database instead of an empty book')
    .option('--account <id>', 'with --source: copy this account only (repeatable; default every account)', collect)
    .option(
      '--detail <level>',
      'what report.json lists: summary (months, terms, statements, balances, steps), charges (also every subscription, charge and refund, and charges.csv), full (also every event and webhook delivery)',
      detailArg,
      'charges',
    )
    .option('--decline-rate <share>', 'assumed share (0..1) of otherwise approved card authorizations declined, drawn from the seed; replaces the scenario\'s and what-if\'s decline_rate', rateArg)
    .addHelpText(
      'after',
      '\nRuns on an embedded database (in memory; a large scenario in a temporary folder) unless --database-url is given on the\n' +
        'command line, in which case a scratch database is created on that server and dropped afterwards (DATABASE_URL from\n' +
        'the environment is not used here).\n' +
        'Exit status: 0 done; 1 bad arguments or scenario; 2 done, but some entries were refused for reasons other than a card decline.',
    )
    .action(async (options: SimulateOptions, command: Command) => {
      // Only an explicit --database-url moves the simulation to a server: the worker's DATABASE_URL
      // in the environment must not turn a what-if into traffic on a production server.
      const root = command.parent!;
      const databaseUrl = root.getOptionValueSource('databaseUrl') === 'cli' ? (root.opts() as { databaseUrl?: string }).databaseUrl : undefined;
      if (!options.source && options.scenario === undefined) throw new InvalidArgumentError('--scenario <file> is required (or --source to forecast a live book)');
      if (!options.source && (options.from as Date | 'now') === 'now') throw new InvalidArgumentError('--from now needs --source (the newest instant of the source)');
      const { runSimulate } = await import('./simulate-run');
      await runSimulate(options, databaseUrl);
    });
}
