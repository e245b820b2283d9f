/**
 * Golden replays: each committed scenario must still produce its committed report, byte
 * for byte. A difference is a change in what billing does; if it is intended, regenerate with
 * `npm run replay:update` and review the diff.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { expectedPath, replayReport, REPLAYS } from './replays';

const databaseUrl = process.env.DATABASE_URL;

/** The first differing line, for a readable failure instead of two megabytes of JSON. */
function firstDifference(actual: string, expected: string): string | null {
  if (actual === expected) return null;
  const a = actual.split('\n');
  const e = expected.split('\n');
  for (let i = 0; i < Math.max(a.length, e.length); i += 1) {
    if (a[i] !== e[i]) return `line ${i + 1}:\n  expected ${e[i]?.slice(0, 400) ?? '(end of file)'}\n  actual   ${a[i]?.slice(0, 400) ?? '(end of file)'}`;
  }
  return 'same lines, different bytes';
}

describe('golden replays (test/replay)', () => {
  for (const replay of REPLAYS) {
    it(`${replay.name}: ${replay.from} → ${replay.to}, seed ${replay.seed} gives the committed report`, async () => {
      const expected = readFileSync(expectedPath(replay), 'utf8');
      const actual = await replayReport(replay, databaseUrl);
      expect(firstDifference(actual, expected)).toBeNull();
      // A golden file that records a refused entry would pin a broken scenario: every entry of
      // these scenarios must succeed.
      const steps = (JSON.parse(actual) as { steps: { entry: string; error: unknown }[] }).steps;
      expect(steps.filter((step) => step.error !== null)).toEqual([]);
    }, 120_000);
  }
});
