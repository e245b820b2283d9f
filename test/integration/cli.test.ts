import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, isPostgres, type TestDatabase } from '../support/database';

const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), 'kessai-cli-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** Runs the real command as a user would, with the environment it gets on a fresh machine. */
function kessai(args: string[], env: Record<string, string | undefined> = {}) {
  const { DATABASE_URL: _ignored, ...base } = process.env;
  const result = spawnSync(process.execPath, [BIN, ...args], { env: { ...base, KESSAI_DATA_DIR: dataDir, ...env }, encoding: 'utf8', timeout: 60_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('kessai CLI on the embedded database', () => {
  it('migrate applies once, then reports up to date', () => {
    // A new data folder is unpacked from the migrated database the build made (dist/), so the first
    // migrate finds every migration of sql/ applied; so does the second.
    const migrations = readdirSync(join(ROOT, 'sql')).filter((f) => /^\d{6}_.*\.sql$/.test(f)).length;
    const first = kessai(['migrate']);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(new RegExp(`^pglite .*: up to date \\(${migrations} migrations\\)`));
    const second = kessai(['migrate']);
    expect(second.stdout).toMatch(new RegExp(`up to date \\(${migrations} migrations\\)`));
  });

  it('accounts create prints the account and its four keys; accounts list shows it', () => {
    const created = kessai(['accounts', 'create', '--name', 'Shibuya Books', '--id', 'acct_shibuya', '--fee-rate', 'Visa=2.59', '--json']);
    expect(created.code, created.stderr).toBe(0);
    const parsed = JSON.parse(created.stdout) as { account: Record<string, unknown> & { fee_rates: Record<string, string> }; keys: { test: { secret: string } } };
    // snake_case like every other JSON output.
    expect(Object.keys(parsed.account)).toEqual(['id', 'object', 'name', 'live_enabled', 'term_cycle', 'fee_rates', 'created']);
    expect(parsed.account).toMatchObject({ id: 'acct_shibuya', object: 'account', live_enabled: false, term_cycle: 'monthly' });
    expect(parsed.account.fee_rates.Visa).toBe('2.59');
    expect(Number.isInteger(parsed.account.created)).toBe(true);
    expect(parsed.keys.test.secret).toMatch(/^sk_test_/);
    const listed = kessai(['accounts', 'list']);
    expect(listed.stdout).toContain('acct_shibuya\tShibuya Books');
    // Human-facing instants in JST with the offset.
    expect(listed.stdout).toMatch(/acct_shibuya\t.*\t\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2}(\.\d{3})?)? \+09:00\n/);
  });

  it('accounts reauth opts an account in to scheduled reauthorization and shows its settings', () => {
    const before = kessai(['accounts', 'reauth', 'acct_shibuya']);
    expect(before.code, before.stderr).toBe(0);
    expect(before.stdout).toBe('acct_shibuya: scheduled reauthorization off (holds lapse at expired_at)\n');
    const on = kessai(['accounts', 'reauth', 'acct_shibuya', '--enable', '--lead-hours', '48', '--max-count', '2']);
    expect(on.code, on.stderr).toBe(0);
    expect(on.stdout).toContain('scheduled reauthorization on: holds lapsing within 48 h are reauthorized, at most 2 time(s) per charge');
    // A later call changes only what it names.
    expect(kessai(['accounts', 'reauth', 'acct_shibuya', '--max-count', '3']).stdout).toContain('within 48 h are reauthorized, at most 3 time(s)');
    for (const { args, line } of [
      { args: ['accounts', 'reauth', 'acct_shibuya', '--lead-hours', '0'], line: /^kessai: invalid_param_key \(lead_hours\): lead hours must be an integer from 1 to 720, got 0/ },
      { args: ['accounts', 'reauth', 'acct_shibuya', '--max-count', 'many'], line: /expected a whole number, got "many"/ },
      { args: ['accounts', 'reauth', 'acct_nope', '--enable'], line: /^kessai: invalid_id \(account\): No such account: acct_nope/ },
      { args: ['accounts', 'reauth', 'acct_shibuya', '--enable', '--disable'], line: /--enable and --disable exclude each other/ },
    ]) {
      const refused = kessai(args);
      expect(refused.code, args.join(' ')).not.toBe(0);
      expect(refused.stderr.split('\n')[0], args.join(' ')).toMatch(line);
    }
    // Refused calls changed nothing.
    expect(kessai(['accounts', 'reauth', 'acct_shibuya']).stdout).toContain('within 48 h are reauthorized, at most 3 time(s)');
    const off = kessai(['accounts', 'reauth', 'acct_shibuya', '--disable']);
    expect(off.stdout).toBe('acct_shibuya: scheduled reauthorization off (holds lapse at expired_at)\n');
    // Ten processes one after another, each opening the embedded database (3.5–9 s each on a
    // loaded machine; see scripts/bench/startup.mjs): more than the default minute.
  }, 180_000);

  it('--version prints the package version', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    for (const flag of ['--version', '-V']) {
      const printed = kessai([flag]);
      expect(printed.code).toBe(0);
      expect(printed.stdout).toBe(`${pkg.version}\n`);
    }
  });

  it('jobs list shows next slots and the latest run in JST with the offset', () => {
    const listed = kessai(['jobs', 'list', '--at', '2027-01-01']);
    expect(listed.code, listed.stderr).toBe(0);
    // terms.close runs at midnight JST: its next slot after 2027-01-01 00:00 JST is 2027-01-02 00:00.
    expect(listed.stdout).toMatch(/terms\.close .*\n {2}next: 2027-01-02 00:00 \+09:00, 2027-01-03 00:00 \+09:00/);
    expect(listed.stdout).not.toMatch(/\d{2}:\d{2}:\d{2}\.\d{3}Z/);
  });

  it('bad arguments get one clear line and a non-zero exit, with no stack trace', () => {
    const cases = [
      { args: ['accounts', 'create', '--name', 'X', '--fee-rate', 'Visa=abc'], line: /^kessai: invalid_param_key \(fee_rates\[Visa\]\): fee rate of Visa must be a percentage/ },
      { args: ['accounts', 'create', '--name', 'Again', '--id', 'acct_shibuya'], line: /^kessai: already_exist_id \(id\): account acct_shibuya already exists/ },
      { args: ['jobs', 'run', 'no.such.job', '--at', '2027-01-01'], line: /^kessai: invalid_param_key \(job\): no job named "no.such.job"/ },
      { args: ['jobs', 'run', 'x', '--at', 'yesterday'], line: /argument 'yesterday' is invalid\. not an instant/ },
      { args: ['worker', '--at', '2027-01-01'], line: /--at goes with --once/ },
      { args: ['no-such-command'], line: /unknown command 'no-such-command'/ },
    ];
    for (const { args, line } of cases) {
      const result = kessai(args);
      expect(result.code, args.join(' ')).not.toBe(0);
      expect(result.stderr.split('\n')[0], args.join(' ')).toMatch(line);
      expect(result.stderr, args.join(' ')).not.toMatch(/\n\s+at /);
    }
  });

  it('an unreachable database is one line and exit 1; --verbose adds the stack', () => {
    const url = 'postgres://postgres@127.0.0.1:1/nowhere';
    const plain = kessai(['migrate', '--database-url', url]);
    expect(plain.code).toBe(1);
    expect(plain.stderr.trim()).toBe('kessai: cannot connect to PostgreSQL at postgres://postgres@127.0.0.1:1/nowhere: connect ECONNREFUSED 127.0.0.1:1');
    const verbose = kessai(['migrate', '--database-url', url, '--verbose']);
    expect(verbose.stderr).toMatch(/\n\s+at /);
  });

  it('worker stops cleanly on SIGTERM', async () => {
    const { DATABASE_URL: _ignored, ...base } = process.env;
    const child = spawn(process.execPath, [BIN, 'worker', '--log-level', 'info'], { env: { ...base, KESSAI_DATA_DIR: dataDir }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      // Twice, as an impatient operator would: the second must not cut the shutdown short.
      if (stderr.includes('"worker started"') && child.signalCode === null && !stderr.includes('stopping')) child.kill('SIGTERM');
    });
    const exit = await new Promise<{ code: number | null; signal: string | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    expect(exit, stderr).toEqual({ code: 0, signal: null });
    expect(kessai(['accounts', 'list']).code).toBe(0);
  });

  it('a second process cannot open the embedded database while a worker holds it', async () => {
    const { DATABASE_URL: _ignored, ...base } = process.env;
    const child = spawn(process.execPath, [BIN, 'worker', '--log-level', 'info'], { env: { ...base, KESSAI_DATA_DIR: dataDir }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    const started = new Promise<void>((resolve) =>
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        if (stderr.includes('"worker started"')) resolve();
      }),
    );
    await started;
    const second = kessai(['accounts', 'list']);
    child.kill('SIGTERM');
    await new Promise((resolve) => child.on('exit', resolve));
    expect(second.code).toBe(1);
    expect(second.stderr.trim()).toBe(`kessai: the embedded database at ${dataDir} is in use by process ${child.pid}; stop it first, or set DATABASE_URL to share a PostgreSQL server between processes`);
    expect(stderr).toContain('"msg":"worker stopped"');
  });
});

describe.runIf(isPostgres())('kessai CLI on PostgreSQL', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => database?.drop());

  it('uses DATABASE_URL: migrate is a no-op on a migrated database, accounts create writes there', async () => {
    const env = { DATABASE_URL: database.url! };
    const migrated = kessai(['migrate'], env);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(migrated.stdout).toMatch(/^postgres .*: up to date/);
    const created = kessai(['accounts', 'create', '--name', 'Osaka Tea', '--id', 'acct_osaka'], env);
    expect(created.code, created.stderr).toBe(0);
    const row = await database.store.db.selectFrom('accounts').select('name').where('account_id', '=', 'acct_osaka').executeTakeFirst();
    expect(row).toEqual({ name: 'Osaka Tea' });
    const once = kessai(['worker', '--once', '--at', '2027-01-01T09:00'], env);
    expect(once.code, once.stderr).toBe(0);
    expect(once.stdout).toMatch(/slot\(s\) run for \d+ job\(s\) on postgres/);
  });
});
