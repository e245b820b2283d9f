/**
 * How `kessai serve` stops beyond the drain of serve-product.test.ts: a second signal exits at
 * once, and on the embedded database the worker's batch in progress at the first signal commits
 * before the process exits 0, while nothing more starts. The card network is gated (a file), so
 * "in flight" and "mid-batch" are states the test holds, not moments it hopes to hit.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Payjp from 'payjp';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startServe, type SpawnedWorker } from '../support/spawn-worker';

const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), 'kessai-stop-'));
const env = { DATABASE_URL: '', KESSAI_DATA_DIR: dataDir, KESSAI_LOG_LEVEL: 'info', KESSAI_RATE_LIMITS: '' };
const DAY_MS = 24 * 60 * 60 * 1000;
let secret: string;
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

function kessai(args: readonly string[]) {
  return spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 120_000 });
}

/** How many authorizations have reached the gate so far. */
const waitingAtGate = (server: SpawnedWorker) => server.errors().split('network gate: authorization waiting').length - 1;

/** Stops a server that is not part of what a test checks, and waits for it to exit. */
async function stopQuietly(server: SpawnedWorker): Promise<void> {
  server.child.kill('SIGTERM');
  expect((await server.exited).code, server.errors()).toBe(0);
}

beforeAll(() => {
  const created = kessai(['accounts', 'create', '--name', 'Stop Shop', '--json']);
  expect(created.status, created.stderr).toBe(0);
  secret = (JSON.parse(created.stdout) as { keys: { test: { secret: string } } }).keys.test.secret;
}, 180_000);

it('a second signal during the drain exits at once (status 1), without waiting for the request still in flight', async () => {
  const gate = join(dataDir, 'gate-second-signal');
  const { server, apibase } = await startServe(['--no-worker'], { ...env, KESSAI_TEST_NETWORK_GATE: gate });
  try {
    const payjp = Payjp(secret, { apibase, maxRetry: 0 });
    const token = await payjp.tokens.create({ card: { number: '4242424242424242', exp_month: 12, exp_year: 2035, cvc: '123' } }, { 'X-Payjp-Direct-Token-Generate': 'true' });
    const customer = await payjp.customers.create({ card: token.id });
    const inFlight = payjp.charges.create({ amount: 1500, currency: 'jpy', customer: customer.id }).then(
      () => 'answered',
      (error: Error) => `failed: ${error.message}`,
    );
    await expect.poll(() => waitingAtGate(server), { timeout: 60_000, interval: 20 }).toBe(1);
    server.child.kill('SIGTERM');
    await expect.poll(() => server.errors(), { timeout: 30_000, interval: 20 }).toContain('stopping: answering the requests already received');
    // The first signal alone waits for the charge, which the closed gate holds.
    server.child.kill('SIGINT');
    // The gate is never opened: the process can only have exited by giving up on the request.
    const exited = await server.exited;
    expect({ code: exited.code, signal: exited.signal }).toEqual({ code: 1, signal: null });
    expect(server.errors()).toContain('second stop signal: exiting now');
    expect(await inFlight).toMatch(/^failed: /);
    expect(waitingAtGate(server)).toBe(1);
  } finally {
    server.child.kill('SIGKILL');
    rmSync(gate, { force: true });
  }
  // Left as a crash leaves it: the charge was never authorized, so no charge stands.
  const again = await startServe(['--no-worker'], env);
  try {
    const charges = await Payjp(secret, { apibase: again.apibase, maxRetry: 0 }).charges.list({ limit: 100 });
    expect(charges.data.filter((charge) => charge.amount === 1500)).toEqual([]);
  } finally {
    await stopQuietly(again.server);
  }
}, 240_000);

it('embedded serve: the worker batch in progress at SIGTERM commits (every due subscription renewed once, the slot recorded), nothing more starts, then exit 0', async () => {
  const SUBSCRIPTIONS = 12;
  // Subscriptions made today through the API; the worker then runs 35 days on, when every one of
  // them is due for its first renewal (one period: a renewal each).
  const setup = await startServe(['--no-worker'], env);
  const subscriptionIds: string[] = [];
  let customerId = '';
  try {
    const payjp = Payjp(secret, { apibase: setup.apibase, maxRetry: 0 });
    const token = await payjp.tokens.create({ card: { number: '4242424242424242', exp_month: 12, exp_year: 2035, cvc: '123' } }, { 'X-Payjp-Direct-Token-Generate': 'true' });
    customerId = (await payjp.customers.create({ card: token.id })).id;
    for (let i = 0; i < SUBSCRIPTIONS; i += 1) {
      const plan = await payjp.plans.create({ amount: 700 + i, currency: 'jpy', interval: 'month' });
      subscriptionIds.push((await payjp.subscriptions.create({ customer: customerId, plan: plan.id })).id);
    }
  } finally {
    await stopQuietly(setup.server);
  }

  const gate = join(dataDir, 'gate-worker-batch');
  const { server } = await startServe([], { ...env, KESSAI_TEST_NETWORK_GATE: gate }, { clockAheadMs: 35 * DAY_MS });
  try {
    // The worker's first tick: the renewal batch has locked its rows and waits at the network.
    await expect.poll(() => waitingAtGate(server), { timeout: 60_000, interval: 20 }).toBe(1);
    server.child.kill('SIGTERM');
    await expect.poll(() => server.errors(), { timeout: 30_000, interval: 20 }).toContain('finishing the current batch');
    writeFileSync(gate, 'open');
    expect((await server.exited).code, server.errors()).toBe(0);
  } finally {
    server.child.kill('SIGKILL');
    rmSync(gate, { force: true });
  }
  const logs = server.errors().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as { job?: string; msg: string; counts?: { renewed?: number } });
  const signalled = logs.findIndex((line) => line.msg.startsWith('stopping: answering the requests already received'));
  expect(signalled).toBeGreaterThan(0);
  // After the signal: the renewal batch held at the network committed and its slot succeeded with
  // all twelve; no other slot was started (the jobs due at the same instant are left pending).
  const slotsEnded = (lines: typeof logs) => lines.filter((line) => line.job !== undefined && /^slot |handed back/.test(line.msg)).map((line) => `${line.job}: ${line.msg}${line.counts?.renewed === undefined ? '' : ` renewed ${line.counts.renewed}`}`);
  expect(slotsEnded(logs.slice(signalled))).toEqual([`subscriptions.renew: slot succeeded renewed ${SUBSCRIPTIONS}`]);
  expect(slotsEnded(logs.slice(0, signalled)).filter((line) => line.startsWith('subscriptions.renew'))).toEqual([]);
  // Only the one batch reached the network.
  expect(waitingAtGate(server)).toBe(1);
  const jobs = kessai(['jobs', 'list']);
  expect(jobs.status, jobs.stderr).toBe(0);
  expect(jobs.stdout).toMatch(/^subscriptions\.renew .*\n {2}next: .*\n {2}last: .* succeeded$/m);
  expect(jobs.stdout).toMatch(/^charges\.reauthorize .*\n {2}next: .*\n {2}last: .* pending$/m);

  // Each subscription was charged once at creation and once at its renewal: no more, no less.
  const check = await startServe(['--no-worker'], env, { clockAheadMs: 35 * DAY_MS });
  try {
    const payjp = Payjp(secret, { apibase: check.apibase, maxRetry: 0 });
    const charges = await payjp.charges.list({ customer: customerId, limit: 100 });
    const bySubscription = new Map<string, number>();
    for (const charge of charges.data) if (charge.subscription) bySubscription.set(charge.subscription, (bySubscription.get(charge.subscription) ?? 0) + 1);
    expect(Object.fromEntries(bySubscription)).toEqual(Object.fromEntries(subscriptionIds.map((id) => [id, 2])));
    for (const id of subscriptionIds) {
      const subscription = await payjp.subscriptions.retrieve(id);
      expect(subscription.status).toBe('active');
      expect(subscription.current_period_start).toBeGreaterThan(Math.floor(Date.now() / 1000) + 25 * 86_400);
    }
  } finally {
    await stopQuietly(check.server);
  }
}, 300_000);
