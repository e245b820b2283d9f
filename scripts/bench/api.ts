/**
 * Benchmark of the v1 HTTP API (`npm run bench:api -- [--duration 20] [--connections 32] [--keep] [--profile-server DIR] [--redis URL]`).
 *
 * On the PostgreSQL server named by DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 * it creates a scratch database, migrates it, creates an account and a customer with a Visa 4242
 * card, starts a real `kessai serve` child process on it (port 0; on PostgreSQL serve runs no
 * scheduler; the account's rate limits raised through KESSAI_RATE_LIMITS, not switched off), and
 * runs, after a 2-second warm-up of creates and an ANALYZE (the statistics autovacuum keeps on a
 * live database), each for --duration seconds at --connections concurrent connections (autocannon):
 *
 *   1. HTTP `charges.create` by customer: the form body and headers exactly as the `payjp` SDK
 *      sends them (Basic auth with the secret key);
 *   2. HTTP `charges.retrieve` of one of those charges;
 *   3. HTTP `charges.list` (the SDK's default page);
 *
 * then, in this process and in the same run, the same `charges.create` called as an operation
 * without HTTP (as many concurrent callers, a pool as large as the server's), and the plain-SQL
 * ceiling of its writes: one transaction per charge with the writes the operation makes (its
 * create intent inserted, the charge row, settled, and its `charge.succeeded` event, copied from a
 * charge the engine wrote, the intent deleted), as many concurrent callers on the same pool size.
 *
 * Prints requests/s, p50/p99 latency and errors per phase, and the ratios against the targets,
 * measured in the same run because absolute figures move from machine to machine: HTTP creates
 * ≥ 0.5 of the ceiling and ≥ 0.6 of the in-process figure, p99 ≤ 50 ms, retrieves ≥ 5× creates.
 * The database is dropped at the end (also on failure) unless --keep. Not a timed test: targets
 * are read by a person.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { sql } from 'kysely';
import pg from 'pg';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { openStore } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import { createContext } from '../../src/engine/context';
import { silentLogger } from '../../src/engine/logger';
import { randomIds } from '../../src/engine/random-ids';
import { systemClock } from '../../src/engine/system-clock';
import { runOperation } from '../../src/api/operations';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { startServe } from '../../test/support/spawn-worker';
import { admin, ceilingRatioLine, log, SERVER, withDatabase } from './bench-support';

const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '20' },
    connections: { type: 'string', default: '32' },
    keep: { type: 'boolean', default: false },
    'profile-server': { type: 'string' },
    /** Count the server's rate limits in this Redis (KESSAI_REDIS_URL) instead of PostgreSQL's rate_limit_counters. */
    redis: { type: 'string' },
  },
});
const DURATION_S = Number(args.duration);
const CONNECTIONS = Number(args.connections);
if (!(DURATION_S > 0) || !Number.isInteger(CONNECTIONS) || CONNECTIONS < 1) throw new Error('--duration must be a positive number of seconds and --connections a positive integer');
/** The server's pool (openRuntime's default); the in-process runs and the ceiling use the same. */
const POOL_SIZE = 10;
const ACCOUNT = 'acct_bench_api';
const AMOUNT = 1000;

interface Phase {
  readonly name: string;
  readonly perSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
  readonly requests: number;
  /** CPU time of the process doing the work (the server, or this one in process) per request, ms. */
  readonly cpuMs: number;
  /** CPU time of PostgreSQL's processes per request, ms (postgresCpuMs). */
  readonly pgCpuMs: number;
  /** CPU time of the load generator (autocannon, in this process) per request, ms; HTTP phases only. */
  readonly loadCpuMs?: number;
}

/**
 * User + system CPU time of a process so far, in ms (Linux /proc; NaN elsewhere). A figure that
 * stays readable when the machine is shared: wall-clock rates drop with the load, CPU per request
 * much less.
 */
function cpuMsOf(pid: number): number {
  try {
    return statCpuMs(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return Number.NaN;
  }
}

/** The command name of a /proc/<pid>/stat text (between the first '(' and the last ')'). */
const statComm = (stat: string): string => stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));

/** User + system CPU ms of a /proc/<pid>/stat text: utime and stime, in clock ticks (USER_HZ 100), after the command name. */
function statCpuMs(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

/**
 * User + system CPU time, in ms, of every PostgreSQL process of this machine (its backends, the WAL
 * writer, the checkpointer: `comm` postgres), so far; NaN where /proc is missing or PostgreSQL runs
 * elsewhere (then the phase prints no figure). On a machine otherwise quiet, the phase's share is
 * the work the phase gave the database.
 */
function postgresCpuMs(): number {
  let total = 0;
  let found = false;
  try {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        if (statComm(stat) !== 'postgres') continue;
        total += statCpuMs(stat);
        found = true;
      } catch {
        // The process ended between the listing and the read.
      }
    }
  } catch {
    return Number.NaN;
  }
  return found ? total : Number.NaN;
}

/** One autocannon run against the server (process `pid`); errors are transport errors, timeouts and non-2xx answers. */
async function http(name: string, pid: number, options: autocannon.Options): Promise<Phase> {
  const cpu = cpuMsOf(pid);
  const pgCpu = postgresCpuMs();
  const loadCpu = process.cpuUsage();
  const result = await autocannon({ connections: CONNECTIONS, duration: DURATION_S, ...options });
  const load = process.cpuUsage(loadCpu);
  return {
    cpuMs: (cpuMsOf(pid) - cpu) / result.requests.total,
    pgCpuMs: (postgresCpuMs() - pgCpu) / result.requests.total,
    loadCpuMs: (load.user + load.system) / 1000 / result.requests.total,
    name,
    perSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts + result.non2xx,
    requests: result.requests.total,
  };
}

/** `work` run by CONNECTIONS concurrent callers for DURATION_S seconds, timed call by call. */
async function concurrent(name: string, work: () => Promise<void>): Promise<Phase> {
  const latencies: number[] = [];
  let errors = 0;
  let firstError: unknown;
  const cpu = process.cpuUsage();
  const pgCpu = postgresCpuMs();
  const started = performance.now();
  const until = started + DURATION_S * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < until) {
        const t = performance.now();
        try {
          await work();
          latencies.push(performance.now() - t);
        } catch (error) {
          errors += 1;
          firstError ??= error;
        }
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  if (firstError !== undefined) log(`${name}: ${errors} errors, the first: ${(firstError as Error).message}`);
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? Number.NaN;
  const used = process.cpuUsage(cpu);
  const pgCpuMs = (postgresCpuMs() - pgCpu) / latencies.length;
  return { name, perSecond: latencies.length / elapsed, p50: at(0.5), p99: at(0.99), errors, requests: latencies.length, cpuMs: (used.user + used.system) / 1000 / latencies.length, pgCpuMs };
}

function printTable(phases: readonly Phase[]): void {
  const pad = (text: string, width: number) => text.padStart(width);
  log(`${'phase'.padEnd(28)}${pad('req/s', 10)}${pad('p50 ms', 9)}${pad('p99 ms', 9)}${pad('requests', 10)}${pad('errors', 8)}${pad('CPU ms/req', 12)}${pad('PG CPU ms/req', 15)}${pad('load CPU ms/req', 17)}`);
  for (const p of phases) {
    log(`${p.name.padEnd(28)}${pad(p.perSecond.toFixed(0), 10)}${pad(p.p50.toFixed(1), 9)}${pad(p.p99.toFixed(1), 9)}${pad(String(p.requests), 10)}${pad(String(p.errors), 8)}${pad(p.cpuMs.toFixed(2), 12)}${pad(Number.isNaN(p.pgCpuMs) ? '-' : p.pgCpuMs.toFixed(2), 15)}${pad(p.loadCpuMs === undefined ? '-' : p.loadCpuMs.toFixed(2), 17)}`);
  }
}

async function main(): Promise<void> {
  const name = `kessai_bench_api_${process.pid}_${Math.floor(performance.timeOrigin)}`;
  const url = withDatabase(SERVER, name);
  log(`API benchmark: ${CONNECTIONS} connections, ${DURATION_S} s a phase, pool ${POOL_SIZE}, server=${new URL(SERVER).host}, rate limits in ${args.redis === undefined ? 'PostgreSQL' : 'Redis'}, load average ${loadavg()[0]!.toFixed(1)}`);
  await admin((c) => c.query(`CREATE DATABASE "${name}"`));
  let server: Awaited<ReturnType<typeof startServe>>['server'] | undefined;
  const store = await openStore({ databaseUrl: url, poolSize: POOL_SIZE });
  try {
    await migrate(store);
    const ctx = createContext({ db: store.db, store, clock: systemClock, ids: randomIds(), log: silentLogger() });
    const { keys } = await createAccount(ctx, { name: 'API bench', id: ACCOUNT });
    const caller: Caller = { accountId: ACCOUNT, livemode: false, kind: 'secret' };
    const card = { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2035', cvc: '123' };
    const token = (await runOperation(ctx, { ...caller, kind: 'public' }, 'tokens.create', { card })) as { id: string };
    const customer = ((await runOperation(ctx, caller, 'customers.create', { card: token.id })) as { id: string }).id;

    // The account's limits raised by configuration (v1 §8's defaults are 2 a second in test mode).
    const limit = 1_000_000;
    const rateLimits = JSON.stringify({ accounts: { [ACCOUNT]: { test: { pk: limit, payment: limit, sk: limit } } } });
    const started = await startServe(['--no-worker'], { DATABASE_URL: url, KESSAI_RATE_LIMITS: rateLimits, KESSAI_LOG_LEVEL: 'info', KESSAI_REDIS_URL: args.redis ?? '' }, {
      discardLogs: true,
      // A CPU profile of the server child, written when it stops (after the HTTP phases).
      ...(args['profile-server'] === undefined ? {} : { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${args['profile-server']}`] }),
    });
    server = started.server;
    const apibase = started.apibase;
    // As the payjp SDK sends them (node_modules/payjp/built/resource.js): Basic "<key>:", Accept, a form body.
    const headers = { accept: 'application/json', authorization: `Basic ${Buffer.from(`${keys.test.secret}:`).toString('base64')}` };
    const createBody = new URLSearchParams({ amount: String(AMOUNT), currency: 'jpy', customer }).toString();
    const create: autocannon.Options = { url: `${apibase}/charges`, method: 'POST', headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' }, body: createBody };
    const probe = await fetch(create.url, { method: 'POST', headers: create.headers as Record<string, string>, body: createBody });
    const charge = (await probe.json()) as { id?: string; paid?: boolean };
    if (probe.status !== 200 || charge.paid !== true) throw new Error(`the first charge over HTTP failed: ${probe.status} ${JSON.stringify(charge)}`);
    // A short warm-up (JIT, connections) that is not counted.
    await autocannon({ ...create, connections: CONNECTIONS, duration: Math.min(2, DURATION_S) });
    // Statistics, as autovacuum keeps them on a live database: a scratch database minutes old has
    // none, and without them PostgreSQL prices charges_by_created and charges_pkey alike for a
    // charge by id (8.29 against 8.30 at ~1,100 charges), so a connection could plan the retrieve
    // on the wrong index and keep that plan (scripts/bench/HISTORY.md, "bench:api: a retrieve of one statement").
    await sql`ANALYZE`.execute(store.db);

    const phases: Phase[] = [];
    const pid = server.child.pid!;
    phases.push(await http('HTTP charges.create', pid, create));
    phases.push(await http('HTTP charges.retrieve', pid, { url: `${apibase}/charges/${charge.id!}`, headers }));
    phases.push(await http('HTTP charges.list', pid, { url: `${apibase}/charges`, headers }));
    server.child.kill('SIGTERM');
    await server.exited;
    server = undefined;

    // The same operation in this process: no HTTP, no authentication, no rate limit.
    const input = { amount: String(AMOUNT), currency: 'jpy', customer };
    phases.push(await concurrent('in-process charges.create', async () => void (await runOperation(ctx, caller, 'charges.create', input))));

    // The ceiling: the operation's INSERTs, one transaction per charge, rows copied from the engine's.
    const pool = new pg.Pool({ connectionString: url, max: POOL_SIZE, options: '-c TimeZone=UTC' });
    // An idle connection's error (the server ending it) is reported, not left to crash the run.
    pool.on('error', (error) => log(`plain-SQL ceiling: an idle connection failed: ${error.message}`));
    try {
      const template = await ceilingTemplate(pool, charge.id!);
      let n = 0;
      phases.push(
        await concurrent('plain-SQL ceiling', async () => {
          n += 1;
          const chargeId = `ch_ceiling_${process.pid}_${n}`;
          const eventId = `evnt_ceiling_${process.pid}_${n}`;
          const client = await pool.connect();
          try {
            await client.query('BEGIN');
            await client.query(template.intent.insert, [chargeId, ...template.intent.values]);
            await client.query(template.charge.text, [chargeId, ...template.charge.values]);
            await client.query(template.event.text, [eventId, chargeId, ...template.event.values]);
            await client.query(template.intent.drop, [chargeId]);
            await client.query('COMMIT');
          } catch (error) {
            await client.query('ROLLBACK').catch(() => undefined);
            throw error;
          } finally {
            client.release();
          }
        }),
      );
    } finally {
      await pool.end();
    }

    printTable(phases);
    log(`CPU ms/req: the server process's (HTTP) or this process's (in-process, ceiling: the client side only); PG CPU ms/req: PostgreSQL's processes on this machine; load CPU ms/req: autocannon's (this process); load average now ${loadavg()[0]!.toFixed(1)}`);
    const [create_, retrieve, , inProcess, ceiling] = phases as [Phase, Phase, Phase, Phase, Phase];
    const targets: [string, string, boolean][] = [
      ['HTTP create / plain-SQL ceiling ≥ 0.5', (create_.perSecond / ceiling.perSecond).toFixed(2), create_.perSecond / ceiling.perSecond >= 0.5],
      ['HTTP create / in-process ≥ 0.6', (create_.perSecond / inProcess.perSecond).toFixed(2), create_.perSecond / inProcess.perSecond >= 0.6],
      [`HTTP create p99 ≤ 50 ms at ${CONNECTIONS} connections`, `${create_.p99.toFixed(1)} ms`, create_.p99 <= 50],
      ['HTTP retrieve / HTTP create ≥ 5', (retrieve.perSecond / create_.perSecond).toFixed(2), retrieve.perSecond / create_.perSecond >= 5],
      ['no errors', String(phases.reduce((sum, p) => sum + p.errors, 0)), phases.every((p) => p.errors === 0)],
    ];
    for (const [target, value, met] of targets) log(`${met ? 'pass' : 'FAIL'}  ${target.padEnd(44)} ${value}`);
    log(`in-process create / plain-SQL ceiling: ${ceilingRatioLine(inProcess.perSecond / ceiling.perSecond)}`);
  } finally {
    if (server !== undefined) {
      server.child.kill('SIGKILL');
      await server.exited;
    }
    await store.close();
    if (!args.keep) await admin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    else log(`kept database ${name}`);
  }
}

/**
 * The statements of the writes one `charges.create` makes, with a new id as $1 (and the event's
 * charge id as $2): its create intent written (a network claim on the charge whose recovery point is
 * the authorization request, create-intents.ts) and dropped, the charge as the engine left it (settled: fee, term)
 * and its event.
 */
async function ceilingTemplate(
  pool: pg.Pool,
  chargeId: string,
): Promise<{ intent: { insert: string; values: unknown[]; drop: string }; charge: { text: string; values: unknown[] }; event: { text: string; values: unknown[] } }> {
  const statement = async (table: string, where: string, id: string, ids: readonly string[]) => {
    const row = (await pool.query(`SELECT * FROM ${table} WHERE ${where} = $1`, [id])).rows[0] as Record<string, unknown> | undefined;
    if (row === undefined) throw new Error(`no ${table} row for ${id}`);
    // Columns the database fills itself (identity, generated) are left to it, as the engine does.
    const own = await pool.query(`SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND (is_identity = 'YES' OR is_generated = 'ALWAYS')`, [table]);
    const filled = new Set(own.rows.map((r: { column_name: string }) => r.column_name));
    const columns = Object.keys(row).filter((c) => !ids.includes(c) && !filled.has(c));
    const all = [...ids, ...columns];
    const text = `INSERT INTO ${table} (${all.map((c) => `"${c}"`).join(', ')}) VALUES (${all.map((_, i) => `$${i + 1}`).join(', ')})`;
    return { text, values: columns.map((c) => (row[c] !== null && typeof row[c] === 'object' && !(row[c] instanceof Date) ? JSON.stringify(row[c]) : row[c])) };
  };
  const eventId = (await pool.query(`SELECT event_id FROM events WHERE resource_id = $1 AND type = 'charge.succeeded'`, [chargeId])).rows[0]?.event_id as string | undefined;
  if (eventId === undefined) throw new Error(`no charge.succeeded event for ${chargeId}`);
  // The intent is gone once the charge is written: its row rebuilt as writeCreateIntent writes it.
  const card = (await pool.query(`SELECT c.fingerprint, c.exp_month, c.exp_year, ch.livemode, ch.amount, ch.created_at FROM charges ch JOIN cards c USING (account_id, livemode, card_id) WHERE ch.charge_id = $1`, [chargeId])).rows[0] as
    | { fingerprint: string; exp_month: number; exp_year: number; livemode: boolean; amount: number; created_at: Date }
    | undefined;
  if (card === undefined) throw new Error(`no card for ${chargeId}`);
  const at = card.created_at.toISOString();
  const request = { reference: chargeId, fingerprint: card.fingerprint, expMonth: card.exp_month, expYear: card.exp_year, amount: card.amount, currency: 'jpy', livemode: card.livemode, at, kind: 'charge' };
  const intent = {
    insert: `INSERT INTO network_claims (resource_id, account_id, livemode, resource, operation, recovery, claimed_at, lease_until) VALUES ($1, $2, $3, 'charge', 'charges.create', $4, $5, $6)`,
    values: [ACCOUNT, card.livemode, JSON.stringify({ authorizations: [request], token: null }), card.created_at, new Date(card.created_at.getTime() + 60_000)],
    drop: `DELETE FROM network_claims WHERE account_id = '${ACCOUNT}' AND livemode = ${card.livemode} AND resource = 'charge' AND resource_id = $1`,
  };
  return { intent, charge: await statement('charges', 'charge_id', chargeId, ['charge_id']), event: await statement('events', 'event_id', eventId, ['event_id', 'resource_id']) };
}

await main();
