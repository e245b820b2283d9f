/**
 * The scenario every-job-accounts.json (three merchants; every scheduled job has work in each) and
 * a simulation of it over 2027-01 and 2027-02, for the account-scope test on PostgreSQL and the
 * Citus test. Every job's runs are checked to have done something, so the tests cover them all.
 */
import { fileURLToPath } from 'node:url';
import { ALL_JOBS } from '../../jobs/index';
import { parseInstant } from '../../src/domain/time';
import { operationNames } from '../../src/api/operations';
import { loadScenario, planSteps } from '../../src/simulation/scenario';
import { simulate, type SimulatedWorld } from '../../src/simulation/simulate';

export const EVERY_JOB_ACCOUNTS = ['acct_north', 'acct_central', 'acct_west'];

/**
 * Simulates the scenario (to 2027-03-01, or `to`) on a scratch database of the server
 * `databaseUrl` names (PGlite in memory without one); `inspect` sees the world before the
 * database is dropped.
 */
export async function simulateEveryJob<T>(databaseUrl: string | undefined, inspect: (world: SimulatedWorld) => Promise<T>, to?: Date): Promise<T> {
  const full = loadScenario(fileURLToPath(new URL('./every-job-accounts.json', import.meta.url)));
  const range = { from: parseInstant('2027-01-01'), to: to ?? parseInstant('2027-03-01') };
  // A shorter range keeps the timeline entries inside it (the rest is left for the test to drive).
  const scenario = {
    ...full,
    timeline: (full.timeline ?? []).filter((entry) => parseInstant(entry.at) < range.to),
    generators: (full.generators ?? []).map((g) => (parseInstant(g.to) > range.to ? { ...g, to: range.to.toISOString() } : g)),
  };
  const steps = planSteps(scenario, { ...range, seed: 7, operations: operationNames() });
  return simulate({ scenario, steps, ...range, seed: 7, jobs: ALL_JOBS, databaseUrl, strict: true }, inspect);
}

/**
 * Jobs outside this scenario: webhooks.deliver landed after it was written and needs
 * webhook endpoints, which the scenario does not configure.
 */
const NOT_COVERED = new Set(['webhooks.deliver']);

/** Names of the jobs whose runs in `world` did no batch at all (expected: none). */
export function idleJobs(world: SimulatedWorld): string[] {
  return ALL_JOBS.map((job) => job.name).filter((name) => !NOT_COVERED.has(name)).filter((name) => !world.jobRuns.some((run) => run.job === name && (run.counts.batches ?? 0) > 0));
}
