/**
 * What `kessai simulate` runs: replays a scenario over [from, to) on a virtual clock, optionally
 * beside a what-if variant, and writes the report, summary, CSV exports and charts. A composition
 * root: it reads files, the terminal and the real clock (for the progress rate only).
 */
import { appendFileSync, readFileSync, truncateSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import cliProgress from 'cli-progress';
import { ALL_JOBS } from '../../jobs/index';
import { formatJst, jstDate, MS_PER_DAY } from '../domain/time';
import { simulate, type SimulationOptions, type SimulationStats } from '../simulation/simulate';
import { declineRateOf, openForecast, type Forecast } from '../simulation/forecast';
import { keepHeapNearLiveData } from '../simulation/heap';
import { operationNames } from '../api/operations';
import { diffSummaries, formatDiff, formatSummary, writeReport, writeSummaryFiles, type ReportHeader, type Summary, type WrittenReport } from '../simulation/report';
import type { ReportDetail } from '../simulation/report-detail';
import { openOutputFolder, type OutputFolder } from '../simulation/output-folder';
import { loadScenario, overlayScenario, planSteps, type Scenario, type Step } from '../simulation/scenario';

/** What a forecast run adds: the copied snapshot and the report's source header. */
type ForecastRun = Pick<SimulationOptions, 'source'> & { readonly header?: ReportHeader['source'] };

/** The options of `kessai simulate`, as simulate.ts parses them. */
export interface SimulateOptions {
  /** Optional with --source (a forecast needs no scenario). */
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
  readonly detail: ReportDetail;
  /** Show the progress line even when stderr is not a terminal (a line every two seconds). */
  readonly progress?: boolean;
}

/** The options once --from is settled (`now` becomes the source's newest instant). */
type SettledOptions = Omit<SimulateOptions, 'from'> & { readonly from: Date };

/**
 * A progress bar on stderr while the clock moves: simulated date, percent, simulated days and
 * renewed subscriptions per second, and the time left at the pace so far (simulated time done
 * against wall time spent).
 */
function progress(from: Date, to: Date, label: string, enabled: boolean) {
  if (!enabled) return { update: () => {}, stop: () => {} };
  // Not a terminal (asked for with --progress): a new line every two seconds instead of redrawing one.
  const lines = !process.stderr.isTTY;
  const started = performance.now();
  const total = to.getTime() - from.getTime();
  const bar = new cliProgress.SingleBar(
    { format: `${label} {date} |{bar}| {percentage}% | {rate} days/s | {subscriptions} subscriptions renewed/s | ETA {left} | {stops} stops`, hideCursor: true, clearOnComplete: true, stream: process.stderr, noTTYOutput: lines, notTTYSchedule: 2_000 },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0, { date: jstDate(from), rate: '0', subscriptions: '0', left: '-', stops: 0 });
  return {
    update(at: Date, stats: SimulationStats) {
      const done = at.getTime() - from.getTime();
      const seconds = (performance.now() - started) / 1000;
      bar.update(done, {
        date: jstDate(at),
        rate: seconds > 0 ? (done / MS_PER_DAY / seconds).toFixed(1) : '0',
        subscriptions: seconds > 0 ? Math.round(stats.renewed / seconds).toLocaleString('en-US') : '0',
        left: done > 0 ? duration((seconds * (total - done)) / done) : '-',
        stops: stats.stops,
      });
    },
    stop: () => bar.stop(),
  };
}

/** Seconds as "42 s", "3 min 05 s" or "1 h 02 min". */
function duration(seconds: number): string {
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

async function runOne(scenario: Scenario, steps: readonly Step[], options: SettledOptions, databaseUrl: string | undefined, dir: string, label: string, showProgress: boolean, forecast: ForecastRun, overlay?: Scenario): Promise<WrittenReport & { failed: string[] }> {
  const bar = progress(options.from, options.to, label, showProgress);
  const decline = declineRateOf(options.declineRate, scenario, overlay);
  const source = forecast.header ? { ...forecast.header, assumptions: { ...forecast.header.assumptions, decline_rate: decline.rate, decline_rate_from: decline.from } } : undefined;
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
        declineRate: decline.rate,
        onProgress: (at, stats) => bar.update(at, stats),
      },
      async (world) => {
        bar.stop();
        const written = await writeReport(world, { scenario: scenario.name ?? null, from: options.from, to: options.to, seed: options.seed, ...(source ? { source } : {}) }, dir, options.detail);
        // Card declines are outcomes of the scenario; any other refusal means the scenario asked for
        // something the API does not allow, which the user must hear about.
        const failed = world.outcomes
          .filter((outcome) => outcome.error !== null && outcome.error.type !== 'card_error')
          .map((outcome) => `${outcome.entry} (${outcome.op} at ${formatJst(outcome.at)}): ${outcome.error!.code}${outcome.error!.param ? ` (param ${outcome.error!.param})` : ''}: ${outcome.error!.message}`);
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

interface Planned {
  readonly baseline: Scenario;
  readonly baselineSteps: readonly Step[];
  readonly variant: Scenario | undefined;
  readonly variantSteps: readonly Step[] | undefined;
  /** The overlay's own name (its `name`, else its file name). */
  readonly overlayName: string | undefined;
  /** The what-if file as read. */
  readonly overlay: Scenario | undefined;
}

/** Runs the baseline (and the what-if) and writes every file into the output's staging folder. */
async function runAll(output: OutputFolder, planned: Planned, options: SettledOptions, databaseUrl: string | undefined, failed: string[], forecast: Forecast | undefined) {
  const { baseline, baselineSteps, variant, variantSteps, overlayName } = planned;
  const out = output.dir;
  const showProgress = (Boolean(process.stderr.isTTY) || options.progress === true) && !options.json;
  const run: ForecastRun = forecast ? { source: forecast.snapshot, header: { name: forecast.snapshot.name, snapshot_instant: forecast.snapshot.instant, assumptions: forecast.assumptions } } : {};
  const base = await runOne(baseline, baselineSteps, options, databaseUrl, out, 'baseline', showProgress, run);
  // The source's read-only transaction stays open only while a run still has to copy it.
  if (!variant) await forecast?.snapshot.close();
  failed.push(...base.failed);
  const range = { from: options.from, to: options.to };
  const title = baseline.name ?? 'scenario';
  if (!variant) {
    await writeSummaryFiles(out, { json: base.summary, summary: base.summary, days: base.days, title, range });
    return { baseline: base.summary };
  }
  const other = await runOne(variant, variantSteps!, options, databaseUrl, join(out, 'variant'), 'what-if ', showProgress, run, planned.overlay);
  await forecast?.snapshot.close();
  failed.push(...other.failed.map((line) => `what-if: ${line}`));
  const diff = diffSummaries(base.summary, other.summary);
  const result = { what_if: overlayName!, baseline: base.summary, variant: other.summary, diff };
  appendWhatIf(join(out, 'report.json'), { overlay: options.whatIf!, variant_report: 'variant/report.json', diff });
  await writeSummaryFiles(join(out, 'variant'), { json: other.summary, summary: other.summary, days: other.days, title: `${title} (what-if "${overlayName!}")`, range });
  await writeSummaryFiles(out, { json: result, summary: base.summary, days: base.days, title, range, whatIf: { overlay: overlayName!, variant: other.summary, diff } });
  return result;
}

/** Runs `kessai simulate` with its parsed options; `databaseUrl` only when given on the command line. */
export async function runSimulate(parsed: SimulateOptions, databaseUrl: string | undefined): Promise<void> {
  keepHeapNearLiveData();
  const scenarioFile = parsed.scenario === undefined ? undefined : loadScenario(parsed.scenario);
  const overlay = parsed.whatIf ? loadScenario(parsed.whatIf) : undefined;
  // A forecast opens its source first: every refusal comes before anything is written.
  const forecast: Forecast | undefined = parsed.source
    ? await openForecast({ source: parsed.source, from: parsed.from as Date | 'now', ...(parsed.account ? { accounts: parsed.account } : {}), ...(scenarioFile ? { scenario: scenarioFile } : {}) })
    : undefined;
  try {
    await runSettled({ ...parsed, from: forecast ? forecast.from : (parsed.from as Date) }, forecast ? forecast.scenario : scenarioFile!, overlay, databaseUrl, forecast);
  } finally {
    await forecast?.snapshot.close();
  }
}

async function runSettled(options: SettledOptions, baseline: Scenario, overlay: Scenario | undefined, databaseUrl: string | undefined, forecast: Forecast | undefined): Promise<void> {
  const variant = overlay ? overlayScenario(baseline, overlay) : undefined;
  const overlayName = overlay ? (overlay.name ?? basename(options.whatIf!)) : undefined;
  // Both are planned before anything runs, so a bad overlay fails fast too.
  const plan = (scenario: Scenario) => planSteps(scenario, { from: options.from, to: options.to, seed: options.seed, operations: operationNames() });
  const baselineSteps = plan(baseline);
  const variantSteps = variant ? plan(variant) : undefined;
  const out = resolve(options.out);
  // Checked before anything runs; the results are written beside it and moved in when complete.
  // Ctrl-C removes the staging folder: listened for before it exists.
  let staging: OutputFolder | undefined;
  const interrupted = () => {
    staging?.abandon();
    process.exit(130);
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  let result: { what_if?: string; baseline: Summary; variant?: Summary; diff?: ReturnType<typeof diffSummaries> };
  const failed: string[] = [];
  try {
    staging = openOutputFolder(out);
    if (forecast && !options.json) console.log(`Forecast of ${forecast.snapshot.name} (accounts ${forecast.snapshot.accounts.join(', ')}), snapshot at ${formatJst(forecast.snapshot.instant)}; from ${formatJst(forecast.from)}\n`);
    result = await runAll(staging, { baseline, baselineSteps, variant, variantSteps, overlayName, overlay }, options, databaseUrl, failed, forecast);
    staging.commit();
  } catch (error) {
    staging?.abandon();
    throw error;
  } finally {
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
  }
  if (options.json) {
    console.log(JSON.stringify(variant ? result : result.baseline, null, 2));
  } else {
    console.log(formatSummary(result.baseline, 'Baseline'));
    if (result.variant && result.diff) {
      console.log(`\n${formatSummary(result.variant, `What-if "${overlayName!}"`)}`);
      console.log(`\n${formatDiff(result.diff, overlayName!)}`);
    }
    console.log(`\nWrote ${out}: report.html (open it in a browser), report.json, summary.json, charges.csv, statements.csv, charts/*.svg${variant ? ' (and variant/)' : ''}`);
  }
  if (failed.length > 0) {
    console.error(`kessai simulate: ${failed.length} entr${failed.length === 1 ? 'y was' : 'ies were'} refused (see steps in report.json):`);
    for (const line of failed.slice(0, 20)) console.error(`  ${line}`);
    if (failed.length > 20) console.error(`  … and ${failed.length - 20} more`);
    process.exitCode = 2;
  }
}
