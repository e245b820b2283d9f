/**
 * `kessai simulate --out` never destroys what it did not write: files the user
 * added to a previous output are kept, a non-empty folder kessai did not write is refused, and an
 * interrupted run leaves the previous complete results as they were.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { OUTPUT_MARKER, openOutputFolder, OutputFolderError } from '../../src/simulation/output-folder';

const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'kessai-simulate-out-'));
const scenario = join(scratch, 'scenario.json');
writeFileSync(
  scenario,
  JSON.stringify({
    name: 'output folder',
    plans: [{ ref: 'monthly', params: { amount: 980, currency: 'jpy', interval: 'month' } }],
    generators: [{ generate: 'subscribers', ref: 'gen', count: 3, plan: '$monthly', from: '2027-01-02', to: '2027-01-05' }],
  }),
);

function env() {
  const { DATABASE_URL: _ignored, ...rest } = process.env;
  return rest;
}

const args = (out: string) => ['simulate', '--scenario', scenario, '--from', '2027-01-01', '--to', '2027-03-01', '--out', out];

function kessai(out: string) {
  return spawnSync(process.execPath, [BIN, ...args(out)], { env: env(), encoding: 'utf8', timeout: 120_000 });
}

/** Every entry beside `dir` whose name starts with `.<name>.`: staging folders left behind. */
function leftovers(parent: string, name: string): string[] {
  return readdirSync(parent).filter((entry) => entry.startsWith(`.${name}.`));
}

describe('simulate --out', () => {
  it('keeps a file the user added to a previous output, and replaces only what kessai wrote', () => {
    const parent = mkdtempSync(join(scratch, 'kept-'));
    const out = join(parent, 'sim-out');
    expect(kessai(out).status).toBe(0);
    const marker = JSON.parse(readFileSync(join(out, OUTPUT_MARKER), 'utf8')) as { entries: string[] };
    expect(marker.entries).toEqual(expect.arrayContaining(['report.json', 'summary.json', 'charges.csv', 'statements.csv']));
    writeFileSync(join(out, 'notes.txt'), 'my analysis\n');
    const second = kessai(out);
    expect(second.status, second.stderr).toBe(0);
    expect(readFileSync(join(out, 'notes.txt'), 'utf8')).toBe('my analysis\n');
    expect(existsSync(join(out, 'report.json'))).toBe(true);
    expect(leftovers(parent, 'sim-out')).toEqual([]);
  }, 120_000);

  it('refuses a non-empty folder that is not a previous kessai output, and writes nothing', () => {
    const parent = mkdtempSync(join(scratch, 'refused-'));
    const out = join(parent, 'checkout');
    mkdirSync(join(out, 'src'), { recursive: true });
    writeFileSync(join(out, 'package.json'), '{}\n');
    const refused = kessai(out);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/--out .*checkout: the folder is not empty and was not written by kessai simulate/);
    expect(readdirSync(out).sort()).toEqual(['package.json', 'src']);
    expect(readFileSync(join(out, 'package.json'), 'utf8')).toBe('{}\n');
    expect(leftovers(parent, 'checkout')).toEqual([]);
  }, 60_000);

  it('an interrupted run (Ctrl-C) keeps the previous complete results and leaves no partial folder', async () => {
    const parent = mkdtempSync(join(scratch, 'interrupted-'));
    const out = join(parent, 'sim-out');
    expect(kessai(out).status).toBe(0);
    const before = readFileSync(join(out, 'report.json'), 'utf8');
    const child = spawn(process.execPath, [BIN, ...args(out)], { env: env(), stdio: 'ignore' });
    const exited = new Promise<string>((done) => child.on('exit', (code, signal) => done(`${code} ${signal}`)));
    // Interrupted once the run has started writing beside the target.
    for (let waited = 0; leftovers(parent, 'sim-out').length === 0; waited += 20) {
      expect(waited).toBeLessThan(60_000);
      await new Promise((done) => setTimeout(done, 20));
    }
    child.kill('SIGINT');
    expect(await exited).toBe('130 null');
    expect(readFileSync(join(out, 'report.json'), 'utf8')).toBe(before);
    expect(leftovers(parent, 'sim-out')).toEqual([]);
  }, 120_000);

  it('a run that fails half-way through writing leaves the target untouched', () => {
    const parent = mkdtempSync(join(scratch, 'failed-'));
    const out = join(parent, 'sim-out');
    const first = openOutputFolder(out);
    writeFileSync(join(first.dir, 'report.json'), 'complete\n');
    first.commit();
    const second = openOutputFolder(out);
    writeFileSync(join(second.dir, 'report.json'), 'half');
    second.abandon();
    expect(readFileSync(join(out, 'report.json'), 'utf8')).toBe('complete\n');
    expect(leftovers(parent, 'sim-out')).toEqual([]);
  });

  it('refuses to replace a file in a previous output that kessai did not write there', () => {
    const out = join(mkdtempSync(join(scratch, 'clash-')), 'sim-out');
    const first = openOutputFolder(out);
    writeFileSync(join(first.dir, 'report.json'), 'complete\n');
    first.commit();
    writeFileSync(join(out, 'chart.svg'), 'mine\n');
    const second = openOutputFolder(out);
    writeFileSync(join(second.dir, 'report.json'), 'new\n');
    writeFileSync(join(second.dir, 'chart.svg'), 'new\n');
    expect(() => second.commit()).toThrow(OutputFolderError);
    second.abandon();
    expect(readFileSync(join(out, 'chart.svg'), 'utf8')).toBe('mine\n');
    expect(readFileSync(join(out, 'report.json'), 'utf8')).toBe('complete\n');
  });
});
