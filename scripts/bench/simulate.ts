/**
 * Benchmark of `kessai simulate` (`npm run bench:simulate -- [--n 10000] [--backend pglite|postgres|both]`).
 *
 * Simulates N subscriptions over 2027-01-01 → 2028-01-01 (JST; `--to` ends it earlier, say
 * `--to 2027-02-01` for the sign-up month alone): a scenario with four plans
 * (monthly, billed on the 1st, billed at month end, yearly) and a generator that signs N
 * customers up across January with a card mix (3 % declining renewals, 10 % overseas, 10 %
 * debit), run exactly as the CLI runs it (the same driver, jobs and report writer), on embedded
 * PGlite and/or a scratch database on the PostgreSQL server of DATABASE_URL (default the local
 * server). Prints wall time split into simulation and report, simulated days per second,
 * renewals per second and peak RSS. Not a timed test: targets are read by a person.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { ALL_JOBS } from '../../jobs/index';
import { parseInstant } from '../../src/domain/time';
import { simulate } from '../../src/simulation/simulate';
import { operationNames } from '../../src/api/operations';
import { writeReport } from '../../src/simulation/report';
import { parseScenario, planSteps } from '../../src/simulation/scenario';

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', default: '10000' },
    backend: { type: 'string', default: 'both' },
    seed: { type: 'string', default: '1' },
    'no-report': { type: 'boolean', default: false },
    to: { type: 'string', default: '2028-01-01' },
  },
});
const N = Number(args.n);
const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const FROM = parseInstant('2027-01-01');
const TO = parseInstant(args.to);
const SEED = Number(args.seed);

const quarter = Math.floor(N / 4);
const scenario = parseScenario(
  JSON.stringify({
    name: `bench: ${N} subscriptions over 2027`,
    plans: [
      { ref: 'monthly', params: { amount: 980, currency: 'jpy', interval: 'month' } },
      { ref: 'day1', params: { amount: 1500, currency: 'jpy', interval: 'month', billing_day: 1 } },
      { ref: 'day31', params: { amount: 3100, currency: 'jpy', interval: 'month', billing_day: 31 } },
      { ref: 'yearly', params: { amount: 9800, currency: 'jpy', interval: 'year' } },
    ],
    generators: (['monthly', 'day1', 'day31', 'yearly'] as const).map((plan, i) => ({
      generate: 'subscribers',
      ref: `${plan}_`,
      count: i === 0 ? N - 3 * quarter : quarter,
      plan: `$${plan}`,
      from: '2027-01-01',
      to: '2027-02-01',
      card_mix: { declined: 0.03, overseas: 0.1, debit: 0.1 },
    })),
  }),
  'bench scenario',
);

async function once(backend: 'pglite' | 'postgres'): Promise<void> {
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
        if (!args['no-report']) await writeReport(world, { scenario: scenario.name ?? null, from: FROM, to: TO, seed: SEED }, dir);
      },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const done = performance.now();
  const simSeconds = (simulated - started) / 1000;
  const days = (TO.getTime() - FROM.getTime()) / 86_400_000;
  console.log(
    [
      `${backend.padEnd(8)} ${N.toLocaleString('en-US')} subscriptions, ${days} days: ${((done - started) / 1000).toFixed(1)} s total`,
      `(simulation ${simSeconds.toFixed(1)} s, report ${((done - simulated) / 1000).toFixed(1)} s)`,
      `| ${(days / simSeconds).toFixed(1)} simulated days/s | ${renewals.toLocaleString('en-US')} renewals, ${Math.round(renewals / simSeconds).toLocaleString('en-US')} renewals/s`,
      `| ${steps.length.toLocaleString('en-US')} timeline steps, ${stops.toLocaleString('en-US')} stops, ${jobRuns} job runs`,
      `| peak RSS ${Math.round(process.resourceUsage().maxRSS / 1024)} MB`,
    ].join(' '),
  );
}

const backends = args.backend === 'both' ? (['pglite', 'postgres'] as const) : [args.backend as 'pglite' | 'postgres'];
for (const backend of backends) await once(backend);
