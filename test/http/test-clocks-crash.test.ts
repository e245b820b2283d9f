/**
 * A test clock's advance in a real `kessai serve` process killed (SIGKILL) mid-way: the clock's next
 * advance, in a process started after the dead one's lease lapsed, takes the advance over and
 * finishes it, with nothing done twice. The kill comes when the advance's webhook delivery reaches
 * the local receiver for the Nth time: an instant the test holds (the receiver never answers that
 * request), not one it hopes to hit.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Payjp from 'payjp';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startServe, type SpawnedWorker } from '../support/spawn-worker';
import { callTestClocks, untilClockReady, type Json } from '../support/test-clock-api';
import { startReceiver, type Receiver } from '../support/webhook-receiver';

const BIN = fileURLToPath(new URL('../../bin/kessai.mjs', import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), 'kessai-clock-crash-'));
const env = { DATABASE_URL: '', KESSAI_DATA_DIR: dataDir, KESSAI_LOG_LEVEL: 'info', KESSAI_RATE_LIMITS: '' };
/** Past the advance's lease (the engine's default, 5 minutes): a process started this much later finds it lapsed. */
const AFTER_LEASE_MS = 6 * 60 * 1000;
const SUBSCRIPTIONS = 3;
const MONTHS = 6;
/** The webhook request at which the first process is killed: after the first renewals' events, well before the last ones. */
const KILL_AT = 20;

let secret: string;
let accountId: string;
let receiver: Receiver;

function kessai(args: readonly string[]) {
  return spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 120_000 });
}

beforeAll(async () => {
  const created = kessai(['accounts', 'create', '--name', 'Clock Crash Shop', '--json']);
  expect(created.status, created.stderr).toBe(0);
  const account = JSON.parse(created.stdout) as { account: { id: string }; keys: { test: { secret: string } } };
  secret = account.keys.test.secret;
  accountId = account.account.id;
  receiver = await startReceiver();
  const added = kessai(['webhooks', 'add', accountId, '--url', `${receiver.url}/hook`]);
  expect(added.status, added.stderr).toBe(0);
}, 180_000);

afterAll(async () => {
  await receiver?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const seconds = (iso: string) => Date.parse(iso) / 1000;
const baseOf = (apibase: string) => apibase.replace(/\/v1$/, '');
const eventsReceived = () => receiver.received.map((request) => JSON.parse(request.body) as Json);

it('SIGKILL during an advance: the next advance, after the lease lapsed, finishes it; each renewal charged once, each event once, each delivered', async () => {
  const start = '2027-01-01T00:00:00+09:00';
  const to = seconds('2027-07-01T00:00:00+09:00') + 3600;
  const subscriptions: string[] = [];
  const customers: string[] = [];
  let clockId = '';
  let first: SpawnedWorker | undefined;
  try {
    const served = await startServe(['--no-worker'], env);
    first = served.server;
    const server = first;
    const base = baseOf(served.apibase);
    const payjp = Payjp(secret, { apibase: served.apibase, maxRetry: 0 });
    const clock = await callTestClocks(base, secret, 'POST', '', { frozen_time: String(seconds(start)), name: 'crash' });
    expect(clock.status, JSON.stringify(clock.body)).toBe(200);
    clockId = clock.body.id;
    const plan = await payjp.plans.create({ amount: 900, currency: 'jpy', interval: 'month' });
    for (let i = 0; i < SUBSCRIPTIONS; i += 1) {
      const token = await payjp.tokens.create({ card: { number: '4242424242424242', exp_month: 12, exp_year: 2035, cvc: '123' } } as never, { 'X-Payjp-Direct-Token-Generate': 'true' });
      const customer = await payjp.customers.create({ card: token.id, test_clock: clockId } as never);
      customers.push(customer.id);
      subscriptions.push((await payjp.subscriptions.create({ customer: customer.id, plan: plan.id })).id);
    }
    // The Nth webhook request is never answered: the process is killed while it waits for it.
    receiver.respond = (_request, res) => {
      if (receiver.received.length < KILL_AT) {
        res.writeHead(200);
        res.end('ok');
        return;
      }
      server.child.kill('SIGKILL');
      return 'hang';
    };
    const advancing = await callTestClocks(base, secret, 'POST', `/${clockId}/advance`, { frozen_time: String(to) });
    expect(advancing).toMatchObject({ status: 200, body: { status: 'advancing', advancing_to: to } });
    expect(await server.exited).toEqual({ code: null, signal: 'SIGKILL' });
  } finally {
    first?.child.kill('SIGKILL');
    receiver.dropHanging();
  }
  // Killed mid-way: some renewals had been made and their events sent, not all.
  const beforeResume = eventsReceived();
  const renewalsSent = beforeResume.filter((event) => event.type === 'subscription.renewed').length;
  expect(renewalsSent).toBeGreaterThan(0);
  expect(renewalsSent).toBeLessThan(SUBSCRIPTIONS * MONTHS);
  receiver.respond = (_request, res) => {
    res.writeHead(200);
    res.end('ok');
  };

  // A process started after the lease lapsed: the clock still says advancing; the next advance takes it over.
  const { server: second, apibase } = await startServe(['--no-worker'], env, { clockAheadMs: AFTER_LEASE_MS });
  try {
    const base = baseOf(apibase);
    expect((await callTestClocks(base, secret, 'GET', `/${clockId}`)).body).toMatchObject({ status: 'advancing', advancing_to: to });
    expect(await callTestClocks(base, secret, 'POST', `/${clockId}/advance`, { frozen_time: String(to) })).toMatchObject({ status: 200, body: { status: 'advancing', advancing_to: to } });
    expect(await untilClockReady(base, secret, clockId)).toMatchObject({ status: 'ready', frozen_time: to });

    const payjp = Payjp(secret, { apibase, maxRetry: 0 });
    // Each subscription: its first charge and one per renewal, one charge per period, none twice.
    for (const [i, customer] of customers.entries()) {
      const charges = (await payjp.charges.list({ customer, limit: 100 } as never)).data;
      expect(charges.every((charge) => charge.subscription === subscriptions[i])).toBe(true);
      const created = charges.map((charge) => charge.created).sort((x, y) => x - y);
      expect(created).toHaveLength(MONTHS + 1);
      expect(new Set(created).size).toBe(MONTHS + 1);
      expect(created[0]).toBe(seconds(start));
      // The last charge opened the period the subscription is in.
      const subscription = await payjp.subscriptions.retrieve(subscriptions[i]!);
      expect(subscription).toMatchObject({ status: 'active', current_period_start: created[MONTHS] });
      expect(subscription.current_period_end).toBeGreaterThan(to);
    }
    // Each event once: one subscription.renewed per subscription and period, one charge.succeeded per charge.
    const events = (await payjp.events.list({ limit: 100 })).data.filter((event) => event.created >= seconds(start));
    const renewed = events.filter((event) => event.type === 'subscription.renewed').map((event) => `${(event.data as unknown as Json).id} ${event.created}`);
    expect(renewed).toHaveLength(SUBSCRIPTIONS * MONTHS);
    expect(new Set(renewed).size).toBe(renewed.length);
    expect(events.filter((event) => event.type === 'charge.succeeded')).toHaveLength(SUBSCRIPTIONS * (MONTHS + 1));
    expect(events.filter((event) => event.type === 'test_clock.ready')).toHaveLength(1);

    // Every event reached the receiver, each once but for the delivery pass in flight at the kill:
    // its requests were sent (some answered) but not recorded, so the resumed advance sent them again
    // (webhooks are at least once). Those are the last requests the first process made, and twice only.
    const received = eventsReceived().map((event) => event.id as string);
    const counts = new Map<string, number>();
    for (const id of received) counts.set(id, (counts.get(id) ?? 0) + 1);
    for (const event of events) expect(counts.get(event.id), `${event.type} ${event.id}`).toBeGreaterThanOrEqual(1);
    const again = beforeResume.flatMap((event, i) => ((counts.get(event.id as string) ?? 0) > 1 ? [i] : []));
    expect(again).toContain(KILL_AT - 1);
    expect(again).toEqual(Array.from({ length: beforeResume.length - again[0]! }, (_, k) => again[0]! + k));
    expect(again[0]).toBeGreaterThan(0);
    expect([...counts.values()].filter((n) => n > 2)).toEqual([]);
    expect([...counts].filter(([id, n]) => n > 1 && !beforeResume.some((event) => event.id === id))).toEqual([]);
  } finally {
    second.child.kill('SIGTERM');
    await second.exited;
  }
}, 300_000);
