/**
 * The CLI through a running server: on the embedded database held by `kessai serve`, management
 * commands go through the server's operator API (serve.json in the data folder, readable by its
 * owner only) and print what they print on the database directly; once serve stops they open the
 * database themselves again.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';
import { startServe } from '../support/spawn-worker';

const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), 'kessai-operator-cli-'));
const env = { DATABASE_URL: '', KESSAI_DATA_DIR: dataDir, KESSAI_LOG_LEVEL: 'warn', KESSAI_OPERATOR_TOKEN: '' };
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const kessai = (...args: string[]) => spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 180_000 });

// A past daily slot of terms.close (00:00 JST).
const JOB_SLOT = '2026-11-01T15:00:00.000Z';
// A fixed instant for `jobs list`'s next slots, so both runs print the same.
const LIST_AT = '2026-11-20T12:00:00Z';
let served: { accounts: string; run: string; reauth: string; plan: string; jobs: string } | undefined;
let adjustmentsServed: string | undefined;

it('kessai webhooks, accounts (create, list, reauth, plan), jobs (run, list) and adjustments while an embedded serve runs succeed through the server, audited as cli; after serve stops they work directly with the same output', async () => {
  expect(kessai('accounts', 'create', '--name', 'CLI Shop', '--id', 'acct_cli_shop').status).toBe(0);
  const { server, apibase } = await startServe(['--no-worker'], env);
  try {
    const origin = apibase.replace(/\/v1$/, '');
    // Its operator line comes once serve.json is written.
    const deadline = performance.now() + 30_000;
    while (!server.output().includes('operator API on') && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    // The server holds the folder: opening the database directly would be refused.
    expect(existsSync(join(dataDir, 'serve.json'))).toBe(true);
    expect(statSync(join(dataDir, 'serve.json')).mode & 0o077).toBe(0);
    expect(statSync(join(dataDir, 'operator-token')).mode & 0o077).toBe(0);
    expect(server.output()).toContain(`operator API on ${origin}/admin`);

    const added = kessai('webhooks', 'add', 'acct_cli_shop', '--url', 'https://shop.example/hooks', '--json');
    expect(added.stderr).toBe('');
    expect(added.status).toBe(0);
    const { endpoint, token } = JSON.parse(added.stdout) as { endpoint: { id: string; url: string }; token: string };
    expect(endpoint.url).toBe('https://shop.example/hooks');
    expect(token).toMatch(/^whook_/);
    const listed = kessai('webhooks', 'list', 'acct_cli_shop');
    expect(listed.status).toBe(0);
    expect(listed.stdout).toContain(`${endpoint.id}\ttest\tenabled\thttps://shop.example/hooks`);
    expect(listed.stdout).toContain('delivered 0, failing 0, waiting 0, given up 0');
    // Refusals come back as the CLI prints them.
    const refused = kessai('webhooks', 'add', 'acct_cli_shop', '--url', 'ftp://x');
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain('invalid_param_key (url)');

    // The other management commands go through the server too, printing what they print directly.
    const created = kessai('accounts', 'create', '--name', 'Served Shop', '--id', 'acct_served_shop');
    expect(created.stderr).toBe('');
    expect(created.status).toBe(0);
    expect(created.stdout).toContain('account acct_served_shop (Served Shop), term cycle monthly, live mode not enabled');
    expect(created.stdout).toMatch(/test secret key: sk_test_\w+/);
    const accountsServed = kessai('accounts', 'list');
    expect(accountsServed.status).toBe(0);
    expect(accountsServed.stdout).toMatch(/^acct_cli_shop\tCLI Shop\tmonthly\ttest only\t/m);
    expect(accountsServed.stdout).toMatch(/^acct_served_shop\tServed Shop\tmonthly\ttest only\t/m);
    const ranServed = kessai('jobs', 'run', 'terms.close', '--at', JOB_SLOT);
    expect(ranServed.stderr).toBe('');
    expect(ranServed.status).toBe(0);
    expect(ranServed.stdout).toMatch(new RegExp(`^terms\\.close @ ${JOB_SLOT.replace(/\./g, '\\.')}: succeeded `));
    const slots = (await (await fetch(`${origin}/admin/jobs/slots?job=terms.close`, { headers: { authorization: `Bearer ${readFileSync(join(dataDir, 'operator-token'), 'utf8').trim()}` } })).json()) as { data: { slot: string }[] };
    expect(slots.data.map((s) => s.slot)).toContain(JOB_SLOT);
    const adjusted = kessai('adjustments', 'add', 'acct_served_shop', '--amount', '-500', '--subject', 'other', '--reason', 'card fee returned', '--key', 'cli-adj-1');
    expect(adjusted.stderr).toBe('');
    expect(adjusted.status).toBe(0);
    expect(kessai('adjustments', 'add', 'acct_served_shop', '--amount', '-500', '--subject', 'other', '--reason', 'card fee returned', '--key', 'cli-adj-1').stdout).toBe(adjusted.stdout);
    const badAmount = kessai('adjustments', 'add', 'acct_served_shop', '--amount', '0', '--subject', 'other', '--reason', 'nothing');
    expect(badAmount.status).toBe(1);
    expect(badAmount.stderr).toContain('invalid_amount (amount)');
    adjustmentsServed = kessai('adjustments', 'list', 'acct_served_shop').stdout;
    expect(adjustmentsServed.trim().split('\n')).toEqual([adjusted.stdout.trim()]);
    // Reauthorization settings, the account's own plan and the job list go through the server too.
    const reauthSet = kessai('accounts', 'reauth', 'acct_served_shop', '--enable', '--lead-hours', '24', '--max-count', '2');
    expect(reauthSet.stderr).toBe('');
    expect(reauthSet.stdout).toBe('acct_served_shop: scheduled reauthorization on: holds lapsing within 24 h are reauthorized, at most 2 time(s) per charge\n');
    const reauthServed = kessai('accounts', 'reauth', 'acct_served_shop');
    expect(reauthServed.stdout).toBe(reauthSet.stdout);
    const reauthRefused = kessai('accounts', 'reauth', 'acct_served_shop', '--lead-hours', '0');
    expect(reauthRefused.status).toBe(1);
    expect(reauthRefused.stderr).toContain('invalid_param_key (lead_hours)');
    const planSet = kessai('accounts', 'plan', 'acct_served_shop', '--subject', 'proplan', '--fee', '3000', '--from', '2026-12-01');
    expect(planSet.stderr).toBe('');
    expect(planSet.status).toBe(0);
    expect(planSet.stdout).toBe('set: from 2026-12-01 00:00 +09:00\tproplan\t3000 yen/month\tnext bill 2026-12-01 00:00 +09:00\n');
    const planServed = kessai('accounts', 'plan', 'acct_served_shop');
    expect(planServed.stdout).toBe(planSet.stdout.replace(/^set: /, ''));
    const planRefused = kessai('accounts', 'plan', 'acct_served_shop', '--subject', 'proplan', '--fee', '100', '--from', '2026-11-01');
    expect(planRefused.status).toBe(1);
    expect(planRefused.stderr).toContain('invalid_param_key (from)');
    const jobsServed = kessai('jobs', 'list', '--at', LIST_AT);
    expect(jobsServed.stderr).toBe('');
    expect(jobsServed.status).toBe(0);
    expect(jobsServed.stdout).toContain('terms.close  "0 0 * * *"');
    expect(jobsServed.stdout).toContain('  last: 2026-11-02 00:00 +09:00 succeeded');
    served = { accounts: accountsServed.stdout, run: ranServed.stdout, reauth: reauthServed.stdout, plan: planServed.stdout, jobs: jobsServed.stdout };

    // The server recorded the change as the CLI's.
    const tokenFile = spawnSync('cat', [join(dataDir, 'operator-token')], { encoding: 'utf8' }).stdout.trim();
    const audit = (await (await fetch(`${origin}/admin/jobs`, { headers: { authorization: `Bearer ${tokenFile}` } })).json()) as { data: unknown[] };
    expect(audit.data.length).toBeGreaterThan(5);
    // No token reached the server's log.
    expect(server.errors()).not.toContain(token);
    expect(server.errors()).not.toContain(tokenFile);
  } finally {
    server.child.kill('SIGTERM');
    await server.exited;
  }
  expect(existsSync(join(dataDir, 'serve.json'))).toBe(false);
  const direct = kessai('webhooks', 'list', 'acct_cli_shop');
  expect(direct.status).toBe(0);
  expect(direct.stdout).toContain('https://shop.example/hooks');
  // Directly, the same commands print the same: the account list, and the slot (now a replay).
  const accountsDirect = kessai('accounts', 'list');
  expect(accountsDirect.status).toBe(0);
  expect(accountsDirect.stdout).toBe(served!.accounts);
  expect(kessai('adjustments', 'list', 'acct_served_shop').stdout).toBe(adjustmentsServed!);
  expect(kessai('accounts', 'reauth', 'acct_served_shop').stdout).toBe(served!.reauth);
  expect(kessai('accounts', 'plan', 'acct_served_shop').stdout).toBe(served!.plan);
  expect(kessai('jobs', 'list', '--at', LIST_AT).stdout).toBe(served!.jobs);
  const ranDirect = kessai('jobs', 'run', 'terms.close', '--at', JOB_SLOT);
  expect(ranDirect.status).toBe(0);
  expect(ranDirect.stdout).toBe(served!.run.replace(': succeeded', ' (replayed): succeeded'));
}, 900_000);
