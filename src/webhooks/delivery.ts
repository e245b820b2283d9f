/**
 * Webhook delivery (v2 §6.2, service rules §5). Each event's delivery rows are written
 * with the event (events/outbox.ts). A delivery pass:
 *
 * 1. claims due deliveries in a batch (one UPDATE … FOR UPDATE SKIP LOCKED that takes a lease and
 *    bumps the row's `claims` fence) and COMMITS the claim;
 * 2. sends them outside any transaction, many at once through a bounded pool (at most
 *    `concurrency` in flight, `perEndpoint` per endpoint, so one slow endpoint never fills it);
 * 3. records outcomes set-based, a flush of whatever finished, one transaction: only a claim that
 *    still holds its row (same owner and `claims`) records, so an attempt is recorded once.
 *
 * Success is a 2xx answer within the timeout; anything else is retried 3 minutes after the
 * attempt, at most 3 retries (4 attempts), then the delivery is given up. `pending_webhooks` of
 * the event drops by one per delivered endpoint and never for a given-up one.
 *
 * At least once: a worker that dies after sending and before recording leaves a lease that
 * lapses; the delivery is claimed again and sent again (receivers dedupe by event id). Two live
 * workers never claim the same row, so they never send the same attempt twice.
 *
 * Leases follow the lease clock (SlotRun.leaseClock: real time in a worker, `--once --at`
 * included), attempts the engine clock: a take-over at the same engine instant resends what a dead
 * worker held as soon as its leases lapse, dated at that instant. In the `webhooks.deliver` job
 * each flush that records attempts is one of the slot's batches, so a crash loop that keeps
 * delivering completes its slot (docs/decisions/webhooks.md, "Webhook delivery: recorded deliveries are the
 * slot's progress").
 *
 * A database node that cannot be reached (Citus, a worker node down) stops only its accounts: the
 * listing of accounts with due deliveries falls back to node by node (listOnReachableNodes), an
 * account whose claim fails as unreachable is left out of the pass, and a flush that fails as
 * unreachable is recorded again account by account, the unreachable accounts' outcomes left
 * unrecorded (their leases lapse and those deliveries are sent again). Their deliveries stay due,
 * so a later pass — the next slot's — takes them; the other accounts' are delivered meanwhile.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema';
import { instantFromEpochMs } from '../db/epoch-ms';
import { bulkColumns } from '../db/bulk-rows';
import { toError } from '../domain/errors';
import type { Clock } from '../engine/clock';
import type { Context, WebhookResult, WebhookTransport } from '../engine/context';
import { dueAccounts, listOnReachableNodes } from '../engine/account-batches';
import { isDatabaseUnavailable } from '../db/errors';
import { ownClockInScope, LIVE_BOOK, type JobScope } from '../test-clocks/clock-scope';
import type { SlotRun } from '../engine/job';
import { EVENT_TEXT_SQL, renderEvent } from '../events/outbox';
import { endpointForSending } from './endpoints';
import { httpWebhookTransport, simulatedWebhookTransport } from './transport';

/** Attempts of one delivery: the first and 3 retries (v2 §6.2, §8). */
export const MAX_WEBHOOK_ATTEMPTS = 4;
/** Delay from a failed attempt to the next (v2 §8: every 3 minutes). */
export const WEBHOOK_RETRY_DELAY_MS = 3 * 60 * 1000;

export interface DeliveryPassOptions {
  /** Names this pass's claims (lease_owner), e.g. `host:pid`. */
  readonly owner: string;
  /** Aborted: claim nothing more, finish what is in flight, record it, release the rest. */
  readonly signal?: AbortSignal;
  /**
   * The slot run this pass is (the `webhooks.deliver` job): each flush is then one of its batches
   * (recordFlush) and the leases follow its lease clock. Without it (the running worker's poller,
   * benchmarks) flushes are recorded alone and leases follow the context's clock.
   */
  readonly run?: SlotRun;
  /** Requests in flight at most (default 256). */
  readonly concurrency?: number;
  /** Requests in flight per endpoint at most (default 16). */
  readonly perEndpoint?: number;
  /** Deliveries claimed per statement at most (default: the engine's batch size, at most 1,000). */
  readonly claimSize?: number;
  /** Called with the number of outcomes each flush recorded (benchmarks, tests). */
  readonly onRecorded?: (outcomes: readonly RecordedOutcome[]) => void;
}

export interface DeliveryCounts {
  readonly delivered: number;
  readonly retrying: number;
  readonly given_up: number;
  /** Claimed but not sent (their endpoint failed slowly earlier in the pass, or the pass stopped). */
  readonly released: number;
}

interface Claimed {
  readonly accountId: string;
  readonly endpointId: string;
  readonly eventId: string;
  readonly claims: number;
  readonly attempt: number;
  /** When the attempt came due (epoch ms). */
  readonly dueAt: number;
  readonly url: string;
  readonly token: string;
  readonly body: string;
}

interface Outcome {
  readonly claim: Claimed;
  /** null: released unsent. */
  readonly result: WebhookResult | null;
  /** When the attempt was made (engine clock, epoch ms). */
  readonly at: number;
}

export interface RecordedOutcome {
  readonly endpointId: string;
  readonly eventId: string;
  readonly attempt: number;
  readonly ok: boolean;
  readonly durationMs: number;
}

let defaultHttp: WebhookTransport | undefined;

/** The context's transport, else the process's HTTP transport (or, in simulation, one that answers 200). */
export function webhookTransportOf(ctx: Context): WebhookTransport {
  if (ctx.webhookTransport) return ctx.webhookTransport;
  if (ctx.config.simulation) return simulatedWebhookTransport();
  return (defaultHttp ??= httpWebhookTransport());
}

/** Closes the process's default HTTP transport (its keep-alive connections), if it was opened. */
export async function closeDefaultWebhookTransport(): Promise<void> {
  const transport = defaultHttp;
  defaultHttp = undefined;
  await transport?.close();
}

/**
 * The due-delivery predicate on a `webhook_deliveries` row `d` (for claimDue's list of accounts):
 * due by the engine clock's `now`, and not leased, or its lease lapsed by the lease clock's `leaseNow`.
 */
const dueDelivery = (scope: JobScope, now: Date, leaseNow: Date) =>
  sql`d.status = 'pending' AND d.next_attempt_at <= ${now} AND (d.lease_until IS NULL OR d.lease_until < ${leaseNow}) AND ${ownClockInScope(scope, 'd')}`;

/**
 * Claims up to `limit` due deliveries of one account, not of the `excluded` endpoints, under a
 * lease on `leaseClock`; commits at once. Account by account like every job: on Citus
 * the locking statement is routed to the account's shard.
 */
async function claimDue(ctx: Context, leaseClock: Clock, accountId: string, owner: string, limit: number, excluded: readonly string[]): Promise<Claimed[]> {
  const now = ctx.clock.now();
  const leaseNow = leaseClock.now();
  const leaseUntil = new Date(leaseNow.getTime() + ctx.config.leaseMs);
  const claimed = await sql<{ account_id: string; endpoint_id: string; event_id: string; claims: number; attempts: number; next_attempt_at: Date; url: string; token: string }>`
    UPDATE webhook_deliveries d SET claims = d.claims + 1, lease_owner = ${owner}, lease_until = ${leaseUntil}
    FROM webhook_endpoints w
    -- The rows locked by the subquery, by their physical address (a TID scan): joining them back by
    -- key let the planner hash the whole table, a cost that grew with every delivery recorded.
    WHERE d.ctid = ANY(ARRAY(
        SELECT dd.ctid FROM webhook_deliveries dd
        JOIN webhook_endpoints w ON w.account_id = dd.account_id AND w.endpoint_id = dd.endpoint_id AND w.status = 'enabled'
        WHERE dd.account_id = ${accountId} AND dd.status = 'pending' AND dd.next_attempt_at <= ${now} AND (dd.lease_until IS NULL OR dd.lease_until < ${leaseNow})
          AND dd.endpoint_id <> ALL(${excluded}::text[]) AND ${ownClockInScope(ctx, 'dd')}
        ORDER BY dd.next_attempt_at
        LIMIT ${limit}
        FOR UPDATE OF dd SKIP LOCKED))
      AND d.account_id = ${accountId} AND w.account_id = d.account_id AND w.endpoint_id = d.endpoint_id
    RETURNING d.account_id, d.endpoint_id, d.event_id, d.claims, d.attempts, d.next_attempt_at, w.url, w.token`.execute(ctx.db);
  if (claimed.rows.length === 0) return [];
  // The events' text is read by a SELECT of its own, not in the UPDATE's RETURNING: Citus allows
  // only immutable functions in a modifying statement, and the text formats instants (to_char).
  const events = await sql<{ event_id: string; seq: number; body: string }>`
    SELECT e.event_id, e.seq, ${EVENT_TEXT_SQL} AS body FROM events e
    WHERE e.account_id = ${accountId} AND e.event_id = ANY(${[...new Set(claimed.rows.map((row) => row.event_id))]}::text[])`.execute(ctx.db);
  const eventOf = new Map(events.rows.map((row) => [row.event_id, row]));
  const result = { rows: claimed.rows.map((row) => ({ ...row, seq: eventOf.get(row.event_id)!.seq, body: eventOf.get(row.event_id)!.body })) };
  // Sent in a fixed order, each endpoint's events in the order they were written (the simulation's
  // outcomes must not depend on the server's row order; receivers still get no order guarantee).
  const rows = result.rows.sort((a, b) => cmp(a.account_id, b.account_id) || cmp(a.endpoint_id, b.endpoint_id) || a.next_attempt_at.getTime() - b.next_attempt_at.getTime() || a.seq - b.seq);
  return rows.map((row) => ({
    accountId: row.account_id,
    endpointId: row.endpoint_id,
    eventId: row.event_id,
    claims: row.claims,
    attempt: row.attempts + 1,
    dueAt: row.next_attempt_at.getTime(),
    url: row.url,
    token: row.token,
    body: row.body,
  }));
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The outcomes of a pass as bulk rows; `t` (the attempt's instant) stays epoch ms in the CTE and is rebuilt where written. */
const OUTCOME_COLUMNS = bulkColumns<Outcome>()({
  a: ['text', (o) => o.claim.accountId],
  w: ['text', (o) => o.claim.endpointId],
  e: ['text', (o) => o.claim.eventId],
  k: ['int', (o) => o.claim.claims],
  r: ['boolean', (o) => o.result === null],
  ok: ['boolean', (o) => o.result?.ok ?? false],
  s: ['int', (o) => o.result?.status ?? null],
  err: ['text', (o) => o.result?.error ?? null],
  ms: ['int', (o) => o.result?.durationMs ?? 0],
  t: ['bigint', 'at'],
});

type FlushCounts = DeliveryCounts & { readonly recorded: RecordedOutcome[] };

/**
 * Records one flush of outcomes, retried whole on a deadlock with another worker's flush (two
 * flushes touching the same events' `pending_webhooks`); past three tries the leases lapse and the
 * deliveries are sent again (at least once).
 *
 * In a slot run the flush is one of the run's batches, made as runBatches makes every job's: one
 * transaction, the claim asserted first (a run that lost its slot records nothing; the deliveries
 * are sent again), the batch, its counts recorded last. So a flush that recorded attempts is
 * progress under the rule every job's committed batch follows; one that only gave back unsent
 * claims moved no delivery forward and is not.
 */
async function recordFlush(ctx: Context, owner: string, outcomes: readonly Outcome[], run: SlotRun | undefined): Promise<FlushCounts> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      if (run === undefined) return await ctx.db.transaction().execute((trx) => recordOutcomes(trx, owner, outcomes));
      return await ctx.db.transaction().execute(async (trx) => {
        await run.assertClaim(trx);
        const flushed = await recordOutcomes(trx, owner, outcomes);
        const { delivered, retrying, given_up, released } = flushed;
        if (delivered + retrying + given_up > 0) await run.recordBatch(trx, { delivered, retrying, given_up, released });
        return flushed;
      });
    } catch (error) {
      if ((error as { code?: string }).code !== '40P01' || attempt >= 3) throw error;
    }
  }
}

const NOTHING_RECORDED: FlushCounts = { delivered: 0, retrying: 0, given_up: 0, released: 0, recorded: [] };

/**
 * recordFlush, tolerating accounts whose database node cannot be reached: when the flush fails as
 * unreachable it is made again account by account (each its own flush: on Citus each on its
 * account's node), and an account whose flush still fails so is added to `unreachable` with its
 * outcomes unrecorded — its leases lapse and those deliveries are sent again, as after a crash.
 */
async function recordReachableFlush(ctx: Context, owner: string, outcomes: readonly Outcome[], run: SlotRun | undefined, unreachable: Set<string>): Promise<FlushCounts> {
  try {
    return await recordFlush(ctx, owner, outcomes, run);
  } catch (error) {
    if (!isDatabaseUnavailable(error)) throw error;
    const byAccount = new Map<string, Outcome[]>();
    for (const outcome of outcomes) {
      const list = byAccount.get(outcome.claim.accountId);
      if (list === undefined) byAccount.set(outcome.claim.accountId, [outcome]);
      else list.push(outcome);
    }
    if (byAccount.size === 1) {
      skipUnreachable(ctx, unreachable, [...byAccount.keys()], error);
      return NOTHING_RECORDED;
    }
    const total = { delivered: 0, retrying: 0, given_up: 0, released: 0, recorded: [] as RecordedOutcome[] };
    for (const own of byAccount.values()) {
      const counts = await recordReachableFlush(ctx, owner, own, run, unreachable);
      total.delivered += counts.delivered;
      total.retrying += counts.retrying;
      total.given_up += counts.given_up;
      total.released += counts.released;
      total.recorded.push(...counts.recorded);
    }
    return total;
  }
}

/** Leaves accounts whose database node cannot be reached out of the rest of the pass (logged). */
function skipUnreachable(ctx: Context, unreachable: Set<string>, accounts: readonly string[], error: unknown): void {
  const added = accounts.filter((accountId) => !unreachable.has(accountId));
  if (added.length === 0) return;
  for (const accountId of added) unreachable.add(accountId);
  ctx.log.warn({ err: toError(error), accounts: added.length, account: added[0] }, 'webhook delivery skipped for accounts whose database node is unreachable; their deliveries stay due for a later pass');
}

/** Records outcomes (in the caller's transaction): only a claim that still holds its row records. */
async function recordOutcomes(db: Kysely<Database>, owner: string, outcomes: readonly Outcome[]): Promise<FlushCounts> {
  const o = OUTCOME_COLUMNS.table('o', outcomes);
  // The accounts named on every table written: on Citus the statement then reaches only their
  // shards (a node down that holds none of them does not fail it).
  const accounts = [...new Set(outcomes.map((outcome) => outcome.claim.accountId))];
  const statement = sql<{ account_id: string; endpoint_id: string; event_id: string; attempts: number; status: string; r: boolean; ok: boolean; s: number | null; err: string | null; ms: number; t: string }>`
    WITH o AS (
      SELECT * FROM ${o.from}
    ), u AS (
      UPDATE webhook_deliveries d SET
        attempts = d.attempts + CASE WHEN o.r THEN 0 ELSE 1 END,
        status = CASE WHEN o.r THEN d.status WHEN o.ok THEN 'delivered' WHEN d.attempts + 1 >= ${MAX_WEBHOOK_ATTEMPTS} THEN 'failed' ELSE 'pending' END,
        next_attempt_at = CASE WHEN o.r OR o.ok THEN d.next_attempt_at ELSE ${instantFromEpochMs(`(o.t + ${WEBHOOK_RETRY_DELAY_MS})`)} END,
        lease_owner = NULL, lease_until = NULL,
        last_status = CASE WHEN o.r THEN d.last_status ELSE o.s END,
        last_error = CASE WHEN o.r THEN d.last_error ELSE o.err END,
        delivered_at = CASE WHEN o.ok AND NOT o.r THEN ${instantFromEpochMs('o.t')} ELSE d.delivered_at END
      FROM o
      WHERE d.account_id = ANY(${accounts}::text[]) AND d.account_id = o.a AND d.endpoint_id = o.w AND d.event_id = o.e AND d.claims = o.k AND d.lease_owner = ${owner} AND d.status = 'pending'
      RETURNING d.account_id, d.endpoint_id, d.event_id, d.attempts, d.status, o.r, o.ok, o.s, o.err, o.ms, o.t
    ), pending AS (
      UPDATE events e SET pending_webhooks = e.pending_webhooks - g.n
      FROM (SELECT account_id, event_id, count(*)::int AS n FROM u WHERE ok AND NOT r GROUP BY account_id, event_id) g
      WHERE e.account_id = ANY(${accounts}::text[]) AND e.account_id = g.account_id AND e.event_id = g.event_id
    )
    SELECT account_id, endpoint_id, event_id, attempts, status, r, ok, s, err, ms, t FROM u`;
  const result = await statement.execute(db);
  // The attempts as rows of their own INSERT, in the same transaction: Citus routes each row to its
  // account's shard, where an INSERT … SELECT from the statement's results went through the
  // coordinator to every node.
  const attempts = result.rows.filter((row) => !row.r);
  if (attempts.length > 0) {
    await db
      .insertInto('webhook_attempts')
      .values(attempts.map((row) => ({ account_id: row.account_id, endpoint_id: row.endpoint_id, event_id: row.event_id, attempt: row.attempts, attempted_at: new Date(Number(row.t)), succeeded: row.ok, http_status: row.s, error: row.err, duration_ms: row.ms })))
      .execute();
  }
  const counts = { delivered: 0, retrying: 0, given_up: 0, released: 0, recorded: [] as RecordedOutcome[] };
  for (const row of result.rows) {
    if (row.r) counts.released += 1;
    else if (row.ok) counts.delivered += 1;
    else if (row.status === 'failed') counts.given_up += 1;
    else counts.retrying += 1;
    if (!row.r) counts.recorded.push({ endpointId: row.endpoint_id, eventId: row.event_id, attempt: row.attempts, ok: row.ok, durationMs: row.ms });
  }
  return counts;
}

/**
 * One delivery pass: everything due as of the engine clock's now, until nothing due is left (or
 * the signal stops it). Returns what it recorded.
 */
export async function deliverDueWebhooks(ctx: Context, options: DeliveryPassOptions): Promise<DeliveryCounts> {
  const transport = webhookTransportOf(ctx);
  const concurrency = options.concurrency ?? 256;
  const perEndpoint = options.perEndpoint ?? 16;
  const claimSize = options.claimSize ?? Math.min(ctx.config.batchSize, 1_000);
  const leaseClock = options.run?.leaseClock ?? ctx.clock;
  // Claimed and not yet sent, per endpoint; in flight per endpoint; endpoints out for this pass.
  const queues = new Map<string, Claimed[]>();
  const inFlight = new Map<string, number>();
  const slowFailed = new Set<string>();
  let queued = 0;
  let flying = 0;
  let exhausted = false;
  const totals = { delivered: 0, retrying: 0, given_up: 0, released: 0 };
  let buffer: Outcome[] = [];
  // Two flushes may run at once (two connections): recording is most of the database's work. Not
  // in a slot run: each of its flushes share-locks the slot's ledger row (assertClaim) and then
  // updates it (recordBatch), so two at once would deadlock on that row; they take turns.
  const lanes: Promise<void>[] = options.run ? [Promise.resolve()] : [Promise.resolve(), Promise.resolve()];
  let lane = 0;
  let flushError: unknown;
  let wake: (() => void) | undefined;
  const signalWake = (): void => {
    const w = wake;
    wake = undefined;
    w?.();
  };

  const flush = (): void => {
    if (buffer.length === 0) return;
    const batch = buffer;
    buffer = [];
    lane = (lane + 1) % lanes.length;
    lanes[lane] = lanes[lane]!.then(async () => {
      try {
        const counts = await recordReachableFlush(ctx, options.owner, batch, options.run, unreachable);
        totals.delivered += counts.delivered;
        totals.retrying += counts.retrying;
        totals.given_up += counts.given_up;
        totals.released += counts.released;
        options.onRecorded?.(counts.recorded);
        try {
          ctx.observer?.webhookAttempts(counts);
        } catch (error) {
          ctx.log.warn({ err: toError(error) }, 'the observer failed on webhook outcomes; they stand recorded');
        }
      } catch (error) {
        // Unrecorded outcomes are not lost: their leases lapse and the deliveries are sent again.
        flushError ??= error;
        ctx.log.error({ err: toError(error), outcomes: batch.length }, 'recording webhook outcomes failed; the deliveries are sent again when their leases lapse');
      }
    });
  };

  // When an attempt is made: now; in a simulation, at the slot the worker would have made it (the
  // first minute at or after it came due), and in a test clock's advance at its due instant (as
  // the running worker's poller sends it), as every simulated job processes each item at its own
  // due instant however late the driver runs it. Deliveries are independent of each other, so
  // this is exact; retries that come due by now are attempted in the same pass.
  const attemptInstant = (claim: Claimed): number => {
    if (ctx.config.simulation) return Math.ceil(claim.dueAt / 60_000) * 60_000;
    return ctx.testClock !== undefined ? claim.dueAt : ctx.clock.now().getTime();
  };

  const release = (claims: readonly Claimed[]): void => {
    const at = ctx.clock.now().getTime();
    for (const claim of claims) buffer.push({ claim, result: null, at });
  };

  const start = (claim: Claimed): void => {
    flying += 1;
    inFlight.set(claim.endpointId, (inFlight.get(claim.endpointId) ?? 0) + 1);
    const at = attemptInstant(claim);
    // Not awaited: up to the pool's size of sends fly at once, each settling into `buffer`.
    // Transports report a failed attempt (timeout, connection error) as a result, not a rejection.
    void transport
      .send({ endpointId: claim.endpointId, url: claim.url, token: claim.token, body: claim.body, attempt: claim.attempt })
      .then((result) => {
        ctx.log.info(
          { account: claim.accountId, endpoint: claim.endpointId, event: claim.eventId, attempt: claim.attempt, status: result.status, error: result.error, duration_ms: result.durationMs },
          result.ok ? 'webhook delivered' : 'webhook attempt failed',
        );
        if (!result.ok && result.status === null && transport.failuresAreSlow && !slowFailed.has(claim.endpointId)) {
          // A timeout or a connection error: the endpoint is left alone for the rest of the pass.
          slowFailed.add(claim.endpointId);
          const rest = queues.get(claim.endpointId) ?? [];
          queues.delete(claim.endpointId);
          queued -= rest.length;
          release(rest);
        }
        buffer.push({ claim, result, at });
      })
      .finally(() => {
        flying -= 1;
        inFlight.set(claim.endpointId, inFlight.get(claim.endpointId)! - 1);
        if (buffer.length >= 256 || flying === 0) flush();
        // Keep the pool full from here: the main loop may be waiting for a claim.
        waitForSend = false;
        pump();
        signalWake();
      });
  };

  const pump = (): void => {
    if (flying >= concurrency || options.signal?.aborted) return;
    for (const [endpointId, queue] of queues) {
      while (queue.length > 0 && (inFlight.get(endpointId) ?? 0) < perEndpoint && flying < concurrency) {
        queued -= 1;
        start(queue.shift()!);
      }
      if (queue.length === 0) queues.delete(endpointId);
      if (flying >= concurrency) return;
    }
  };

  // Claimed ahead of sending: the next claim runs while the pool works through these.
  const window = concurrency * 4;
  let retryingSeen = 0;
  let waitForSend = false;
  let accounts: string[] = [];
  const finished = new Set<string>();
  // Accounts whose database node did not answer: out for the rest of the pass.
  const unreachable = new Set<string>();
  for (;;) {
    const stopping = options.signal?.aborted ?? false;
    if (stopping && queued > 0) {
      for (const queue of queues.values()) release(queue);
      queues.clear();
      queued = 0;
    }
    if (!stopping && !exhausted && !waitForSend && queued < window / 2 && flushError === undefined) {
      // Endpoints with a full share claimed already, or out for this pass, are not claimed for.
      const excluded = [...slowFailed];
      for (const [endpointId, queue] of queues) if (queue.length + (inFlight.get(endpointId) ?? 0) >= perEndpoint * 2) excluded.push(endpointId);
      const limit = Math.min(claimSize, window - queued);
      // Accounts take turns, one claim each; the list is asked for again when it runs out, without
      // the accounts finished in this pass (what they still have due is another worker's).
      if (accounts.length === 0) {
        const due = dueDelivery(ctx, ctx.clock.now(), leaseClock.now());
        const { listed, unreachable: down } = await listOnReachableNodes(ctx.db, (among) => dueAccounts(ctx.db, 'webhook_deliveries', due, 1, among));
        for (const nodeAccounts of down) skipUnreachable(ctx, unreachable, nodeAccounts, new Error('the listing of due deliveries failed on their node'));
        accounts = listed.map((account) => account.accountId).filter((a) => !finished.has(a));
      }
      let accountId = accounts.shift();
      while (accountId !== undefined && unreachable.has(accountId)) accountId = accounts.shift();
      let claimed: Claimed[] = [];
      if (accountId !== undefined) {
        try {
          claimed = await claimDue(ctx, leaseClock, accountId, options.owner, limit, excluded);
        } catch (error) {
          if (!isDatabaseUnavailable(error)) throw error;
          skipUnreachable(ctx, unreachable, [accountId], error);
        }
      }
      // Fewer than asked: nothing more of this account is due, unless endpoints were left out for
      // having their share already; then claim again once a send has finished.
      if (accountId === undefined) exhausted = true;
      else if (unreachable.has(accountId)) finished.add(accountId);
      else if (claimed.length < limit && excluded.length === slowFailed.size) finished.add(accountId);
      else {
        accounts.push(accountId);
        if (claimed.length < limit && flying > 0) waitForSend = true;
      }
      for (const claim of claimed) {
        let queue = queues.get(claim.endpointId);
        if (!queue) queues.set(claim.endpointId, (queue = []));
        queue.push(claim);
      }
      queued += claimed.length;
    }
    pump();
    if (flying === 0 && queued === 0 && exhausted && !stopping && flushError === undefined) {
      // Retries recorded in this pass may already be due (a simulation running late): go on.
      flush();
      await Promise.all(lanes);
      if (totals.retrying > retryingSeen) {
        retryingSeen = totals.retrying;
        exhausted = false;
        finished.clear();
        continue;
      }
    }
    if (flying === 0 && queued === 0 && (exhausted || stopping || flushError !== undefined)) break;
    if (flying === 0 && queued === 0) continue;
    // Claim again as soon as the queue runs low; else wait for the next completion.
    if (!stopping && !exhausted && !waitForSend && queued < window / 2 && flushError === undefined) continue;
    await new Promise<void>((resolve) => (wake = resolve));
  }
  flush();
  await Promise.all(lanes);
  if (flushError !== undefined) throw flushError;
  return totals;
}

/** The earliest instant at or after which a delivery is due (the simulation stops there), or null. */
export async function nextWebhookDueAt(db: Kysely<Database>, scope: JobScope = LIVE_BOOK): Promise<Date | null> {
  const row = await sql<{ due: Date | null }>`
    SELECT min(d.next_attempt_at) AS due FROM webhook_deliveries d
    JOIN webhook_endpoints w ON w.account_id = d.account_id AND w.endpoint_id = d.endpoint_id AND w.status = 'enabled'
    WHERE d.status = 'pending' AND ${ownClockInScope(scope, 'd')}`.execute(db);
  return row.rows[0]?.due ?? null;
}

/**
 * `kessai webhooks test`: sends one test event (type `webhook.test`, its `data` the endpoint) to
 * one endpoint now, whether it is enabled or not, rendered in the endpoint's API version (v2 when
 * it takes both). Nothing is stored: the test event is not in the outbox and no other endpoint
 * gets it.
 */
export async function sendTestEvent(ctx: Context, accountId: string, endpointId: string): Promise<{ event: Record<string, unknown>; result: WebhookResult }> {
  const endpoint = await endpointForSending(ctx.db, accountId, endpointId);
  const apiVersion = endpoint.apiVersion ?? 'v2';
  const event = renderEvent({
    accountId,
    id: ctx.ids.next(apiVersion === 'v1' ? 'eventV1' : 'eventV2'),
    livemode: endpoint.livemode,
    apiVersion,
    type: 'webhook.test',
    data: { id: endpoint.id, object: 'webhook_endpoint', url: endpoint.url, livemode: endpoint.livemode },
    createdAt: ctx.clock.now(),
    pendingWebhooks: 1,
  });
  const result = await webhookTransportOf(ctx).send({ endpointId, url: endpoint.url, token: endpoint.token, body: JSON.stringify(event), attempt: 1 });
  ctx.log.info({ account: accountId, endpoint: endpointId, event: event.id, status: result.status, error: result.error, duration_ms: result.durationMs }, 'webhook test event sent');
  return { event, result };
}
