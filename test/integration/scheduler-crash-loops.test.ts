/**
 * The scheduler as an operator meets it: workers killed again and again in the middle of
 * a slot, and commands stopped politely with SIGTERM or SIGINT in the middle of a batch. Real
 * processes on PostgreSQL (PGlite lives inside one process):
 *
 * - the killed attempts run one tick of a real job in test/support/renewal-worker-process.ts, at
 *   a fixed instant that also drives their leases, so a take-over needs no waiting;
 * - the last word is the real `kessai` command, whose leases follow the real clock: the slots are
 *   therefore in the past of any real clock (2020), where the killed workers' leases have lapsed;
 * - the webhook delivery slot's crash loop is real `kessai worker --once --at SLOT` processes
 *   throughout, sending to a real receiver on 127.0.0.1; each starts with its wall clock a lease
 *   (and a second) ahead of the one before it (clock-ahead.mjs), so every take-over finds the dead
 *   worker's real-time leases lapsed without waiting for them.
 */
import { fileURLToPath } from 'node:url';
import { sql, type Kysely } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/schema';
import { seedDueSubscriptions, tallyRenewals } from '../support/renewal-seed';
import { createTestDatabase, isPostgres, type TestDatabase } from '../support/database';
import { spawnKessai, spawnWorker, until, type SpawnedWorker } from '../support/spawn-worker';
import { startReceiver, type Receiver } from '../support/webhook-receiver';

const MINUTE = 60_000;
/** Slot 0 of these tests: 2020-01-01 09:00 JST, before any real clock the tests run under. */
const SLOT = new Date('2020-01-01T00:00:00.000Z');
const at = (minutes: number): Date => new Date(SLOT.getTime() + minutes * MINUTE);
const RENEW = 'subscriptions.renew';

const workerScript = fileURLToPath(new URL('../support/renewal-worker-process.ts', import.meta.url));

let database: TestDatabase;
let db: Kysely<Database>;

beforeEach(async () => {
  database = await createTestDatabase();
  db = database.store.db;
});
afterEach(async () => database?.drop());

const kessai = (args: readonly string[], clockAheadMs?: number): SpawnedWorker =>
  spawnKessai(args, { DATABASE_URL: database.url!, KESSAI_LOG_LEVEL: 'warn' }, clockAheadMs === undefined ? {} : { clockAheadMs });

/** One attempt of slot 0 by a worker killed with SIGKILL once `killAt` shows on its stdout. */
async function killedAttempt(k: number, env: Record<string, string>, killAt: string): Promise<void> {
  const victim = spawnWorker(workerScript, database.url!, { ...env, KESSAI_OWNER: `victim-${k}`, KESSAI_AT: at(6 * k).toISOString() });
  await until(victim, () => victim.output().includes(killAt));
  victim.child.kill('SIGKILL');
  expect(await victim.exited).toMatchObject({ signal: 'SIGKILL' });
}

async function ledgerRow(job: string, slot: Date) {
  return db.selectFrom('job_runs').select(['status', 'attempt', 'attempts_without_progress', 'progress_attempt', 'counts', 'error']).where('job', '=', job).where('slot', '=', slot).executeTakeFirst();
}

describe.runIf(isPostgres())('a slot under a crash loop', () => {
  it('five SIGKILLed attempts that each committed batches: the slot is not abandoned, completes, and its counts are the rows written', async () => {
    await seedDueSubscriptions(db, { count: 600, dueAt: SLOT });
    // Killed while batch 3 waits for the card network: batches 1 and 2 of every attempt committed.
    const env = { KESSAI_BATCH_SIZE: '40', KESSAI_PAUSE_MS: '200', KESSAI_LEASE_MS: String(5 * MINUTE) };
    for (let k = 0; k < 5; k += 1) {
      await killedAttempt(k, env, 'batch 3 authorizing');
      const written = await tallyRenewals(db, SLOT);
      expect(written).toMatchObject({ renewed: 80 * (k + 1), charges: 80 * (k + 1), charged_twice: 0, mismatched: 0 });
      // Counted in the batches' own transactions: a crash loses none of the counts.
      expect(await ledgerRow(RENEW, SLOT)).toMatchObject({ status: 'running', attempt: k + 1, attempts_without_progress: 0, counts: { renewed: written.renewed, batches: 2 * (k + 1) } });
    }

    // The operator's next `worker --once` takes the slot over (attempt 6) and finishes it.
    const last = kessai(['worker', '--once', '--at', at(30).toISOString(), '--batch-size', '40']);
    expect(await last.exited, last.errors()).toEqual({ code: 0, signal: null });
    expect(last.output()).toContain(
      `${RENEW} @ ${SLOT.toISOString()} (taken over from a worker that stopped, attempt 6): succeeded {"renewed":200,"failed":0,"trials_ended":0,"deleted":0,"batches":5}; ` +
        'slot total over all attempts {"renewed":600,"failed":0,"trials_ended":0,"deleted":0,"batches":15}\n',
    );
    expect(last.output()).not.toContain('ABANDONED');
    expect(await tallyRenewals(db, SLOT)).toEqual({ subscriptions: 600, renewed: 600, charges: 600, charged_twice: 0, mismatched: 0, renewed_events: 600, charge_events: 600 });
    expect(await ledgerRow(RENEW, SLOT)).toMatchObject({ status: 'succeeded', attempt: 6, attempts_without_progress: 0, counts: { renewed: 600, failed: 0, trials_ended: 0, deleted: 0, batches: 15 } });
  });

  it('five SIGKILLed attempts that committed nothing: the slot is abandoned, logged at error level, `worker --once` exits non-zero; `jobs list` shows it and `jobs run` runs it again', async () => {
    await seedDueSubscriptions(db, { count: 120, dueAt: SLOT });
    // Killed while batch 1 waits for the card network: nothing of any attempt committed.
    const env = { KESSAI_BATCH_SIZE: '40', KESSAI_PAUSE_MS: '60000', KESSAI_LEASE_MS: String(5 * MINUTE) };
    for (let k = 0; k < 5; k += 1) {
      await killedAttempt(k, env, 'batch 1 authorizing');
      // Each take-over counted the attempt before it; the last one is counted by whoever finds it lapsed.
      expect(await ledgerRow(RENEW, SLOT)).toMatchObject({ status: 'running', attempt: k + 1, attempts_without_progress: k, counts: null });
    }
    expect((await tallyRenewals(db, SLOT)).renewed).toBe(0);

    const last = kessai(['worker', '--once', '--at', at(30).toISOString(), '--batch-size', '40']);
    expect(await last.exited, last.errors()).toEqual({ code: 1, signal: null });
    expect(last.output()).toContain(
      `${RENEW} @ ${SLOT.toISOString()}: ABANDONED: the worker died on attempt 5 without committing a batch: 5 attempts in a row made no progress; ` +
        `re-run it with: kessai jobs run ${RENEW} --at ${SLOT.toISOString()}\n`,
    );
    const logged = last
      .errors()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(logged).toContainEqual(expect.objectContaining({ level: 50, job: RENEW, slot: SLOT.toISOString(), attempt: 5, attempts_without_progress: 5, msg: expect.stringMatching(/^slot abandoned: /) }));
    const abandoned = await ledgerRow(RENEW, SLOT);
    expect(abandoned).toMatchObject({ status: 'abandoned', attempt: 5, attempts_without_progress: 5 });
    expect(abandoned?.error).toMatch(/^the lease lapsed on attempt 5 before it committed a batch \(5 attempts in a row without progress\)/);
    // The next slot took everything due as of its own instant, slot 0's subscriptions included.
    expect(await tallyRenewals(db, SLOT)).toMatchObject({ renewed: 120, charges: 120, charged_twice: 0 });

    const listed = kessai(['jobs', 'list', '--at', at(30).toISOString()]);
    expect(await listed.exited, listed.errors()).toEqual({ code: 0, signal: null });
    expect(listed.output()).toContain(`  ABANDONED: 1 slot(s) given up; run each again with: kessai jobs run ${RENEW} --at SLOT\n    ${SLOT.toISOString()}  attempt 5, 5 in a row without progress: the lease lapsed`);

    const rerun = kessai(['jobs', 'run', RENEW, '--at', SLOT.toISOString()]);
    expect(await rerun.exited, rerun.errors()).toEqual({ code: 0, signal: null });
    expect(rerun.output()).toBe(`${RENEW} @ ${SLOT.toISOString()} (re-run of an abandoned slot): succeeded {"renewed":0,"failed":0,"trials_ended":0,"deleted":0,"batches":0}\n`);
    expect(await ledgerRow(RENEW, SLOT)).toMatchObject({ status: 'succeeded', attempt: 6, attempts_without_progress: 0 });
  });

  it('hold releases: counts after a crash and a take-over equal the holds released', async () => {
    await seedDueHolds(db, 300, SLOT);
    const env = { KESSAI_JOB: 'charges.expire_holds', KESSAI_BATCH_SIZE: '25', KESSAI_PAUSE_MS: '200', KESSAI_LEASE_MS: String(5 * MINUTE) };
    await killedAttempt(0, env, 'batch 4 releasing');
    expect(await releasedHolds()).toBe(75);
    expect(await ledgerRow('charges.expire_holds', SLOT)).toMatchObject({ status: 'running', attempt: 1, counts: { released: 75, batches: 3 } });
    const rescuer = spawnWorker(workerScript, database.url!, { ...env, KESSAI_PAUSE_MS: '0', KESSAI_OWNER: 'rescuer', KESSAI_AT: at(6).toISOString() });
    expect(await rescuer.exited, rescuer.errors()).toEqual({ code: 0, signal: null });
    expect(await releasedHolds()).toBe(300);
    expect(await ledgerRow('charges.expire_holds', SLOT)).toMatchObject({ status: 'succeeded', attempt: 2, counts: { released: 300, batches: 12 } });
  });
});

describe.runIf(isPostgres())('the webhook delivery slot under a crash loop', () => {
  const DELIVER = 'webhooks.deliver';
  /** The shortest lease the worker takes: the slot's and every delivery's, in real time. */
  const LEASE_SECONDS = 10;
  /** Worker k runs k leases and k seconds ahead: every lease of the workers before it has lapsed. */
  const deliverer = (k: number): SpawnedWorker =>
    kessai(['worker', '--once', '--at', SLOT.toISOString(), '--lease-seconds', String(LEASE_SECONDS)], k * (LEASE_SECONDS + 1) * 1000);

  /** Six `kessai` processes start one after another (seconds each on a loaded machine). */
  const CRASH_LOOP_TIMEOUT_MS = 120_000;

  let receiver: Receiver;
  beforeEach(async () => {
    receiver = await startReceiver();
  });
  afterEach(async () => receiver?.close());

  it('five workers SIGKILLed while delivering, each after recording a batch: the slot completes; every event arrives, each delivery is recorded once, at the slot', async () => {
    const n = 1_500;
    const eventIds = await seedDueDeliveries(db, n, receiver.url, SLOT);
    // Each worker gets 300 answers, then none: its first flush (256 outcomes) is recorded, its next
    // 44 wait in its buffer, and its following sends hang here — sent, and never recorded.
    let answers = 300;
    let answered = 0;
    let hanging = 0;
    receiver.respond = (_request, res) => {
      if (answered >= answers) {
        hanging += 1;
        return 'hang';
      }
      answered += 1;
      res.writeHead(200);
      res.end();
    };
    for (let k = 0; k < 5; k += 1) {
      answered = 0;
      hanging = 0;
      const before = (await deliveryTally(SLOT)).recorded;
      const victim = deliverer(k);
      await until(victim, async () => hanging > 0 && (await deliveryTally(SLOT)).recorded > before);
      victim.child.kill('SIGKILL');
      expect(await victim.exited).toMatchObject({ signal: 'SIGKILL' });
      // The recorded flush was one of the slot's batches: progress, and its counts, in the ledger.
      const { recorded } = await deliveryTally(SLOT);
      expect(await ledgerRow(DELIVER, SLOT)).toMatchObject({ status: 'running', attempt: k + 1, attempts_without_progress: 0, progress_attempt: k + 1, counts: { delivered: recorded } });
    }

    // A sixth worker at the same instant takes the slot over and finishes it.
    answers = Number.POSITIVE_INFINITY;
    const last = deliverer(5);
    expect(await last.exited, last.errors()).toEqual({ code: 0, signal: null });
    const total = `{"delivered":${n},"retrying":0,"given_up":0,"released":0}`;
    expect(last.output()).toMatch(
      new RegExp(`^${DELIVER} @ ${SLOT.toISOString()} \\(taken over from a worker that stopped, attempt 6\\): succeeded \\{"delivered":\\d+,"retrying":0,"given_up":0,"released":0\\}; slot total over all attempts ${total.replace(/[{}]/g, '\\$&')}$`, 'm'),
    );
    expect(last.output()).not.toContain('ABANDONED');
    expect(await ledgerRow(DELIVER, SLOT)).toMatchObject({ status: 'succeeded', attempt: 6, attempts_without_progress: 0, counts: JSON.parse(total) });
    // One recorded attempt per delivery, each the first, each at the slot's instant.
    expect(await deliveryTally(SLOT)).toEqual({ delivered: n, attempts: n, recorded: n, first_at_slot: n, pending_webhooks: 0 });
    const ids = receivedEventIds(receiver);
    expect(new Set(ids)).toEqual(new Set(eventIds));
    // At least once: what each dead worker sent and had not recorded was sent again.
    expect(ids.length).toBeGreaterThan(n);
  }, CRASH_LOOP_TIMEOUT_MS);

  it('five workers SIGKILLed while delivering, none having recorded a delivery: each take-over at the same instant sends the dead worker\'s deliveries again at once; the slot is abandoned, `worker --once` exits 1', async () => {
    const eventIds = await seedDueDeliveries(db, 100, receiver.url, SLOT);
    receiver.respond = () => 'hang';
    // 16 at once to one endpoint, in the order the events were written: always these 16.
    const held = new Set(eventIds.slice(0, 16));
    for (let k = 0; k < 5; k += 1) {
      const seen = receiver.received.length;
      const victim = deliverer(k);
      await until(victim, () => receiver.received.length > seen);
      victim.child.kill('SIGKILL');
      expect(await victim.exited).toMatchObject({ signal: 'SIGKILL' });
      // From the second worker on, the ones the worker before it held under lapsed leases.
      expect(receivedEventIds(receiver).slice(seen).filter((id) => !held.has(id))).toEqual([]);
      expect(await ledgerRow(DELIVER, SLOT)).toMatchObject({ status: 'running', attempt: k + 1, attempts_without_progress: k, progress_attempt: null, counts: null });
    }
    expect((await deliveryTally(SLOT)).recorded).toBe(0);

    const last = deliverer(5);
    expect(await last.exited, last.errors()).toEqual({ code: 1, signal: null });
    expect(last.output()).toContain(
      `${DELIVER} @ ${SLOT.toISOString()}: ABANDONED: the worker died on attempt 5 without committing a batch: 5 attempts in a row made no progress; ` +
        `re-run it with: kessai jobs run ${DELIVER} --at ${SLOT.toISOString()}\n`,
    );
    const abandoned = await ledgerRow(DELIVER, SLOT);
    expect(abandoned).toMatchObject({ status: 'abandoned', attempt: 5, attempts_without_progress: 5 });
    expect(abandoned?.error).toMatch(/^the lease lapsed on attempt 5 before it committed a batch \(5 attempts in a row without progress\)/);
    expect(await deliveryTally(SLOT)).toMatchObject({ delivered: 0, recorded: 0, pending_webhooks: 100 });
  }, CRASH_LOOP_TIMEOUT_MS);
});

describe.runIf(isPostgres())('SIGTERM and SIGINT mid-batch', () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    for (const command of [
      { name: 'worker --once', args: ['worker', '--once', '--at', SLOT.toISOString()] },
      { name: 'jobs run', args: ['jobs', 'run', RENEW, '--at', SLOT.toISOString()] },
    ]) {
      it(`${signal} to \`${command.name}\`: the batch finishes, the slot is pending with the attempt uncounted, exit 0${signal === 'SIGTERM' ? '; the next run completes it' : ''}`, async () => {
        await seedDueSubscriptions(db, { count: 3_000, dueAt: SLOT });
        const stopped = await stopMidBatch([...command.args, '--batch-size', '50'], signal);
        expect(stopped.output()).toMatch(new RegExp(`^${RENEW} @ ${SLOT.toISOString()}: stopped after committing \\{"renewed":\\d+,"failed":0,"trials_ended":0,"deleted":0,"batches":\\d+\\}; the slot is pending again and resumes on the next run$`, 'm'));
        const written = await tallyRenewals(db, SLOT);
        // Whole batches, every one counted; some work left for the next run.
        expect(written.renewed % 50).toBe(0);
        expect(written.renewed).toBeGreaterThan(0);
        expect(written.renewed).toBeLessThan(3_000);
        expect(written).toMatchObject({ charges: written.renewed, charged_twice: 0, mismatched: 0 });
        expect(await ledgerRow(RENEW, SLOT)).toMatchObject({ status: 'pending', attempt: 0, attempts_without_progress: 0, counts: { renewed: written.renewed, batches: written.renewed / 50 } });
        if (signal === 'SIGINT') return; // resuming is the same after either signal

        const next = kessai([...command.args, '--batch-size', '50']);
        expect(await next.exited, next.errors()).toEqual({ code: 0, signal: null });
        expect(await tallyRenewals(db, SLOT)).toEqual({ subscriptions: 3_000, renewed: 3_000, charges: 3_000, charged_twice: 0, mismatched: 0, renewed_events: 3_000, charge_events: 3_000 });
        expect(await ledgerRow(RENEW, SLOT)).toMatchObject({ status: 'succeeded', attempt: 1, counts: { renewed: 3_000, batches: 60 } });
      });
    }

    it(`${signal} to \`statements run\`: the term-close batch finishes, its slot is pending, balances.close does not start, exit 0${signal === 'SIGTERM' ? '; the next run completes both' : ''}`, async () => {
      // 2020-02-01 00:00 JST: 1,000 accounts' January terms end.
      const termEnd = new Date('2020-01-31T15:00:00.000Z');
      await seedEndedTerms(db, 1_000, termEnd);
      const args = ['statements', 'run', '--at', '2020-02-01T09:30', '--batch-size', '5'];
      const stopped = await stopMidBatch(args, signal);
      expect(stopped.output()).toMatch(/^terms\.close @ 2020-01-31T15:00:00\.000Z: stopped after committing \{"terms_closed":\d+,"statements":\d+,"balances_fixed":\d+,"batches":\d+\}; the slot is pending again and resumes on the next run\n$/);
      const closed = await closedTerms(termEnd);
      expect(closed).toBeGreaterThan(0);
      expect(closed).toBeLessThan(1_000);
      // Small accounts share a batch (runBatches): five accounts' one ended term each per batch of 5.
      expect(closed % 5).toBe(0);
      expect(await ledgerRow('terms.close', termEnd)).toMatchObject({ status: 'pending', attempt: 0, counts: { terms_closed: closed, batches: closed / 5 } });
      expect(await ledgerRow('balances.close', termEnd)).toBeUndefined();
      if (signal === 'SIGINT') return; // resuming is the same after either signal

      const next = kessai(args);
      expect(await next.exited, next.errors()).toEqual({ code: 0, signal: null });
      expect(await closedTerms(termEnd)).toBe(1_000);
      expect(await ledgerRow('terms.close', termEnd)).toMatchObject({ status: 'succeeded', attempt: 1, counts: { terms_closed: 1_000, batches: 200 } });
      expect(await ledgerRow('balances.close', termEnd)).toMatchObject({ status: 'succeeded', attempt: 1 });
    });
  }
});

/**
 * Starts the command with debug logs and sends `signal` as soon as its first batch has committed,
 * while later batches run; returns the finished process, which must have exited 0.
 */
async function stopMidBatch(args: readonly string[], signal: NodeJS.Signals): Promise<SpawnedWorker> {
  const proc = spawnKessai([...args, '--log-level', 'debug'], { DATABASE_URL: database.url! });
  await until(proc, () => proc.errors().includes('"msg":"batch committed"'));
  proc.child.kill(signal);
  expect(await proc.exited, proc.errors()).toEqual({ code: 0, signal: null });
  expect(proc.errors()).toContain(`"signal":"${signal}"`);
  return proc;
}

/** `count` uncaptured holds on customers' Visa cards, each lapsing within the hour before `slot`. */
async function seedDueHolds(target: Kysely<Database>, count: number, slot: Date): Promise<void> {
  const created = new Date(slot.getTime() - 8 * 24 * 60 * MINUTE);
  await sql`INSERT INTO accounts (account_id, name, term_cycle, created_at) VALUES ('acct_h', 'Holds', 'monthly', ${created})`.execute(target);
  await sql`
    INSERT INTO charges (account_id, livemode, charge_id, amount, currency, paid, captured, expired_at, card_id, customer_id, fee_rate, metadata,
                         created_at, updated_at, capture_requested, expiry_days, card_funding, card_issuer, authorization_code, authorized_at)
    SELECT 'acct_h', false, 'ch_h' || lpad(i::text, 6, '0'), 1000 + i, 'jpy', true, false, ${slot}::timestamptz - i * interval '1 second',
           'car_h' || i, 'cus_h' || i, 3.00, '{}', ${created}, ${created}, false, 7, 'credit', 'domestic', lpad(i::text, 6, '0'), ${created}
    FROM generate_series(1, ${count}) AS i`.execute(target);
}

async function releasedHolds(): Promise<number> {
  const result = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM charges c
    WHERE c.account_id = 'acct_h' AND c.released_at = c.expired_at
      AND (SELECT count(*) FROM events e WHERE e.account_id = c.account_id AND e.resource_id = c.charge_id AND e.type = 'charge.updated') = 1`.execute(db);
  return result.rows[0]!.n;
}

/** `count` accounts, each with one open monthly term ending at `end`. */
async function seedEndedTerms(target: Kysely<Database>, count: number, end: Date): Promise<void> {
  const start = new Date('2019-12-31T15:00:00.000Z');
  await sql`
    INSERT INTO accounts (account_id, name, term_cycle, created_at)
    SELECT 'acct_t' || lpad(a::text, 5, '0'), 'Terms ' || a, 'monthly', ${start} FROM generate_series(1, ${count}) AS a`.execute(target);
  await sql`
    INSERT INTO terms (account_id, livemode, term_id, cycle, start_at, end_at, created_at)
    SELECT 'acct_t' || lpad(a::text, 5, '0'), false, 'term_t' || a, 'monthly', ${start}, ${end}, ${start} FROM generate_series(1, ${count}) AS a`.execute(target);
}

async function closedTerms(end: Date): Promise<number> {
  const result = await sql<{ n: number }>`SELECT count(*)::int AS n FROM terms WHERE end_at = ${end} AND closed`.execute(db);
  return result.rows[0]!.n;
}

/**
 * `count` events of one account, each with one delivery to one endpoint at `url`, due at `slot`;
 * returns the event ids in the order they were written.
 */
async function seedDueDeliveries(target: Kysely<Database>, count: number, url: string, slot: Date): Promise<string[]> {
  const created = new Date(slot.getTime() - 60 * MINUTE);
  await sql`INSERT INTO accounts (account_id, name, term_cycle, created_at) VALUES ('acct_w', 'Webhooks', 'monthly', ${created})`.execute(target);
  await sql`
    INSERT INTO webhook_endpoints (account_id, endpoint_id, livemode, url, token, created_at, updated_at)
    VALUES ('acct_w', 'we_w', false, ${`${url}/hooks`}, 'whook_w', ${created}, ${created})`.execute(target);
  await sql`
    INSERT INTO events (account_id, event_id, livemode, api_version, type, object_type, resource_id, data, created_at, pending_webhooks)
    SELECT 'acct_w', 'evnt_w' || lpad(i::text, 5, '0'), false, 'v1', 'customer.created', 'customer', 'cus_w' || i,
           json_build_object('id', 'cus_w' || i, 'object', 'customer', 'livemode', false), ${slot}, 1
    FROM generate_series(1, ${count}) AS i`.execute(target);
  await sql`
    INSERT INTO webhook_deliveries (account_id, endpoint_id, event_id, next_attempt_at, created_at)
    SELECT 'acct_w', 'we_w', event_id, ${slot}, ${slot} FROM events WHERE account_id = 'acct_w'`.execute(target);
  const events = await sql<{ event_id: string }>`SELECT event_id FROM events WHERE account_id = 'acct_w' ORDER BY seq`.execute(target);
  return events.rows.map((row) => row.event_id);
}

/**
 * Where the deliveries stand: `delivered` deliveries, their `attempts` summed, the attempts
 * `recorded` (webhook_attempts), how many of those are a successful first attempt at `slot`, and
 * the events' `pending_webhooks` summed.
 */
async function deliveryTally(slot: Date) {
  const result = await sql<{ delivered: number; attempts: number; recorded: number; first_at_slot: number; pending_webhooks: number }>`
    SELECT (SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered')::int AS delivered,
           (SELECT coalesce(sum(attempts), 0) FROM webhook_deliveries)::int AS attempts,
           (SELECT count(*) FROM webhook_attempts)::int AS recorded,
           (SELECT count(*) FROM webhook_attempts WHERE attempt = 1 AND succeeded AND attempted_at = ${slot})::int AS first_at_slot,
           (SELECT coalesce(sum(pending_webhooks), 0) FROM events)::int AS pending_webhooks`.execute(db);
  return result.rows[0]!;
}

/** The event ids of every request the receiver got, in order of arrival. */
function receivedEventIds(receiver: Receiver): string[] {
  return receiver.received.map((request) => (JSON.parse(request.body) as { id: string }).id);
}
