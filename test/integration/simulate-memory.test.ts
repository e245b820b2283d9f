/**
 * `kessai simulate` in a small heap: the report is written as a stream, so a book whose full
 * report (every event) is several times what a section page holds still fits in a JavaScript heap
 * of HEAP_MB. A report that held a section whole would not: with the events section read into
 * memory before it is written (as the report once did), this run aborts with "JavaScript heap out
 * of memory" at this limit.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { isPostgres } from '../support/database';

const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));

/**
 * The old-space limit of the simulating process. 600 subscribers over a year on a PostgreSQL
 * server (~16,000 events, a 26 MB report.json at --detail full) pass at 40 and 44 MB; the same run
 * with the events section held whole aborts at 44 and 48 MB.
 */
const HEAP_MB = 44;
const SUBSCRIBERS = 600;

describe.runIf(isPostgres())('simulate in a small heap', () => {
  it(`writes the full report of ${SUBSCRIBERS} subscribers over a year within --max-old-space-size=${HEAP_MB}`, () => {
    const backend = inject('kessaiBackend');
    if (backend.kind !== 'postgres') throw new Error('PostgreSQL only');
    const scratch = mkdtempSync(join(tmpdir(), 'kessai-simulate-memory-'));
    const scenario = join(scratch, 'scenario.json');
    writeFileSync(
      scenario,
      JSON.stringify({
        name: 'memory',
        plans: [{ ref: 'monthly', params: { amount: 980, currency: 'jpy', interval: 'month' } }],
        generators: [{ generate: 'subscribers', ref: 'gen', count: SUBSCRIBERS, plan: '$monthly', from: '2027-01-01', to: '2027-01-03', card_mix: { declined: 0.03 } }],
      }),
    );
    const out = join(scratch, 'out');
    const { DATABASE_URL: _ignored, ...env } = process.env;
    const run = spawnSync(
      process.execPath,
      [`--max-old-space-size=${HEAP_MB}`, BIN, '--database-url', backend.serverUrl, 'simulate', '--scenario', scenario, '--from', '2027-01-01', '--to', '2028-01-01', '--detail', 'full', '--out', out, '--json'],
      { env, encoding: 'utf8', timeout: 280_000, maxBuffer: 16 * 1024 * 1024 },
    );
    expect(run.stderr).not.toMatch(/heap out of memory/);
    expect(run.status, run.stderr).toBe(0);
    const summary = JSON.parse(run.stdout) as { months: { month: string; charges: number }[] };
    expect(summary.months).toHaveLength(12);
    expect(summary.months[0]!.charges).toBe(SUBSCRIBERS);
    // The book is bigger than the heap's share left to the report: its report is half the limit.
    expect(statSync(join(out, 'report.json')).size).toBeGreaterThan((HEAP_MB / 2) * 1024 * 1024);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { events: unknown[]; subscriptions: unknown[]; steps: { ref: string | null }[] };
    expect(report.subscriptions).toHaveLength(SUBSCRIBERS);
    // The plan's step and three a subscriber, more than a page of the section: every one, once.
    expect(report.steps).toHaveLength(1 + 3 * SUBSCRIBERS);
    expect(new Set(report.steps.map((step) => step.ref)).size).toBe(1 + 3 * SUBSCRIBERS);
    expect(report.events.length).toBeGreaterThan(15 * SUBSCRIBERS);
  }, 300_000);
});
