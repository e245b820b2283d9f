/**
 * `kessai simulate --detail`: what report.json lists at each level. One simulated world written
 * at every level: the summary (months, totals, chart series) is the same whatever the level;
 * `full` is the report the golden replays pin, byte for byte (events section included).
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ALL_JOBS } from '../../jobs/index';
import { parseInstant } from '../../src/domain/time';
import { operationNames } from '../../src/api/operations';
import { writeReport, type WrittenReport } from '../../src/simulation/report';
import { REPORT_DETAILS, type ReportDetail } from '../../src/simulation/report-detail';
import { loadScenario, planSteps } from '../../src/simulation/scenario';
import { simulate } from '../../src/simulation/simulate';
import { expectedPath, REPLAYS, scenarioPath } from '../replay/replays';

const databaseUrl = process.env.DATABASE_URL;
const scratch = mkdtempSync(join(tmpdir(), 'kessai-detail-'));

const HEADER = ['report', 'version', 'scenario', 'from', 'to', 'seed', 'accounts', 'steps', 'job_runs'];
const SETTLEMENT = ['service_fees', 'adjustments', 'terms', 'statements', 'balances'];
const SHAPES: Record<ReportDetail, string[]> = {
  summary: [...HEADER, ...SETTLEMENT],
  charges: [...HEADER, 'subscriptions', 'subscription_changes', 'charges', 'refunds', ...SETTLEMENT],
  full: [...HEADER, 'subscriptions', 'subscription_changes', 'charges', 'refunds', ...SETTLEMENT, 'events'],
};

describe('report detail levels', () => {
  it('summary, charges and full list what they say, the same summary each; full is the golden report', async () => {
    // A golden replay with subscriptions, charges, refunds and events.
    const replay = REPLAYS.find((r) => r.name === 'pause-resume')!;
    const scenario = loadScenario(scenarioPath(replay));
    const [from, to] = [parseInstant(replay.from), parseInstant(replay.to)];
    const steps = planSteps(scenario, { from, to, seed: replay.seed, operations: operationNames() });
    const written = new Map<ReportDetail, { dir: string; report: WrittenReport }>();
    await simulate({ scenario, steps, from, to, seed: replay.seed, jobs: ALL_JOBS, databaseUrl }, async (world) => {
      for (const detail of REPORT_DETAILS) {
        const dir = join(scratch, detail);
        written.set(detail, { dir, report: await writeReport(world, { scenario: scenario.name ?? null, from, to, seed: replay.seed }, dir, detail) });
      }
    });
    const reports = new Map([...written].map(([detail, { dir }]) => [detail, JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as Record<string, unknown[]>]));
    for (const detail of REPORT_DETAILS) {
      expect(Object.keys(reports.get(detail)!), detail).toEqual(SHAPES[detail]);
      expect(existsSync(join(written.get(detail)!.dir, 'charges.csv')), detail).toBe(detail !== 'summary');
      expect(existsSync(join(written.get(detail)!.dir, 'statements.csv')), detail).toBe(true);
      expect(written.get(detail)!.report, detail).toEqual(written.get('full')!.report);
    }
    // The sections a level lists are the full report's, and there is something in them.
    const full = reports.get('full')!;
    expect(full.charges!.length).toBeGreaterThan(0);
    expect(full.events!.length).toBeGreaterThan(full.charges!.length);
    expect(full.statements!.length).toBeGreaterThan(0);
    for (const detail of ['summary', 'charges'] as const) {
      for (const key of SHAPES[detail]) expect(reports.get(detail)![key], `${detail}.${key}`).toEqual(full[key]);
    }
    expect(readFileSync(join(written.get('charges')!.dir, 'charges.csv'), 'utf8')).toBe(readFileSync(join(written.get('full')!.dir, 'charges.csv'), 'utf8'));
    // full is today's report, events section included, byte for byte.
    expect(readFileSync(join(written.get('full')!.dir, 'report.json'), 'utf8')).toBe(readFileSync(expectedPath(replay), 'utf8'));
  }, 300_000);
});
