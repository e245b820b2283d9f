/**
 * `npm run replay:update [-- name …]`: re-runs the golden replays of test/replay and rewrites their
 * expected reports. The only way those files change; review the diff before committing it.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { expectedPath, replayReport, REPLAYS } from '../test/replay/replays';

const only = process.argv.slice(2);
for (const replay of REPLAYS.filter((r) => only.length === 0 || only.includes(r.name))) {
  const report = await replayReport(replay);
  mkdirSync(dirname(expectedPath(replay)), { recursive: true });
  writeFileSync(expectedPath(replay), report);
  console.log(`${replay.name}: ${report.length.toLocaleString('en-US')} bytes → ${expectedPath(replay)}`);
}
