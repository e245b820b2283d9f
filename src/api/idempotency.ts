/**
 * Idempotency keys (ARCHITECTURE.md "The HTTP API"; issue 15, point 7). A POST sent with an
 * `Idempotency-Key` header is done once per (account, mode, key) for 24 hours:
 *
 * 1. Before the handler runs, the key is reserved: one INSERT of a `pending` row, committed on its
 *    own, so a second request with the key sees it whatever the first is doing. No row lock is
 *    held while the operation runs (and calls the card network).
 * 2. The handler runs as usual. Its response (status, content type, body) is stored on the row
 *    (`done`) before it is sent, so a client that got an answer can always get the same one again.
 * 3. A retry with the same key and the same request (method, path and body hashed) gets the stored
 *    response with `Idempotent-Replayed: true`, without the work being done again; the same key
 *    with another request is refused (400 `already_exist_id` naming `Idempotency-Key`).
 * 4. A request arriving while the key is still `pending` waits for the first to finish (polling the
 *    row) and then answers with its stored response; past `waitMs` it gets 429 `over_capacity`,
 *    which asks the client to retry later with the same key (the SDK does so with `maxRetry`).
 * 5. A server fault (5xx) stores nothing: the operation's transaction rolled back, so the
 *    reservation is removed and a retry does the work. A reservation left `pending` by a process
 *    that died is taken over after `staleMs`.
 *
 * Expired keys are treated as absent (a reservation overwrites them) and deleted in batches by
 * `purgeExpiredIdempotencyKeys`, which the plugin runs every `purgeIntervalMs`.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fastifyPlugin from 'fastify-plugin';
import { sql, type Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database } from '../db/schema';
import { KessaiError, toError, type ErrorCode } from '../domain/errors';
import type { Clock } from '../engine/clock';
import { callerOf } from './rate-limits';
import { sendRefusal } from './refusal';

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
  /** Poll interval while waiting (default 25 ms). */
  readonly pollMs?: number;
  /** Age after which a `pending` reservation counts as abandoned by a dead process (default 60 s). */
  readonly staleMs?: number;
  /** Interval of the purge of expired keys (default 10 min; 0 turns it off). */
  readonly purgeIntervalMs?: number;
  /** Where a failure to store a response is reported (the response is sent all the same). */
  readonly onStoreError?: (error: Error) => void;
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
 * Reserves the key for this request: a new row, or one that expired or was abandoned. True when
 * this request now owns the key and must do the work.
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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
  const waitMs = options.waitMs ?? 10_000;
  const pollMs = options.pollMs ?? 25;
  const staleMs = options.staleMs ?? 60_000;
  const purgeIntervalMs = options.purgeIntervalMs ?? 10 * 60 * 1000;
  const reservations = new WeakMap<FastifyRequest, Reservation>();

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
    // Waiting is counted in polls, not read off a clock: `waitMs / pollMs` looks at the row.
    let polls = Math.ceil(waitMs / pollMs);
    for (;;) {
      if (await reserve(db, reservation, clock.now(), ttlMs, staleMs)) {
        reservations.set(request, reservation);
        return;
      }
      const stored = await readStored(db, caller, key);
      if (stored === undefined) continue; // purged or given up between the two statements: reserve again
      if (stored.request_hash !== reservation.hash) {
        return refuse(request, reply, 'already_exist_id', `Idempotency-Key ${key} was already used for another request (a different method, path or parameters); send a new key for a new request.`, 'Idempotency-Key');
      }
      if (stored.state === 'done') return replay(reply, stored);
      if (polls <= 0) {
        return refuse(request, reply, 'over_capacity', `A request with Idempotency-Key ${key} is still in progress; retry later with the same key.`);
      }
      polls -= 1;
      await sleep(pollMs);
    }
  });

  // onSend: the response is stored before it leaves, so whoever saw it can see it again.
  app.addHook('onSend', async (request, reply, payload) => {
    const reservation = reservations.get(request);
    if (reservation === undefined) return payload;
    reservations.delete(request);
    const { caller, key, hash } = reservation;
    try {
      const row = db.updateTable('idempotency_keys').where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('idempotency_key', '=', key).where('request_hash', '=', hash).where('state', '=', 'pending');
      if (reply.statusCode >= 500 || (payload !== null && typeof payload !== 'string' && !Buffer.isBuffer(payload))) {
        // A fault rolled the work back (or a stream cannot be kept): free the key for a retry.
        await db.deleteFrom('idempotency_keys').where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('idempotency_key', '=', key).where('request_hash', '=', hash).where('state', '=', 'pending').execute();
      } else {
        const contentType = reply.getHeader('content-type');
        const body = payload === null ? '' : typeof payload === 'string' ? payload : (payload as Buffer).toString('utf8');
        await row
          .set({ state: 'done', status_code: reply.statusCode, response_headers: JSON.stringify(contentType === undefined ? {} : { 'content-type': String(contentType) }), response_body: body })
          .execute();
      }
    } catch (error) {
      options.onStoreError?.(toError(error));
    }
    return payload;
  });

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
