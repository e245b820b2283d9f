/**
 * Benchmark of `kessai simulate` (`npm run bench:simulate -- [--n 10000] [--backend pglite|postgres|both]
 * [--detail summary|charges|full] [--baseline 10000]`).
 *
 * Simulates N subscriptions over 2027-01-01 → 2028-01-01 (JST; `--to` ends it earlier, say
 * `--to 2027-02-01` for the sign-up month alone): a scenario with four plans
 * (monthly, billed on the 1st, billed at month end, yearly) and a generator that signs N
 * customers up across January with a card mix (3 % declining renewals, 10 % overseas, 10 %
 * debit), run exactly as the CLI runs it (the same driver, jobs and report writer at the CLI's
 * default detail, `charges`, unless `--detail` says otherwise; summary.json, report.html and the
 * charts), on embedded PGlite and/or a scratch database on the PostgreSQL server of DATABASE_URL
 * (default the local server). Prints wall time split into simulation and report, simulated days
 * per second, renewals per second and peak RSS. Each run is a child process of its own, so its
 * peak RSS is its own. `--baseline 10000` first runs that many subscriptions on the same backend
 * in the same run and prints the growth (book ratio beside time ratio). `--floor` then times, on the
 * PostgreSQL server, bench:renewals' plain-SQL ceiling alone for as many renewals as the largest
 * run made (all due in one slot, one account, the engine's batch size): what writing the year's
 * renewals costs this server with no engine at all, a floor under any simulation of that year
 * here (on PGlite when the largest run was embedded); `--floor-renewals R` times only that
 * floor, for R renewals (a count an earlier run printed), on the one `--backend` named
 * (PostgreSQL by default).
 * Not a timed test: targets are read by a person.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { ALL_JOBS } from '../../jobs/index';
import { DEFAULT_CONFIG } from '../../src/engine/context';
import { parseInstant } from '../../src/domain/time';
import { keepHeapNearLiveData } from '../../src/simulation/heap';
import { simulate } from '../../src/simulation/simulate';
import { operationNames } from '../../src/api/operations';
import { writeReport, writeSummaryFiles } from '../../src/simulation/report';
import { REPORT_DETAILS, type ReportDetail } from '../../src/simulation/report-detail';
import { parseScenario, planSteps } from '../../src/simulation/scenario';
import { timeCeilingAlone } from './bench-support';
import { renewalCeiling, seedDueSubscriptions } from './renewal-ceiling';

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', default: '10000' },
    backend: { type: 'string', default: 'both' },
    seed: { type: 'string', default: '1' },
    'no-report': { type: 'boolean', default: false },
    to: { type: 'string', default: '2028-01-01' },
    detail: { type: 'string', default: 'charges' },
    baseline: { type: 'string' },
    floor: { type: 'boolean', default: false },
    /** Only the floor, for this many renewals (a count an earlier run printed): no simulation. */
    'floor-renewals': { type: 'string' },
    /** One run in this process, its figures printed as one JSON line (what the parent reads). */
    child: { type: 'boolean', default: false },
  },
});
const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const FROM = parseInstant('2027-01-01');
const TO = parseInstant(args.to);
const SEED = Number(args.seed);
if (!(REPORT_DETAILS as readonly string[]).includes(args.detail)) throw new Error(`--detail: expected one of ${REPORT_DETAILS.join(', ')}`);
const DETAIL = args.detail as ReportDetail;
const BACKENDS = args.backend === 'both' ? (['pglite', 'postgres'] as const) : [args.backend as 'pglite' | 'postgres'];
if (!BACKENDS.every((backend) => backend === 'pglite' || backend === 'postgres')) throw new Error('--backend: expected pglite, postgres or both');

type Backend = 'pglite' | 'postgres';

interface Figures {
  readonly backend: Backend;
  readonly n: number;
  readonly days: number;
  readonly totalS: number;
  readonly simulationS: number;
  readonly reportS: number;
  readonly renewals: number;
  readonly steps: number;
  readonly stops: number;
  readonly jobRuns: number;
  readonly rssMb: number;
}

function scenarioOf(n: number) {
  const quarter = Math.floor(n / 4);
  return parseScenario(
    JSON.stringify({
      name: `bench: ${n} subscriptions over 2027`,
      plans: [
        { ref: 'monthly', params: { amount: 980, currency: 'jpy', interval: 'month' } },
        { ref: 'day1', params: { amount: 1500, currency: 'jpy', interval: 'month', billing_day: 1 } },
        { ref: 'day31', params: { amount: 3100, currency: 'jpy', interval: 'month', billing_day: 31 } },
        { ref: 'yearly', params: { amount: 9800, currency: 'jpy', interval: 'year' } },
      ],
      generators: (['monthly', 'day1', 'day31', 'yearly'] as const).map((plan, i) => ({
        generate: 'subscribers',
        ref: `${plan}_`,
        count: i === 0 ? n - 3 * quarter : quarter,
        plan: `$${plan}`,
        from: '2027-01-01',
        to: '2027-02-01',
        card_mix: { declined: 0.03, overseas: 0.1, debit: 0.1 },
      })),
    }),
    'bench scenario',
  );
}

/** One simulation with its report, as `kessai simulate` runs it. */
async function once(backend: Backend, n: number): Promise<Figures> {
  const scenario = scenarioOf(n);
  const steps = planSteps(scenario, { from: FROM, to: TO, seed: SEED, operations: operationNames() });
  const dir = mkdtempSync(join(tmpdir(), 'kessai-bench-sim-'));
  const started = performance.now();
  let simulated = 0;
  let renewals = 0;
  let stops = 0;
  let jobRuns = 0;
  try {
    await simulate(
      { scenario, steps, from: FROM, to: TO, seed: SEED, jobs: ALL_JOBS, databaseUrl: backend === 'postgres' ? SERVER : undefined },
      async (world) => {
        simulated = performance.now();
        renewals = world.jobRuns.filter((run) => run.job === 'subscriptions.renew').reduce((sum, run) => sum + (run.counts.renewed ?? 0), 0);
        stops = world.stats.stops;
        jobRuns = world.stats.jobRuns;
        if (args['no-report']) return;
        const header = { scenario: scenario.name ?? null, from: FROM, to: TO, seed: SEED };
        const written = await writeReport(world, header, dir, DETAIL);
        await writeSummaryFiles(dir, { json: written.summary, summary: written.summary, days: written.days, title: scenario.name ?? 'scenario', range: { from: FROM, to: TO } });
      },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const done = performance.now();
  return {
    backend,
    n,
    days: (TO.getTime() - FROM.getTime()) / 86_400_000,
    totalS: (done - started) / 1000,
    simulationS: (simulated - started) / 1000,
    reportS: (done - simulated) / 1000,
    renewals,
    steps: steps.length,
    stops,
    jobRuns,
    rssMb: Math.round(process.resourceUsage().maxRSS / 1024),
  };
}

/** The same benchmark as a child process (its own peak RSS), its figures read back. */
function inChild(backend: Backend, n: number): Figures {
  const script = fileURLToPath(import.meta.url);
  const forwarded = ['--n', String(n), '--backend', backend, '--seed', String(SEED), '--to', args.to, '--detail', DETAIL, ...(args['no-report'] ? ['--no-report'] : []), '--child'];
  const child = spawnSync(process.execPath, [...process.execArgv, script, ...forwarded], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 20 });
  if (child.status !== 0) throw new Error(`bench:simulate ${forwarded.join(' ')} failed (${child.status ?? child.signal})`);
  return JSON.parse(child.stdout.trim().split('\n').at(-1)!) as Figures;
}

function line(f: Figures): string {
  const simulatedDaysPerS = f.days / f.simulationS;
  return [
    `${f.backend.padEnd(8)} ${f.n.toLocaleString('en-US')} subscriptions, ${f.days} days, detail ${DETAIL}${args['no-report'] ? ' (no report)' : ''}: ${f.totalS.toFixed(1)} s total`,
    `(simulation ${f.simulationS.toFixed(1)} s, report ${f.reportS.toFixed(1)} s)`,
    `| ${simulatedDaysPerS.toFixed(1)} simulated days/s | ${f.renewals.toLocaleString('en-US')} renewals, ${Math.round(f.renewals / f.simulationS).toLocaleString('en-US')} renewals/s`,
    `| ${f.steps.toLocaleString('en-US')} timeline steps, ${f.stops.toLocaleString('en-US')} stops, ${f.jobRuns} job runs`,
    `| peak RSS ${f.rssMb} MB`,
  ].join(' ');
}

if (args['floor-renewals'] !== undefined) {
  const renewals = Number(args['floor-renewals']);
  if (!Number.isSafeInteger(renewals) || renewals < 1) throw new Error('--floor-renewals: expected a positive whole number of renewals');
  await printFloor(renewals, BACKENDS.length === 1 ? BACKENDS[0]! : 'postgres');
} else if (args.child) {
  // As `kessai simulate` runs.
  keepHeapNearLiveData();
  console.log(JSON.stringify(await once(BACKENDS[0]!, Number(args.n))));
} else {
  const n = Number(args.n);
  const baseline = args.baseline === undefined ? undefined : Number(args.baseline);
  let largest: Figures | undefined;
  for (const backend of BACKENDS) {
    const small = baseline === undefined ? undefined : inChild(backend, baseline);
    if (small) console.log(line(small));
    const big = inChild(backend, n);
    console.log(line(big));
    largest = big;
    if (small) {
      console.log(
        `${backend.padEnd(8)} growth ${n.toLocaleString('en-US')} / ${small.n.toLocaleString('en-US')}: book ${(n / small.n).toFixed(1)}×, ` +
          `time ${(big.totalS / small.totalS).toFixed(2)}× (simulation ${(big.simulationS / small.simulationS).toFixed(2)}×, report ${(big.reportS / small.reportS).toFixed(2)}×), ` +
          `stops ${small.stops} → ${big.stops}, peak RSS ${small.rssMb} → ${big.rssMb} MB`,
      );
    }
  }
  if (args.floor && largest) await printFloor(largest.renewals, largest.backend, largest);
}

/** Times the floor for `renewals` renewals (see the header) on `backend` and prints it, beside the simulation it is under when there is one. */
async function printFloor(renewals: number, backend: Backend, under?: Figures): Promise<void> {
  const floor = await timeCeilingAlone('simfloor', (db) => seedDueSubscriptions(db, renewals, 1), (store) => renewalCeiling(store, DEFAULT_CONFIG.batchSize), backend);
  if (floor.written !== renewals) throw new Error(`the floor renewed ${floor.written} of ${renewals}`);
  console.log(
    `floor    ${renewals.toLocaleString('en-US')} renewals by the plain-SQL renewal ceiling alone (one slot, one account, batches of ${DEFAULT_CONFIG.batchSize}) on ${backend === 'pglite' ? 'embedded PGlite' : new URL(SERVER).host}: ` +
      `${(floor.ms / 1000).toFixed(1)} s (${Math.round(renewals / (floor.ms / 1000)).toLocaleString('en-US')}/s)` +
      (under === undefined ? '' : `; the ${under.backend} simulation took ${under.simulationS.toFixed(1)} s, ${(under.simulationS / (floor.ms / 1000)).toFixed(2)}× the floor`),
  );
}
