/**
 * The Prometheus metrics, scraped by a real Prometheus (Debian's /usr/bin/prometheus) from a real
 * `kessai serve` (at /metrics, with the operator token) and a real `kessai worker --metrics-port`,
 * both on this file's PostgreSQL database. The test causes known values — one failed slot (run by
 * the operator API while the job's table is away), N webhook deliveries (sent by the worker's
 * poller to a local receiver), requests refused with 429 — and finds them through Prometheus's
 * HTTP API. The shipped alert rules load. PostgreSQL only: serve and worker share the database.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import Payjp from 'payjp';
import { afterAll, expect, it } from 'vitest';
import { createAccount } from '../../src/accounts/accounts';
import { addEndpoint } from '../../src/webhooks/endpoints';
import { createTestDatabase, isPostgres, testContext, type TestDatabase } from '../support/database';
import { spawnKessai, startServe, type SpawnedWorker } from '../support/spawn-worker';
import { answer, startReceiver, type Receiver } from '../support/webhook-receiver';

const RULES = fileURLToPath(new URL('../../deploy/prometheus/kessai-alerts.yml', import.meta.url));
const TOKEN = 'kop_metrics_test_operator_token_0123';
const DELIVERIES = 3;

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Polls `probe` until it returns a value, at most `ms`; the last failure is in the error. */
async function eventually<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = performance.now() + ms;
  let last: unknown;
  while (performance.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`${what}: not within ${ms} ms${last ? ` (${String(last)})` : ''}`);
}

const stop = (process: SpawnedWorker | { child: ChildProcess }) => () => {
  process.child.kill('SIGKILL');
};

it.runIf(existsSync('/usr/bin/prometheus') && isPostgres())(
  'Prometheus scrapes serve and worker and finds the failed slot, the deliveries and the 429s the test caused',
  async () => {
    const database: TestDatabase = await createTestDatabase();
    cleanups.push(() => database.drop());
    const ctx = testContext(database.store, { at: new Date() });
    const receiver: Receiver = await startReceiver(answer(200, 'ok'));
    cleanups.push(() => receiver.close());
    const shop = await createAccount(ctx, { name: 'Metrics Shop', id: 'acct_metrics' });
    const limited = await createAccount(ctx, { name: 'Limited Shop', id: 'acct_limited' });
    await addEndpoint(ctx, { accountId: 'acct_metrics', url: `${receiver.url}/hook`, apiVersion: 'v1', eventTypes: ['customer.created'] });

    const dataDir = mkdtempSync(join(tmpdir(), 'kessai-metrics-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const env = { DATABASE_URL: database.url!, KESSAI_DATA_DIR: dataDir, KESSAI_LOG_LEVEL: 'warn', KESSAI_OPERATOR_TOKEN: TOKEN, KESSAI_OPERATOR_NAME: 'metrics-test', KESSAI_RATE_LIMITS: JSON.stringify({ test: { sk: 100 }, accounts: { acct_limited: { test: { sk: 1 } } } }) };
    const { server, apibase } = await startServe([], env);
    cleanups.push(stop(server));
    const origin = apibase.replace(/\/v1$/, '');
    const worker = spawnKessai(['worker', '--metrics-port', '0'], env);
    cleanups.push(stop(worker));
    const workerMetrics = await eventually('the worker prints its metrics address', 30_000, async () => /metrics on (http:\/\/\S+)\/metrics/.exec(worker.output())?.[1]);

    // Prometheus, on ports and storage of its own, scraping both every second.
    const promDir = mkdtempSync(join(tmpdir(), 'kessai-prometheus-'));
    cleanups.push(() => rmSync(promDir, { recursive: true, force: true }));
    const promPort = await freePort();
    writeFileSync(
      join(promDir, 'prometheus.yml'),
      [
        'global: { scrape_interval: 1s, evaluation_interval: 1s }',
        `rule_files: [${JSON.stringify(RULES)}]`,
        'scrape_configs:',
        '  - job_name: kessai-serve',
        `    authorization: { type: Bearer, credentials: ${JSON.stringify(TOKEN)} }`,
        `    static_configs: [{ targets: [${JSON.stringify(new URL(origin).host)}] }]`,
        '  - job_name: kessai-worker',
        `    static_configs: [{ targets: [${JSON.stringify(new URL(workerMetrics).host)}] }]`,
        '',
      ].join('\n'),
    );
    const prometheus = spawn('/usr/bin/prometheus', [`--config.file=${join(promDir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(promDir, 'data')}`, `--web.listen-address=127.0.0.1:${promPort}`], { stdio: ['ignore', 'ignore', 'pipe'] });
    let promLog = '';
    prometheus.stderr.on('data', (chunk: Buffer) => (promLog += chunk.toString()));
    cleanups.push(() => {
      prometheus.kill('SIGKILL');
    });
    const promApi = `http://127.0.0.1:${promPort}/api/v1`;
    const query = async (expression: string): Promise<number | undefined> => {
      const answerBody = (await (await fetch(`${promApi}/query?query=${encodeURIComponent(expression)}`)).json()) as { status: string; data: { result: { value: [number, string] }[] } };
      const [first] = answerBody.data.result;
      return first === undefined ? undefined : Number(first.value[1]);
    };
    /** Waits until Prometheus reports `expected` for the expression. */
    const expectSeries = (expression: string, expected: number) =>
      eventually(`${expression} = ${expected}`, 45_000, async () => ((await query(expression)) === expected ? expected : undefined)).catch((error: Error) => {
        throw new Error(`${error.message}; last value ${String(lastValues.get(expression))}; prometheus: ${promLog.slice(-500)}`);
      });
    const lastValues = new Map<string, number | undefined>();

    await eventually('both targets are up', 45_000, async () => {
      const targets = (await (await fetch(`${promApi}/targets`)).json()) as { data: { activeTargets: { health: string }[] } };
      return targets.data.activeTargets.length === 2 && targets.data.activeTargets.every((t) => t.health === 'up') ? true : undefined;
    });

    // N deliveries: N customers (N events), sent by the worker's poller.
    const payjp = Payjp(shop.keys.test.secret, { apibase });
    for (let i = 0; i < DELIVERIES; i += 1) await payjp.customers.create({ email: `metrics-${i}@example.com` });
    await eventually('the receiver got every event', 30_000, async () => (receiver.received.length >= DELIVERIES ? true : undefined));

    // 429s: a burst over the limited account's one request a second.
    const burst = await Promise.all(Array.from({ length: 6 }, () => fetch(`${apibase}/customers`, { headers: { authorization: `Bearer ${limited.keys.test.secret}` } })));
    const refused = burst.filter((response) => response.status === 429).length;
    expect(refused).toBeGreaterThan(0);

    // One failed slot: its table is away while the operator API runs the slot on serve.
    const slot = new Date(Math.floor(Date.now() / 60_000) * 60_000);
    await sql`ALTER TABLE checkout_sessions RENAME TO checkout_sessions_away`.execute(database.store.db);
    try {
      const run = await fetch(`${origin}/admin/jobs/checkout_sessions.expire/run`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ slot: slot.toISOString() }) });
      expect(((await run.json()) as { status: string }).status).toBe('failed');
    } finally {
      await sql`ALTER TABLE checkout_sessions_away RENAME TO checkout_sessions`.execute(database.store.db);
    }

    await expectSeries('sum(kessai_job_slots_total{job="kessai-serve",job_name="checkout_sessions.expire",status="failed"})', 1);
    await expectSeries('sum(kessai_webhook_deliveries_total{job="kessai-worker",outcome="delivered"})', DELIVERIES);
    await expectSeries('sum(kessai_webhook_deliveries_total{job="kessai-serve",outcome="delivered"})', 0);
    await expectSeries('sum(kessai_rate_limit_refusals_total{job="kessai-serve",zone="sk"})', refused);
    await expectSeries('sum(kessai_http_request_duration_seconds_count{job="kessai-serve",status="429"})', refused);
    await expectSeries('sum(kessai_http_request_duration_seconds_count{job="kessai-serve",method="POST",route="/v1/customers",status="200"})', DELIVERIES);
    // The worker ran its slots (webhooks.deliver every minute), and the ledger's gauges are there.
    expect(await eventually('worker slot series', 45_000, () => query('sum(kessai_job_slots_total{job="kessai-worker",status="succeeded"}) > 0'))).toBeGreaterThan(0);
    expect(await query('max(kessai_webhook_pending_deliveries)')).toBe(0);
    // No label carries an account or key id.
    const series = (await (await fetch(`${promApi}/series?match[]=${encodeURIComponent('{__name__=~"kessai_.*"}')}`)).json()) as { data: Record<string, string>[] };
    expect(series.data.length).toBeGreaterThan(20);
    expect(JSON.stringify(series.data)).not.toMatch(/acct_|sk_test|cus_/);
    // The shipped alert rules loaded.
    const rules = (await (await fetch(`${promApi}/rules`)).json()) as { data: { groups: { name: string; rules: { name: string; health: string }[] }[] } };
    expect(rules.data.groups.flatMap((g) => g.rules.map((r) => r.name))).toContain('KessaiSlotAbandoned');
  },
  180_000,
);
