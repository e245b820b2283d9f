/**
 * `kessai simulate`: replays a scenario over [from, to) on a virtual clock, optionally beside a
 * what-if variant, and writes the report, summary, CSV exports and chart. A composition root: it
 * reads files, the terminal and the real clock (for the progress rate only).
 */
import { appendFileSync, readFileSync, rmSync, truncateSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import cliProgress from 'cli-progress';
import { InvalidArgumentError, type Command } from 'commander';
import { ALL_JOBS } from '../../jobs/index';
import { parseInstant } from '../domain/time';
import { simulate, type SimulationOptions, type SimulationStats } from '../simulation/simulate';
import { openForecast, type Forecast } from '../simulation/forecast';
import { operationNames } from '../operations/registry';
import { diffSummaries, formatDiff, formatSummary, writeReport, writeSummaryFiles, type ReportHeader, type Summary, type WrittenReport } from '../simulation/report';
import { loadScenario, overlayScenario, planSteps, ScenarioError, type Scenario, type Step } from '../simulation/scenario';

interface SimulateOptions {
  readonly scenario?: string;
  readonly from: Date;
  readonly to: Date;
  readonly seed: number;
  readonly whatIf?: string;
  readonly out: string;
  readonly json?: boolean;
  readonly strict?: boolean;
  readonly batchSize?: number;
  readonly source?: string;
  readonly account?: string[];
  readonly declineRate?: number;
}

/** Forecast runs (issue 19): the copied snapshot and the report's source header. */
type ForecastRun = Pick<SimulationOptions, 'source' | 'declineRate'> & { readonly header?: ReportHeader['source'] };

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

const MS_PER_DAY = 86_400_000;

/** A progress bar on stderr while the clock moves: simulated date, percent, simulated days per second. */
function progress(from: Date, to: Date, label: string, enabled: boolean) {
  if (!enabled) return { update: () => {}, stop: () => {} };
  const started = performance.now();
  const total = to.getTime() - from.getTime();
  const bar = new cliProgress.SingleBar(
    { format: `${label} {date} |{bar}| {percentage}% | {rate} days/s | {stops} stops`, hideCursor: true, clearOnComplete: true, stream: process.stderr },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0, { date: from.toISOString().slice(0, 10), rate: '0', stops: 0 });
  return {
    update(at: Date, stats: SimulationStats) {
      const done = at.getTime() - from.getTime();
      const seconds = (performance.now() - started) / 1000;
      bar.update(done, { date: new Date(at.getTime() + 9 * 3_600_000).toISOString().slice(0, 10), rate: seconds > 0 ? (done / MS_PER_DAY / seconds).toFixed(1) : '0', stops: stats.stops });
    },
    stop: () => bar.stop(),
  };
}

function fromArg(value: string): Date | 'now' {
  return value === 'now' ? 'now' : instantArg(value);
}

function rateArg(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !(n >= 0 && n <= 1)) throw new InvalidArgumentError(`expected a share from 0 to 1, got ${JSON.stringify(value)}`);
  return n;
}

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

async function runOne(scenario: Scenario, steps: readonly Step[], options: SimulateOptions, databaseUrl: string | undefined, dir: string, label: string, showProgress: boolean, forecast: ForecastRun = {}): Promise<WrittenReport & { failed: string[] }> {
  const bar = progress(options.from, options.to, label, showProgress);
  try {
    return await simulate(
      {
        scenario,
        steps,
        from: options.from,
        to: options.to,
        seed: options.seed,
        jobs: ALL_JOBS,
        databaseUrl,
        strict: options.strict ?? false,
        ...(options.batchSize ? { batchSize: options.batchSize } : {}),
        ...(forecast.source ? { source: forecast.source } : {}),
        ...(options.declineRate ? { declineRate: options.declineRate } : {}),
        onProgress: (at, stats) => bar.update(at, stats),
      },
      async (world) => {
        bar.stop();
        const written = await writeReport(world, { scenario: scenario.name ?? null, from: options.from, to: options.to, seed: options.seed, ...(forecast.header ? { source: forecast.header } : {}) }, dir);
        // Card declines are outcomes of the scenario; any other refusal means the scenario asked for
        // something the API does not allow, which the user must hear about.
        const failed = world.outcomes
          .filter((outcome) => outcome.error !== null && outcome.error.type !== 'card_error')
          .map((outcome) => `${outcome.entry} (${outcome.op} at ${outcome.at.toISOString()}): ${outcome.error!.code}${outcome.error!.param ? ` (param ${outcome.error!.param})` : ''}: ${outcome.error!.message}`);
        return { ...written, failed };
      },
    );
  } finally {
    bar.stop();
  }
}

/** Adds the what-if section at the end of the baseline's report.json (written as a stream before the variant ran). */
function appendWhatIf(file: string, section: unknown): void {
  const text = readFileSync(file, 'utf8');
  if (!text.endsWith('\n}\n')) throw new Error(`${file} does not end like a report`);
  truncateSync(file, Buffer.byteLength(text) - 3);
  appendFileSync(file, `,\n  "what_if": ${JSON.stringify(section)}\n}\n`);
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
    .option('--strict', 'stop at the first timeline entry that fails')
    .option('--batch-size <n>', 'rows per job batch', batchArg)
    .option('--source <database-url|data-dir>', 'forecast: start from a read-only snapshot of this kessai database instead of an empty book')
    .option('--account <id>', 'with --source: copy this account only (repeatable; default every account)', collect)
    .option('--decline-rate <share>', 'assumed share (0..1) of otherwise approved card authorizations declined, drawn from the seed', rateArg)
    .addHelpText(
      'after',
      '\nRuns on an embedded in-memory database unless --database-url is given on the command line, in which case a scratch\n' +
        'database is created on that server and dropped afterwards (DATABASE_URL from the environment is not used here).\n' +
        'Exit status: 0 done; 1 bad arguments or scenario; 2 done, but some entries were refused for reasons other than a card decline.',
    )
    .action(async (options: SimulateOptions, command: Command) => {
      // Only an explicit --database-url moves the simulation to a server: the worker's DATABASE_URL
      // in the environment must not turn a what-if into traffic on a production server.
      const root = command.parent!;
      const databaseUrl = root.getOptionValueSource('databaseUrl') === 'cli' ? (root.opts() as { databaseUrl?: string }).databaseUrl : undefined;
      if (!options.source && options.scenario === undefined) throw new InvalidArgumentError('--scenario <file> is required (or --source to forecast a live book)');
      if (!options.source && (options.from as Date | 'now') === 'now') throw new InvalidArgumentError('--from now needs --source (the newest instant of the source)');
      const scenarioFile = options.scenario === undefined ? undefined : loadScenario(options.scenario);
      const overlay = options.whatIf ? loadScenario(options.whatIf) : undefined;
      // A forecast opens its source first: every refusal comes before anything is written.
      const forecast: Forecast | undefined = options.source
        ? await openForecast({ source: options.source, from: options.from as Date | 'now', ...(options.account ? { accounts: options.account } : {}), ...(scenarioFile ? { scenario: scenarioFile } : {}), ...(options.declineRate ? { declineRate: options.declineRate } : {}) })
        : undefined;
      try {
      if (forecast) Object.assign(options, { from: forecast.from });
      const baseline = forecast ? forecast.scenario : scenarioFile!;
      const variant = overlay ? overlayScenario(baseline, overlay) : undefined;
      const runForecast: ForecastRun = forecast ? { source: forecast.snapshot, header: { name: forecast.snapshot.name, snapshot_instant: forecast.snapshot.instant, assumptions: forecast.assumptions } } : {};
      // Both are planned before anything runs, so a bad overlay fails fast too.
      const plan = (scenario: Scenario) => planSteps(scenario, { from: options.from, to: options.to, seed: options.seed, operations: operationNames() });
      const baselineSteps = plan(baseline);
      const variantSteps = variant ? plan(variant) : undefined;
      const out = resolve(options.out);
      rmSync(out, { recursive: true, force: true });
      const showProgress = Boolean(process.stderr.isTTY) && !options.json;
      if (forecast && !options.json) console.log(`Forecast of ${forecast.snapshot.name} (accounts ${forecast.snapshot.accounts.join(', ')}), snapshot at ${forecast.snapshot.instant.toISOString()}; from ${forecast.from.toISOString()}\n`);
      const base = await runOne(baseline, baselineSteps, options, databaseUrl, out, 'baseline', showProgress, runForecast);
      // The source's read-only transaction stays open only while a run still has to copy it.
      if (!variant) await forecast?.snapshot.close();
      let result: { baseline: Summary; variant?: Summary; diff?: ReturnType<typeof diffSummaries> } = { baseline: base.summary };
      const failed = [...base.failed];
      if (variant) {
        const other = await runOne(variant, variantSteps!, options, databaseUrl, join(out, 'variant'), 'what-if ', showProgress, runForecast);
        await forecast?.snapshot.close();
        failed.push(...other.failed.map((line) => `what-if: ${line}`));
        const diff = diffSummaries(base.summary, other.summary);
        result = { baseline: base.summary, variant: other.summary, diff };
        appendWhatIf(join(out, 'report.json'), { overlay: options.whatIf!, variant_report: 'variant/report.json', diff });
        writeSummaryFiles(join(out, 'variant'), other.summary, other.days, `${baseline.name ?? 'scenario'} (what-if)`);
        writeSummaryFiles(out, result, base.days, baseline.name ?? 'scenario');
      } else {
        writeSummaryFiles(out, base.summary, base.days, baseline.name ?? 'scenario');
      }
      if (options.json) {
        console.log(JSON.stringify(variant ? result : base.summary, null, 2));
      } else {
        console.log(formatSummary(base.summary, 'Baseline'));
        if (result.variant && result.diff) {
          console.log(`\n${formatSummary(result.variant, 'What-if')}`);
          console.log(`\n${formatDiff(result.diff)}`);
        }
        console.log(`\nWrote ${out}: report.json, summary.json, charges.csv, statements.csv, chart.svg${variant ? ' (and variant/)' : ''}`);
      }
      if (failed.length > 0) {
        console.error(`kessai simulate: ${failed.length} entr${failed.length === 1 ? 'y was' : 'ies were'} refused (see steps in report.json):`);
        for (const line of failed.slice(0, 20)) console.error(`  ${line}`);
        if (failed.length > 20) console.error(`  … and ${failed.length - 20} more`);
        process.exitCode = 2;
      }
      } finally {
        await forecast?.snapshot.close();
      }
    });
}

export { ScenarioError };
