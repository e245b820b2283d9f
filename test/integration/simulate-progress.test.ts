/**
 * The progress line of `kessai simulate`: with --progress on a stream that is not a terminal, a
 * line every two seconds and one at the end, each with the simulated date, the renewals per second
 * and the time left; with --json nothing but the summary, even with --progress.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'kessai-simulate-progress-'));
const scenario = join(scratch, 'scenario.json');
writeFileSync(
  scenario,
  JSON.stringify({
    name: 'progress',
    plans: [{ ref: 'monthly', params: { amount: 980, currency: 'jpy', interval: 'month' } }],
    generators: [{ generate: 'subscribers', ref: 'gen', count: 50, plan: '$monthly', from: '2027-01-01', to: '2027-01-03' }],
  }),
);

function kessai(...extra: string[]) {
  const { DATABASE_URL: _ignored, ...env } = process.env;
  const args = ['simulate', '--scenario', scenario, '--from', '2027-01-01', '--to', '2027-04-01', '--out', mkdtempSync(join(scratch, 'out-')), ...extra];
  return spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 120_000 });
}

describe('simulate progress', () => {
  it('--progress prints the simulated date, renewals per second and the time left on a stream that is not a terminal', () => {
    const run = kessai('--progress');
    expect(run.status, run.stderr).toBe(0);
    const lines = run.stderr.split('\n').filter((line) => line.startsWith('baseline '));
    expect(lines.length).toBeGreaterThanOrEqual(2);
    expect(lines[0]).toMatch(/^baseline 2027-01-01 \|.*\| 0% \| .* subscriptions renewed\/s \| ETA - \|/);
    // The last line: the last simulated day, a rate and a time left in seconds.
    expect(lines.at(-1)).toMatch(/^baseline 2027-03-3\d \|.*\| \d+% \| [\d.]+ days\/s \| [\d,]+ subscriptions renewed\/s \| ETA \d+ s \| \d+ stops/);
    expect(run.stdout).toMatch(/^Baseline: progress/);
  }, 120_000);

  it('--json prints the summary and nothing else, with or without --progress', () => {
    for (const run of [kessai('--json'), kessai('--json', '--progress')]) {
      expect(run.status, run.stderr).toBe(0);
      expect(run.stderr).toBe('');
      expect((JSON.parse(run.stdout) as { scenario: string }).scenario).toBe('progress');
    }
  }, 120_000);
});
