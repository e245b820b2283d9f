/**
 * Benchmark of webhook delivery (`npm run bench:webhooks -- [--n 100000] [--endpoints 100]`).
 *
 * On the PostgreSQL server named by DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 * it creates a scratch database, migrates it, seeds N events of one account with one pending
 * delivery each, spread over E endpoints, all due (set-based SQL), starts a receiver in a child
 * process on 127.0.0.1 (200 at once; paths under /slow never answer), then:
 *
 *   1. engine: one delivery pass (src/webhooks/delivery.ts, the `webhooks.deliver` job's code) with
 *      the worker's HTTP transport (undici, 10 s timeout) and its default pool sizes; verifies with
 *      SQL that every delivery was recorded delivered exactly once and every pending_webhooks is 0;
 *   2. ceiling: the same number of POSTs of the same bodies over the same client and pool sizes,
 *      with no database at all: what the receiver and HTTP stack allow on this machine;
 *   3. timeouts: the deliveries seeded again with 10 % of the endpoints pointing at /slow (each
 *      attempt there times out after 10 s); the rate of the other 90 % until their last delivery
 *      is recorded, against run 1's rate.
 *
 * Prints deliveries/s, p99 send latency, peak RSS, the ratio engine/ceiling and the ratio of the
 * healthy endpoints' rate with and without the dead ones. The database is dropped at the end (also
 * on failure) unless --keep. Not a timed test: targets are read by a person.
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { sql, type Kysely } from 'kysely';
import { Pool } from 'undici';
import { createAccount } from '../../src/accounts/accounts';
import { openStore } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import type { Database } from '../../src/db/schema';
import { seededIds } from '../../src/domain/ids';
import { FixedClock } from '../../src/engine/clock';
import { createContext } from '../../src/engine/context';
import { silentLogger } from '../../src/engine/logger';
import { deliverDueWebhooks, type RecordedOutcome } from '../../src/webhooks/delivery';
import { httpWebhookTransport } from '../../src/webhooks/transport';
import { admin, ceilingRatioLine, log, seconds, SERVER, withDatabase } from './bench-support';

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', default: '100000' },
    endpoints: { type: 'string', default: '100' },
    keep: { type: 'boolean', default: false },
  },
});
const N = Number(args.n);
const ENDPOINTS = Number(args.endpoints);
const SLOT = new Date('2027-01-01T00:00:00.000Z');
const ACCOUNT = 'acct_webhooks_bench';
/** Concurrency and per-endpoint connections: the delivery pass's defaults, for both runs. */
const CONCURRENCY = 256;
const PER_ENDPOINT = 16;

const RECEIVER = `
const http = require('node:http');
const server = http.createServer((req, res) => {
  if (req.url.startsWith('/slow')) { req.resume(); return; }
  req.resume();
  req.on('end', () => { res.writeHead(200, { 'content-type': 'text/plain' }); res.end('ok'); });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;

async function startReceiver(): Promise<{ port: number; stop(): void }> {
  const child = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim())));
    child.once('exit', (code) => reject(new Error(`receiver exited with ${code}`)));
  });
  return { port, stop: () => void child.kill() };
}

/** N events (a ~700-byte charge-like document each) and their deliveries, spread over the endpoints. */
async function seed(db: Kysely<Database>, port: number): Promise<void> {
  await createAccount({ db, clock: new FixedClock(SLOT), ids: seededIds(1) }, { name: 'Webhook bench', id: ACCOUNT });
  await sql`
    INSERT INTO webhook_endpoints (account_id, endpoint_id, livemode, url, token, created_at, updated_at)
    SELECT ${ACCOUNT}, 'we_bench' || lpad(i::text, 5, '0'), false, ${`http://127.0.0.1:${port}/hooks/`} || i, 'whook_bench' || i, ${SLOT}, ${SLOT}
    FROM generate_series(0, ${ENDPOINTS - 1}) AS i`.execute(db);
  await sql`
    INSERT INTO events (account_id, event_id, livemode, api_version, type, object_type, resource_id, data, created_at, pending_webhooks)
    SELECT ${ACCOUNT}, 'evnt_bench' || lpad(i::text, 8, '0'), false, 'v1', 'charge.succeeded', 'charge', 'ch_bench' || i,
      json_build_object('id', 'ch_bench' || i, 'object', 'charge', 'livemode', false, 'created', 1798729200, 'amount', 1000 + i % 5000,
        'currency', 'jpy', 'paid', true, 'captured', true, 'captured_at', 1798729200, 'customer', 'cus_bench' || (i % 1000),
        'description', 'monthly plan renewal', 'failure_code', null, 'failure_message', null, 'fee_rate', '3.00', 'refunded', false,
        'amount_refunded', 0, 'subscription', 'sub_bench' || i, 'metadata', json_build_object('order', 'A-' || i),
        'card', json_build_object('id', 'car_bench' || (i % 1000), 'object', 'card', 'brand', 'Visa', 'last4', '4242', 'exp_month', 12, 'exp_year', 2032,
          'fingerprint', 'e1d8225886e3a7211127df751c86787f', 'country', 'JP', 'cvc_check', 'passed')),
      ${SLOT}, 1
    FROM generate_series(0, ${N - 1}) AS i`.execute(db);
  await resetDeliveries(db);
}

/** Every event pending again, each with one delivery to endpoint i % E, due at the slot. */
async function resetDeliveries(db: Kysely<Database>): Promise<void> {
  await sql`TRUNCATE webhook_deliveries, webhook_attempts`.execute(db);
  await sql`UPDATE events SET pending_webhooks = 1 WHERE account_id = ${ACCOUNT}`.execute(db);
  await sql`
    INSERT INTO webhook_deliveries (account_id, endpoint_id, event_id, next_attempt_at, created_at)
    SELECT ${ACCOUNT}, 'we_bench' || lpad((i % ${ENDPOINTS})::text, 5, '0'), 'evnt_bench' || lpad(i::text, 8, '0'), ${SLOT}, ${SLOT}
    FROM generate_series(0, ${N - 1}) AS i`.execute(db);
  await sql`ANALYZE webhook_deliveries, webhook_endpoints, events`.execute(db);
}

function p99(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? 0;
}

interface PassResult {
  readonly ms: number;
  readonly counts: Awaited<ReturnType<typeof deliverDueWebhooks>>;
  readonly latencies: number[];
  /** When the last delivery to an endpoint not in `slow` was recorded (ms from the start). */
  readonly healthyDoneMs: number;
  readonly healthy: number;
}

async function pass(db: Kysely<Database>, store: Parameters<typeof createContext>[0]['store'], slow: ReadonlySet<string>): Promise<PassResult> {
  const transport = httpWebhookTransport({ connectionsPerEndpoint: PER_ENDPOINT });
  const ctx = createContext({ db, store, clock: new FixedClock(SLOT), ids: seededIds(2), log: silentLogger(), webhookTransport: transport });
  const latencies: number[] = [];
  let healthy = 0;
  let healthyDoneMs = 0;
  const started = performance.now();
  const counts = await deliverDueWebhooks(ctx, {
    owner: 'bench',
    concurrency: CONCURRENCY,
    perEndpoint: PER_ENDPOINT,
    onRecorded: (recorded: readonly RecordedOutcome[]) => {
      for (const outcome of recorded) {
        if (slow.has(outcome.endpointId)) continue;
        if (outcome.ok) {
          healthy += 1;
          latencies.push(outcome.durationMs);
        }
      }
      healthyDoneMs = performance.now() - started;
    },
  });
  const ms = performance.now() - started;
  await transport.close();
  return { ms, counts, latencies, healthyDoneMs, healthy };
}

/** The ceiling: the same POSTs over the same client and pool sizes, no database. */
async function ceiling(port: number, body: string): Promise<number> {
  const pools = Array.from({ length: ENDPOINTS }, () => new Pool(`http://127.0.0.1:${port}`, { connections: PER_ENDPOINT, pipelining: 1 }));
  let next = 0;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= N) return;
      const response = await pools[i % ENDPOINTS]!.request({
        path: `/hooks/${i % ENDPOINTS}`,
        method: 'POST',
        headers: { 'content-type': 'application/json; charset=utf-8', 'x-service-webhook-token': 'whook_bench' },
        body,
        signal: AbortSignal.timeout(10_000),
      });
      await response.body.dump();
      if (response.statusCode !== 200) throw new Error(`ceiling POST answered ${response.statusCode}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const ms = performance.now() - started;
  await Promise.all(pools.map((pool) => pool.close()));
  return ms;
}

async function verify(db: Kysely<Database>, expectDelivered: number): Promise<void> {
  const row = (
    await sql<{ delivered: number; attempts: number; recorded: number; pending: number }>`
      SELECT (SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered')::int AS delivered,
             (SELECT count(*) FROM webhook_attempts WHERE succeeded)::int AS attempts,
             (SELECT count(*) FROM (SELECT 1 FROM webhook_attempts GROUP BY account_id, endpoint_id, event_id, attempt HAVING count(*) > 1) x)::int AS recorded,
             (SELECT count(*) FROM events WHERE pending_webhooks = 0)::int AS pending`.execute(db)
  ).rows[0]!;
  log(`verify:  ${JSON.stringify(row)}`);
  if (row.delivered !== expectDelivered || row.attempts !== expectDelivered || row.recorded !== 0 || row.pending !== expectDelivered) {
    throw new Error('verification failed: not every delivery was recorded delivered exactly once');
  }
}

const name = `kessai_bench_webhooks_${process.pid}_${Math.floor(performance.timeOrigin)}`;
const receiver = await startReceiver();
await admin((c) => c.query(`CREATE DATABASE "${name}"`));
try {
  const store = await openStore({ databaseUrl: withDatabase(SERVER, name), poolSize: 4 });
  try {
    await migrate(store);
    let started = performance.now();
    await seed(store.db, receiver.port);
    log(`seeded ${N} events, one pending delivery each, over ${ENDPOINTS} endpoints, in ${seconds(performance.now() - started)} s`);

    // 1. The engine.
    const run1 = await pass(store.db, store, new Set());
    const rate1 = N / (run1.ms / 1000);
    log(`engine:  ${JSON.stringify(run1.counts)} in ${seconds(run1.ms)} s = ${Math.round(rate1)} deliveries/s, p99 send latency ${p99(run1.latencies)} ms`);
    await verify(store.db, N);
    const rssMb = process.resourceUsage().maxRSS / 1024;

    // 2. The ceiling.
    const body = (await sql<{ body: string }>`SELECT data::text AS body FROM events WHERE account_id = ${ACCOUNT} LIMIT 1`.execute(store.db)).rows[0]!.body;
    const ceilingMs = await ceiling(receiver.port, `{"id":"evnt_bench","object":"event","livemode":false,"created":1798729200,"type":"charge.succeeded","pending_webhooks":1,"data":${body}}`);
    const ceilingRate = N / (ceilingMs / 1000);
    log(`ceiling: ${N} POSTs, no database, in ${seconds(ceilingMs)} s = ${Math.round(ceilingRate)}/s`);

    // 3. 10 % of the endpoints time out.
    await resetDeliveries(store.db);
    const slowCount = Math.max(1, Math.round(ENDPOINTS / 10));
    const slow = new Set(Array.from({ length: slowCount }, (_, i) => `we_bench${String(i * 10).padStart(5, '0')}`));
    await sql`UPDATE webhook_endpoints SET url = ${`http://127.0.0.1:${receiver.port}/slow/`} || endpoint_id WHERE endpoint_id = ANY(${[...slow]}::text[])`.execute(store.db);
    started = performance.now();
    const run3 = await pass(store.db, store, slow);
    const rate3 = run3.healthy / (run3.healthyDoneMs / 1000);
    log(
      `timeouts: ${slow.size} of ${ENDPOINTS} endpoints never answer: ${JSON.stringify(run3.counts)}; the other ${run3.healthy} delivered in ${seconds(run3.healthyDoneMs)} s = ${Math.round(rate3)}/s ` +
        `(pass ends ${seconds(run3.ms)} s, after the 10 s timeouts), p99 ${p99(run3.latencies)} ms`,
    );
    log('');
    log(`deliveries/s ${Math.round(rate1)} (target >= 2,000), ceiling ${Math.round(ceilingRate)}/s, ratio ${(rate1 / ceilingRate).toFixed(2)}`);
    log(ceilingRatioLine(rate1 / ceilingRate));
    log(`p99 send latency ${p99(run1.latencies)} ms; peak RSS ${Math.round(rssMb)} MB`);
    log(`with 10 % of endpoints timing out: the others at ${Math.round(rate3)}/s, ratio ${(rate3 / rate1).toFixed(2)} of the run without (target >= 0.80)`);
  } finally {
    await store.close();
  }
} finally {
  receiver.stop();
  if (!args.keep) await admin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
}
