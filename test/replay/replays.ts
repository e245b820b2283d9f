/**
 * The golden replays: committed scenarios and the report each must produce, byte for byte. CI
 * replays them (replay.test.ts); `npm run replay:update` rewrites the expected reports, and only
 * that command does — a change in them is a change in billing, reviewed in the diff.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ALL_JOBS } from '../../jobs/index';
import { parseInstant } from '../../src/domain/time';
import { simulate } from '../../src/simulation/simulate';
import { operationNames } from '../../src/api/operations';
import { writeReport } from '../../src/simulation/report';
import { loadScenario, planSteps } from '../../src/simulation/scenario';

export const REPLAY_DIR = fileURLToPath(new URL('.', import.meta.url));

export interface Replay {
  readonly name: string;
  readonly from: string;
  readonly to: string;
  readonly seed: number;
}

export const REPLAYS: readonly Replay[] = [
  { name: 'month-end-renewals', from: '2027-01-01', to: '2028-04-01', seed: 11 },
  { name: 'trials', from: '2027-01-01', to: '2027-05-01', seed: 12 },
  { name: 'proration', from: '2027-01-01', to: '2027-06-01', seed: 13 },
  { name: 'pause-resume', from: '2027-01-01', to: '2027-05-01', seed: 14 },
  { name: 'holds', from: '2027-03-01', to: '2027-04-15', seed: 15 },
  { name: 'term-close', from: '2027-04-01', to: '2027-08-01', seed: 16 },
];

export const scenarioPath = (replay: Replay) => join(REPLAY_DIR, 'cases', `${replay.name}.json`);
export const expectedPath = (replay: Replay) => join(REPLAY_DIR, 'expected', `${replay.name}.report.json`);

/** Runs one replay exactly as `kessai simulate` would and returns its report.json text. */
export async function replayReport(replay: Replay, databaseUrl?: string): Promise<string> {
  const scenario = loadScenario(scenarioPath(replay));
  const from = parseInstant(replay.from);
  const to = parseInstant(replay.to);
  const steps = planSteps(scenario, { from, to, seed: replay.seed, operations: operationNames() });
  const dir = mkdtempSync(join(tmpdir(), `kessai-replay-${replay.name}-`));
  try {
    await simulate({ scenario, steps, from, to, seed: replay.seed, jobs: ALL_JOBS, databaseUrl }, (world) =>
      writeReport(world, { scenario: scenario.name ?? null, from, to, seed: replay.seed }, dir),
    );
    return readFileSync(join(dir, 'report.json'), 'utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
