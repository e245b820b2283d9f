/**
 * Idempotency keys (ARCHITECTURE.md "The HTTP API"; issue 15, point 7). A POST sent with an
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
 * A `pending` row can be committed only by the earlier protocol (reservation committed on its
 * own); such a row is answered 429 and taken over after `staleMs`. Expired keys are treated as
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
import { CREATE_INTENT_OPERATION } from '../charges/create-intents';
import { isLockTimeout } from '../db/errors';
import { joinedTransaction } from '../db/joined-transaction';
import type { Database } from '../db/schema';
import { KessaiError, toError, type ErrorCode } from '../domain/errors';
import type { Clock } from '../engine/clock';
import type { Context } from '../engine/context';
import { callerOf } from './rate-limits';
import { refusalOf, sendRefusal } from './refusal';

export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** How long a stored response answers retries (24 hours, the real service's figure). */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** The real service's key rule: up to 255 of `A-Z a-z 0-9 - _`. */
const KEY_FORMAT = /^[A-Za-z0-9_-]{1,255}$/;

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
}

export const FAULT_POINTS = ['before-operation-commit', 'after-operation-commit'] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

/** A keyed request that owns its key: the open request transaction and the view operations use. */
interface Held {
  readonly reservation: Reservation;
  readonly trx: ControlledTransaction<Database>;
  readonly db: Kysely<Database>;
}

const HELD = new WeakMap<FastifyRequest, Held>();

/**
 * The context an operation runs with for this request: the server's, with `db` the request
 * transaction when the request owns an Idempotency-Key (so its writes commit with the stored
 * response). Every route that runs an operation takes its context from here.
 */
export function operationContext(request: FastifyRequest, ctx: Context): Context {
  const held = HELD.get(request);
  return held === undefined ? ctx : { ...ctx, db: held.db };
}

interface Reservation {
  readonly caller: Caller;
  readonly key: string;
  readonly hash: string;
}

type StoredRow = Pick<Database['idempotency_keys'], 'request_hash' | 'state' | 'status_code' | 'response_body'> & { response_headers: Record<string, string> | null; created_at: Date };

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
 * Safe beside the plugin: a key that expired is treated as absent anyway. Lapsed create intents of
 * charges (src/charges/create-intents.ts) are not keys: their recovery drops them, after undoing.
 */
export async function purgeExpiredIdempotencyKeys(db: Kysely<Database>, asOf: Date, limit = 5_000): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await sql<{ n: number }>`
      WITH gone AS (
        DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(SELECT ctid FROM idempotency_keys WHERE expires_at <= ${asOf} AND request_hash <> ${CREATE_INTENT_OPERATION} LIMIT ${limit}))
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
    if (!KEY_FORMAT.test(key)) return refuse(request, reply, 'invalid_param_key', 'Idempotency-Key must be 1 to 255 characters of A-Z, a-z, 0-9, "-" and "_".', 'Idempotency-Key');
    const reservation: Reservation = { caller, key, hash: requestHash(request.method, request.url, request.body) };
    // A row purged between the two statements below: reserve again (a second time cannot race a purge).
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const trx = await db.startTransaction().execute();
      let stored: StoredRow | undefined;
      try {
        await sql.raw(`SET LOCAL lock_timeout = ${waitMs}`).execute(trx);
        if (await reserve(trx, reservation, clock.now(), ttlMs, staleMs)) {
          await sql.raw('SET LOCAL lock_timeout TO DEFAULT').execute(trx);
          HELD.set(request, { reservation, trx, db: joinedTransaction<Database>(trx) });
          return;
        }
        stored = await readStored(trx, caller, key);
      } catch (error) {
        await rollback(trx);
        if (isLockTimeout(error)) return refuse(request, reply, 'over_capacity', `A request with Idempotency-Key ${key} is still in progress; retry later with the same key.`);
        throw error;
      }
      await rollback(trx);
      if (stored === undefined) continue;
      if (stored.request_hash !== reservation.hash) {
        return refuse(request, reply, 'already_exist_id', `Idempotency-Key ${key} was already used for another request (a different method, path or parameters); send a new key for a new request.`, 'Idempotency-Key');
      }
      if (stored.state === 'done') return replay(reply, stored);
      return refuse(request, reply, 'over_capacity', `A request with Idempotency-Key ${key} is still in progress; retry later with the same key.`);
    }
    throw new Error(`Idempotency-Key ${key}: the key's row vanished twice while it was read`);
  });

  // onSend: the response is stored and committed with the operation's writes before it leaves.
  app.addHook('onSend', async (request, reply, payload) => {
    const held = HELD.get(request);
    if (held === undefined) return payload;
    HELD.delete(request);
    const { reservation, trx } = held;
    if (reply.statusCode >= 500 || (payload !== null && typeof payload !== 'string' && !Buffer.isBuffer(payload))) {
      // A fault (or a stream, which cannot be kept): nothing of the request is kept, the key is free.
      await rollback(trx);
      return payload;
    }
    try {
      const contentType = reply.getHeader('content-type');
      const body = payload === null ? '' : typeof payload === 'string' ? payload : (payload as Buffer).toString('utf8');
      await trx
        .updateTable('idempotency_keys')
        .where('account_id', '=', reservation.caller.accountId)
        .where('livemode', '=', reservation.caller.livemode)
        .where('idempotency_key', '=', reservation.key)
        .set({ state: 'done', status_code: reply.statusCode, response_headers: JSON.stringify(contentType === undefined ? {} : { 'content-type': String(contentType) }), response_body: body })
        .execute();
      fault('before-operation-commit');
      await trx.commit().execute();
    } catch (error) {
      // Nothing was committed (a statement of the operation outside its own transactions failed,
      // or the database went away): the request did nothing, and says so; a retry does the work.
      await rollback(trx);
      options.onStoreError?.(toError(error));
      const refusal = refusalOf(request, new KessaiError('payjp_wrong', { message: 'The request could not be completed and nothing was done; retry it with the same Idempotency-Key.', cause: error }));
      reply.code(refusal.status).type(refusal.contentType);
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
    await rollback(held.trx);
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
