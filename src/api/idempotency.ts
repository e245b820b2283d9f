/**
 * Idempotency keys (ARCHITECTURE.md "The HTTP API"). A POST sent with an
 * `Idempotency-Key` header is done once per (account, mode, key) for 24 hours.
 *
 * ONE TRANSACTION PER KEYED REQUEST. The key's row, the operation's writes and the stored response
 * commit together, or none of them does:
 *
 * 1. Before the handler runs, a request transaction opens and inserts the key's row (`pending`,
 *    uncommitted). The route runs the operation on `operationContext(request, ctx)`, whose `db`
 *    is that transaction (src/db/joined-transaction.ts): the operation's own transactions become
 *    savepoints of it, so no operation needs to know about keys, v1 and v2 alike.
 * 2. When the response is ready (onSend) it is written on the row (`done`: status, content type,
 *    body) in the same transaction, which then commits; only then does the response leave. A
 *    process that dies at any point before the commit leaves nothing: PostgreSQL rolls the
 *    transaction back when the connection drops, the key is free and a retry does the work once.
 *    A process that dies after it leaves the operation's writes and their response: a retry
 *    replays it. There is no window between the two.
 * 3. A retry with the same key and the same request (method, path and body hashed) gets the stored
 *    response with `Idempotent-Replayed: true`; the same key with another request is refused (400
 *    `already_exist_id` naming `Idempotency-Key`).
 * 4. A request arriving while another with its key is in flight waits on the uncommitted row (the
 *    unique index; PostgreSQL's `lock_timeout`, `waitMs`) and then replays what that one stored,
 *    or does the work if that one stored nothing. Past `waitMs` it gets 429 `over_capacity`,
 *    which asks the client to retry later with the same key (the SDK does so with `maxRetry`).
 *    On the embedded database the keyed request holds the one connection, so the second simply
 *    runs after it.
 * 5. A server fault (5xx) rolls everything back, the key included: a retry does the work.
 *    A refusal below 500 (a declined card's 402) is kept with the writes made before it.
 *
 * CHECKPOINT AT THE NETWORK. No row lock may be held across a card-network call, so the operation
 * gets a `processor` whose every call is a checkpoint: the request transaction commits what the
 * operation wrote so far with the key row still `pending`, stamped now (`created_at`) and holding
 * its recovery point (the create intents of the call's references, src/charges/create-intents.ts);
 * the network is called with no transaction open; a new request transaction then locks the key
 * row again and goes on only if the stamp is unchanged (else the key was taken over: 500, nothing
 * more written). So the record step and the stored response still commit together. A request
 * finding a committed `pending` row waits for it (polling every PENDING_POLL_MS, up to `waitMs`,
 * then 429); once the row is `staleMs` old (its process died at the network) the next request
 * with the same key and request takes it over: it first undoes the recovery point (the first
 * authorization released, its token given back) through its own transaction and network, then
 * does the work afresh. After a checkpoint a 5xx keeps what the operation committed, as without a
 * key, and frees the key; a failed final commit undoes the recovery point and frees the key. A
 * network call inside an open transaction block (an operation that calls the network inside its
 * own transaction) cannot be checkpointed: see `networkInBlock`.
 *
 * A `pending` row is committed by a checkpoint (or by the earlier protocol, which committed the
 * reservation on its own); such a row is waited for, answered 429, and taken over after `staleMs`. Expired keys are treated as
 * absent (a reservation overwrites them) and deleted in batches by `purgeExpiredIdempotencyKeys`,
 * which the plugin runs every `purgeIntervalMs`.
 *
 * FAULT POINTS (tests only): `fault` names a moment (`before-operation-commit`: the response is
 * ready, nothing committed; `after-operation-commit`: committed, the response not yet sent) and
 * what happens there; `kessai serve` sets it from KESSAI_FAULT, killing itself with SIGKILL. Unset,
 * nothing happens.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fastifyPlugin from 'fastify-plugin';
import { sql, type ControlledTransaction, type Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { createIntentStamps, undoCreateIntentsAt, type IntentStamp } from '../charges/create-intents';
import { isDatabaseUnavailable, isLockTimeout, unavailableRefusal } from '../db/errors';
import { joinTransaction, type JoinedTransaction } from '../db/joined-transaction';
import type { Database } from '../db/schema';
import { KessaiError, toError, type ErrorCode } from '../domain/errors';
import { IDEMPOTENCY_KEY_PATTERN, IDEMPOTENCY_TTL_MS, MAX_TEXT_LENGTH } from '../domain/limits';
import type { Clock } from '../engine/clock';
import type { Context } from '../engine/context';
import type { CardNetwork } from '../processor/card-network';
import { withProcessorFaults } from '../processor/processor-faults';
import { callerOf } from './rate-limits';
import { refusalOf, sendRefusal } from './refusal';
import { withRetryAfter } from './retry-after';

export const IDEMPOTENCY_HEADER = 'idempotency-key';

export interface IdempotencyOptions {
  readonly db: Kysely<Database>;
  /** Stamps reservations and expiries; the server's clock. */
  readonly clock: Clock;
  /** How long a response is kept (default 24 h). */
  readonly ttlMs?: number;
  /** How long a request waits for a concurrent one with the same key (default 10 s). */
  readonly waitMs?: number;
  /** Age after which a committed `pending` row (earlier protocol) counts as abandoned (default 60 s). */
  readonly staleMs?: number;
  /** Interval of the purge of expired keys (default 10 min; 0 turns it off). */
  readonly purgeIntervalMs?: number;
  /** Where a failure to store a response or to purge is reported. */
  readonly onStoreError?: (error: Error) => void;
  /** Tests only: what happens at a moment of a keyed request (see the header). */
  readonly fault?: { readonly point: FaultPoint; readonly act: () => void };
  /**
   * The card network a taken-over or failed keyed request undoes its recovery point with (the
   * server's `ctx.processor`); absent, such create intents are left to the hold-expiry job.
   */
  readonly processor?: CardNetwork;
  /**
   * A card-network call inside an open transaction block of a keyed request cannot be
   * checkpointed: `hold` (default) makes it as the operation does without a key (its own
   * transaction holding its locks over the call) and reports it through `onWarning`; `refuse`
   * throws (a 500): for tests, to find such calls.
   */
  readonly networkInBlock?: 'hold' | 'refuse';
  readonly onWarning?: (message: string) => void;
}

export const FAULT_POINTS = ['before-operation-commit', 'after-operation-commit'] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

/** A keyed request that owns its key: the open request transaction and the view operations use. */
interface Held {
  readonly reservation: Reservation;
  /** The current request transaction: replaced at each checkpoint. */
  trx: ControlledTransaction<Database>;
  readonly joined: JoinedTransaction<Database>;
  /** The key row's `created_at` as the last checkpoint committed it (its fence); null before any checkpoint. */
  stamp: Date | null;
  /** True once the request no longer holds a transaction on its key (it was taken over, or a checkpoint failed). */
  lost: boolean;
  /** Runs a card-network call about `references` between a checkpoint and the next request transaction. */
  atNetwork<T>(references: readonly string[], call: () => Promise<T>): Promise<T>;
}

const HELD = new WeakMap<FastifyRequest, Held>();
/** How often a request looks again at a key another request holds at the card network. */
const PENDING_POLL_MS = 20;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `network` whose every call runs through `held.atNetwork` (the checkpoint around it). */
function checkpointedNetwork(network: CardNetwork, held: Held): CardNetwork {
  const refs = (requests: readonly { readonly reference: string }[]) => requests.map((r) => r.reference);
  return {
    authorize: (requests) => held.atNetwork(refs(requests), () => network.authorize(requests)),
    authenticate: (requests) => held.atNetwork(refs(requests), () => network.authenticate(requests)),
    capture: (requests) => held.atNetwork(refs(requests), () => network.capture(requests)),
    release: (requests) => held.atNetwork(refs(requests), () => network.release(requests)),
    refund: (requests) => held.atNetwork(refs(requests), () => network.refund(requests)),
  };
}

/**
 * The context an operation runs with for this request: the server's, with `db` the request
 * transaction when the request owns an Idempotency-Key (so its writes commit with the stored
 * response), and `processor` the server's network with a checkpoint around every call (no row
 * lock held across it). Every route that runs an operation takes its context from here.
 */
export function operationContext(request: FastifyRequest, ctx: Context): Context {
  const held = HELD.get(request);
  // A network call that throws answers pg_wrong (src/processor/processor-faults.ts); the checkpoint's own faults stay as they are.
  const processor = withProcessorFaults(ctx.processor);
  return held === undefined ? { ...ctx, processor } : { ...ctx, db: held.joined.db, processor: checkpointedNetwork(processor, held) };
}

/** The key row's body while it is `pending` after a checkpoint: what a taker must undo first. */
interface RecoveryPoint {
  readonly intents: readonly IntentStamp[];
}

function recoveryPointOf(row: { state: string; response_body: string | null } | undefined): RecoveryPoint | undefined {
  if (row?.state !== 'pending' || row.response_body === null) return undefined;
  return JSON.parse(row.response_body) as RecoveryPoint;
}

interface Reservation {
  readonly caller: Caller;
  readonly key: string;
  readonly hash: string;
}

type StoredRow = Pick<Database['idempotency_keys'], 'request_hash' | 'state' | 'status_code' | 'response_body'> & { response_headers: Record<string, string> | null; created_at: Date };

/** Thrown at a checkpoint's end when the key was taken over while the network answered (the call outlived staleMs). */
class KeyTakenOver extends Error {
  constructor(key: string) {
    super(`Idempotency-Key ${key} was taken over by a retry while this request was at the card network`);
    this.name = 'KeyTakenOver';
  }
}

/** JSON with object keys sorted at every level, so a body's hash does not depend on key order. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** sha256 of the method, the path with its query string and the parsed body: what "the same request" means. */
export function requestHash(method: string, url: string, body: unknown): string {
  return createHash('sha256').update(`${method} ${url}\n${canonicalJson(body)}`).digest('hex');
}

function refuse(request: FastifyRequest, reply: FastifyReply, code: ErrorCode, message: string, param?: string): FastifyReply {
  return sendRefusal(request, reply, new KessaiError(code, { message, ...(param === undefined ? {} : { param }) }));
}

function scoped(db: Kysely<Database>, caller: Caller, key: string) {
  return db.selectFrom('idempotency_keys').where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('idempotency_key', '=', key);
}

/**
 * Reserves the key for this request in its request transaction: a new row, or one that expired or
 * was abandoned. True when this request now owns the key and must do the work. Waits (up to the
 * transaction's lock_timeout) while another transaction holds an uncommitted row for the key.
 */
async function reserve(db: Kysely<Database>, reservation: Reservation, now: Date, ttlMs: number, staleMs: number): Promise<boolean> {
  const { caller, key, hash } = reservation;
  const taken = await db
    .insertInto('idempotency_keys')
    .values({ account_id: caller.accountId, livemode: caller.livemode, idempotency_key: key, request_hash: hash, state: 'pending', created_at: now, expires_at: new Date(now.getTime() + ttlMs) })
    .onConflict((oc) =>
      oc
        .columns(['account_id', 'livemode', 'idempotency_key'])
        .doUpdateSet({ request_hash: hash, state: 'pending', status_code: null, response_headers: null, response_body: null, created_at: now, expires_at: new Date(now.getTime() + ttlMs) })
        .where((eb) => eb.or([eb('idempotency_keys.expires_at', '<=', now), eb.and([eb('idempotency_keys.state', '=', 'pending'), eb('idempotency_keys.created_at', '<=', new Date(now.getTime() - staleMs))])])),
    )
    .returning('idempotency_key')
    .executeTakeFirst();
  return taken !== undefined;
}

async function readStored(db: Kysely<Database>, caller: Caller, key: string): Promise<StoredRow | undefined> {
  return scoped(db, caller, key).select(['request_hash', 'state', 'status_code', 'response_headers', 'response_body', 'created_at']).executeTakeFirst();
}

/**
 * Deletes expired keys, at most `limit` per statement, until none is left; returns how many went.
 * Safe beside the plugin: a key that expired is treated as absent anyway.
 */
export async function purgeExpiredIdempotencyKeys(db: Kysely<Database>, asOf: Date, limit = 5_000): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await sql<{ n: number }>`
      WITH gone AS (
        DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(SELECT ctid FROM idempotency_keys WHERE expires_at <= ${asOf} LIMIT ${limit}))
        RETURNING 1)
      SELECT count(*)::int AS n FROM gone`.execute(db);
    const n = deleted.rows[0]?.n ?? 0;
    total += n;
    if (n < limit) return total;
  }
}

async function idempotencyPlugin(app: FastifyInstance, options: IdempotencyOptions): Promise<void> {
  const { db, clock } = options;
  const ttlMs = options.ttlMs ?? IDEMPOTENCY_TTL_MS;
  const waitMs = Math.max(1, Math.round(options.waitMs ?? 10_000));
  const staleMs = options.staleMs ?? 60_000;
  const purgeIntervalMs = options.purgeIntervalMs ?? 10 * 60 * 1000;
  const fault = (point: FaultPoint) => {
    if (options.fault?.point === point) options.fault.act();
  };
  const rollback = (trx: ControlledTransaction<Database>) => trx.rollback().execute().catch((error: unknown) => options.onStoreError?.(toError(error)));

  const keyRow = (executor: Kysely<Database>, reservation: Reservation) =>
    executor.updateTable('idempotency_keys').where('account_id', '=', reservation.caller.accountId).where('livemode', '=', reservation.caller.livemode).where('idempotency_key', '=', reservation.key);
  const deleteKey = (executor: Kysely<Database>, reservation: Reservation) =>
    executor.deleteFrom('idempotency_keys').where('account_id', '=', reservation.caller.accountId).where('livemode', '=', reservation.caller.livemode).where('idempotency_key', '=', reservation.key).execute();

  /**
   * A checkpoint: the request transaction commits what the operation wrote so far with the key
   * row still `pending`, stamped now (a retry finds it in progress until staleMs after this) and
   * holding the recovery point (the create intents of `references`).
   */
  const checkpoint = async (held: Held, references: readonly string[]): Promise<void> => {
    const now = clock.now();
    const point: RecoveryPoint = { intents: await createIntentStamps(held.trx, held.reservation.caller, references) };
    try {
      await keyRow(held.trx, held.reservation).set({ created_at: now, response_body: JSON.stringify(point) }).execute();
      await held.trx.commit().execute();
    } catch (error) {
      held.lost = true;
      await rollback(held.trx);
      throw error;
    }
    held.stamp = now;
  };

  /** After the network call: a new request transaction on the key row, locked again, if it is still this request's. */
  const reopen = async (held: Held): Promise<void> => {
    const trx = await db.startTransaction().execute();
    try {
      const { caller, key } = held.reservation;
      const row = await scoped(trx, caller, key).select(['state', 'created_at']).forUpdate().executeTakeFirst();
      if (row === undefined || row.state !== 'pending' || row.created_at.getTime() !== held.stamp!.getTime()) throw new KeyTakenOver(key);
    } catch (error) {
      held.lost = true;
      await rollback(trx);
      throw error;
    }
    held.trx = trx;
  };

  const holdKey = (reservation: Reservation, trx: ControlledTransaction<Database>): Held => {
    const held: Held = {
      reservation,
      trx,
      joined: joinTransaction<Database>(() => held.trx),
      stamp: null,
      lost: false,
      async atNetwork(references, call) {
        if (held.lost) throw new KeyTakenOver(reservation.key);
        if (held.joined.blocksOpen() > 0) {
          const message = `Idempotency-Key ${reservation.key}: a card-network call inside an open transaction block cannot be checkpointed; its locks are held over the call`;
          if (options.networkInBlock === 'refuse') throw new Error(message);
          options.onWarning?.(message);
          return call();
        }
        await checkpoint(held, references);
        let result: Awaited<ReturnType<typeof call>>;
        try {
          result = await call();
        } finally {
          await reopen(held);
        }
        return result;
      },
    };
    return held;
  };

  /**
   * Undoes a recovery point with the request's own transaction and checkpointed network (the
   * embedded database has one connection, which the request transaction holds).
   */
  const undoPoint = async (held: Held, point: RecoveryPoint | undefined): Promise<void> => {
    if (point === undefined || point.intents.length === 0 || options.processor === undefined) return;
    const undoing = { db: held.joined.db, clock, processor: checkpointedNetwork(options.processor, held) };
    await undoCreateIntentsAt(undoing, held.reservation.caller, point.intents);
  };

  /**
   * The request's commit failed after a checkpoint: what the checkpoints committed (a create
   * intent) is undone now, and the key freed; if that fails too, the key stays `pending` with its
   * recovery point for a retry after staleMs (and the hold-expiry job undoes lapsed intents).
   */
  const recoverAfterFailure = async (held: Held): Promise<void> => {
    if (held.lost) return;
    try {
      await reopen(held);
      const row = await scoped(held.trx, held.reservation.caller, held.reservation.key).select(['state', 'response_body']).executeTakeFirst();
      await undoPoint(held, recoveryPointOf(row));
      await deleteKey(held.trx, held.reservation);
      await held.trx.commit().execute();
    } catch (error) {
      if (!held.lost) await rollback(held.trx);
      options.onStoreError?.(toError(error));
    }
  };

  const replay = (reply: FastifyReply, row: StoredRow): FastifyReply =>
    reply
      .code(row.status_code!)
      .headers(row.response_headers ?? {})
      .header('idempotent-replayed', 'true')
      .send(row.response_body);

  // preHandler: after authentication (the caller) and after the body is parsed (the hash).
  app.addHook('preHandler', async (request, reply) => {
    if (request.method !== 'POST') return;
    const header = request.headers[IDEMPOTENCY_HEADER];
    const caller = callerOf(request);
    if (header === undefined || caller === undefined) return;
    const key = Array.isArray(header) ? header.join(',') : header;
    if (!IDEMPOTENCY_KEY_PATTERN.test(key)) return refuse(request, reply, 'invalid_param_key', `Idempotency-Key must be 1 to ${MAX_TEXT_LENGTH} characters of A-Z, a-z, 0-9, "-" and "_".`, 'Idempotency-Key');
    const reservation: Reservation = { caller, key, hash: requestHash(request.method, request.url, request.body) };
    // A row purged between the two statements below: reserve again (a second time cannot race a
    // purge). A committed `pending` row (a request at the card network, after its checkpoint):
    // looked at again every PENDING_POLL_MS for about waitMs, then 429.
    let vanished = 0;
    for (let polls = Math.ceil(waitMs / PENDING_POLL_MS); ; polls -= 1) {
      const trx = await db.startTransaction().execute();
      let stored: StoredRow | undefined;
      let held: Held | undefined;
      try {
        await sql.raw(`SET LOCAL lock_timeout = ${waitMs}`).execute(trx);
        // A pending row left by a request that died after a checkpoint: what it left is undone first.
        const previous = await readStored(trx, caller, key);
        if (await reserve(trx, reservation, clock.now(), ttlMs, staleMs)) {
          await sql.raw('SET LOCAL lock_timeout TO DEFAULT').execute(trx);
          held = holdKey(reservation, trx);
          HELD.set(request, held);
          if (previous?.request_hash === reservation.hash) await undoPoint(held, recoveryPointOf(previous));
          return;
        }
        stored = await readStored(trx, caller, key);
      } catch (error) {
        // A fault while taking over: onSend answers it (HELD is set) and frees what it can.
        if (held !== undefined) throw error;
        await rollback(trx);
        if (isLockTimeout(error)) return refuse(request, reply, 'over_capacity', `A request with Idempotency-Key ${key} is still in progress; retry later with the same key.`);
        throw error;
      }
      await rollback(trx);
      if (stored === undefined) {
        vanished += 1;
        if (vanished >= 2) throw new Error(`Idempotency-Key ${key}: the key's row vanished twice while it was read`);
        continue;
      }
      if (stored.request_hash !== reservation.hash) {
        return refuse(request, reply, 'already_exist_id', `Idempotency-Key ${key} was already used for another request (a different method, path or parameters); send a new key for a new request.`, 'Idempotency-Key');
      }
      if (stored.state === 'done') return replay(reply, stored);
      if (polls <= 0) return refuse(request, reply, 'over_capacity', `A request with Idempotency-Key ${key} is still in progress; retry later with the same key.`);
      await sleep(PENDING_POLL_MS);
    }
  });

  // onSend: the response is stored and committed with the operation's writes before it leaves.
  app.addHook('onSend', async (request, reply, payload) => {
    const held = HELD.get(request);
    if (held === undefined) return payload;
    HELD.delete(request);
    const { reservation } = held;
    // The request no longer holds its key (taken over at the network, or a checkpoint failed): its answer is not kept.
    if (held.lost) return payload;
    const faulted = reply.statusCode >= 500 || (payload !== null && typeof payload !== 'string' && !Buffer.isBuffer(payload));
    if (faulted && held.stamp === null) {
      // A fault (or a stream, which cannot be kept): nothing of the request is kept, the key is free.
      await rollback(held.trx);
      return payload;
    }
    try {
      if (faulted) {
        // After a checkpoint what the operation committed stays, as without a key (its own
        // failure handling undid what it must, possibly in this transaction); the key is freed.
        await deleteKey(held.trx, reservation);
        await held.trx.commit().execute();
        return payload;
      }
      const contentType = reply.getHeader('content-type');
      const body = payload === null ? '' : typeof payload === 'string' ? payload : (payload as Buffer).toString('utf8');
      await keyRow(held.trx, reservation)
        .set({ state: 'done', status_code: reply.statusCode, response_headers: JSON.stringify(contentType === undefined ? {} : { 'content-type': String(contentType) }), response_body: body })
        .execute();
      fault('before-operation-commit');
      await held.trx.commit().execute();
    } catch (error) {
      // Nothing since the last checkpoint was committed (a statement of the operation outside its
      // own transactions failed, or the database went away): what a checkpoint committed is
      // undone, and the request says it did nothing; a retry does the work.
      await rollback(held.trx);
      if (held.stamp !== null) await recoverAfterFailure(held);
      options.onStoreError?.(toError(error));
      const refusal = refusalOf(
        request,
        isDatabaseUnavailable(error)
          ? unavailableRefusal(error)
          : new KessaiError('payjp_wrong', { message: 'The request could not be completed and nothing was done; retry it with the same Idempotency-Key.', cause: error }),
      );
      withRetryAfter(reply, refusal.status).code(refusal.status).type(refusal.contentType);
      return JSON.stringify(refusal.body);
    }
    fault('after-operation-commit');
    return payload;
  });

  // A request that ends without a response through onSend (its connection lost first) keeps
  // nothing: its transaction is rolled back (an operation still running fails on its next statement).
  const abandon = async (request: FastifyRequest): Promise<void> => {
    const held = HELD.get(request);
    if (held === undefined) return;
    HELD.delete(request);
    if (!held.lost) await rollback(held.trx);
  };
  app.addHook('onResponse', abandon);
  app.addHook('onRequestAbort', abandon);

  if (purgeIntervalMs > 0) {
    const timer = setInterval(() => {
      purgeExpiredIdempotencyKeys(db, clock.now()).catch((error: unknown) => options.onStoreError?.(toError(error)));
    }, purgeIntervalMs);
    timer.unref();
    app.addHook('onClose', async () => clearInterval(timer));
  }
}

/**
 * The plugin: `app.register(idempotency, { db, clock })`, after the hook that authenticates. Not
 * encapsulated, so it covers every POST route of the server.
 */
export const idempotency = fastifyPlugin(idempotencyPlugin, { name: 'kessai-idempotency', fastify: '5.x' });
