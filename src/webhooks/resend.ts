/**
 * An endpoint's deliveries as an operator sees them, and the re-send of given-up ones. A re-send
 * is one new attempt of the same event to the same endpoint: the delivery goes back to `pending`,
 * due now, and the next delivery pass sends it as attempt N + 1 (webhook_attempts) — delivered, or
 * given up again after that one attempt (delivery.ts gives up once attempts reach the maximum).
 *
 * Exactly once per re-send request: each request writes a `webhook_resends` row keyed by its
 * request key (the caller's Idempotency-Key, or the attempt count it saw given up) in the same
 * transaction that puts the delivery back; a retried request finds its row and changes nothing.
 * Only a delivery that is `failed` is put back, so a delivery is never sent twice at once.
 */
import { sql } from 'kysely';
import { KessaiError } from '../domain/errors';
import { MAX_TEXT_LENGTH } from '../domain/limits';
import type { Context } from '../engine/context';
import { endpointForSending } from './endpoints';

export const DELIVERY_STATES = ['pending', 'delivered', 'failed'] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];

export interface DeliveryAttempt {
  readonly attempt: number;
  readonly attemptedAt: Date;
  readonly succeeded: boolean;
  readonly httpStatus: number | null;
  readonly error: string | null;
  readonly durationMs: number;
  /** Made by a re-send, and who asked for it. */
  readonly resentBy: string | null;
}

export interface Delivery {
  readonly accountId: string;
  readonly endpointId: string;
  readonly eventId: string;
  readonly eventType: string;
  /** `failed` is a given-up delivery (v2 §6.2: after the last retry). */
  readonly status: DeliveryState;
  readonly attempts: number;
  readonly nextAttemptAt: Date;
  readonly lastStatus: number | null;
  readonly lastError: string | null;
  readonly deliveredAt: Date | null;
  readonly createdAt: Date;
  /** Re-sends asked for so far. */
  readonly resends: number;
}

/** Deliveries listed at most per request. */
export const MAX_DELIVERIES_LISTED = 200;

function checkState(state: string | undefined): DeliveryState | undefined {
  if (state === undefined) return undefined;
  if (!(DELIVERY_STATES as readonly string[]).includes(state)) throw new KessaiError('invalid_param_key', { param: 'status', message: `status must be one of ${DELIVERY_STATES.join(', ')} (failed: given up), got ${JSON.stringify(state)}` });
  return state as DeliveryState;
}

/** An endpoint's deliveries, newest first, optionally of one state. */
export async function listDeliveries(ctx: Pick<Context, 'db'>, accountId: string, endpointId: string, options: { readonly status?: string; readonly limit?: number } = {}): Promise<Delivery[]> {
  const status = checkState(options.status);
  const limit = options.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_DELIVERIES_LISTED) throw new KessaiError('invalid_param_key', { param: 'limit', message: `limit must be a whole number from 1 to ${MAX_DELIVERIES_LISTED}` });
  await endpointForSending(ctx.db, accountId, endpointId);
  let query = ctx.db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('events as e', (join) => join.onRef('e.account_id', '=', 'd.account_id').onRef('e.event_id', '=', 'd.event_id'))
    .select(['d.account_id', 'd.endpoint_id', 'd.event_id', 'e.type', 'd.status', 'd.attempts', 'd.next_attempt_at', 'd.last_status', 'd.last_error', 'd.delivered_at', 'd.created_at'])
    .select(sql<number>`(SELECT count(*) FROM webhook_resends r WHERE r.account_id = d.account_id AND r.endpoint_id = d.endpoint_id AND r.event_id = d.event_id)::int`.as('resends'))
    .where('d.account_id', '=', accountId)
    .where('e.account_id', '=', accountId)
    .where('d.endpoint_id', '=', endpointId);
  if (status !== undefined) query = query.where('d.status', '=', status);
  const rows = await query.orderBy('d.created_at', 'desc').orderBy('d.event_id', 'desc').limit(limit).execute();
  return rows.map((row) => ({
    accountId: row.account_id,
    endpointId: row.endpoint_id,
    eventId: row.event_id,
    eventType: row.type,
    status: row.status,
    attempts: row.attempts,
    nextAttemptAt: row.next_attempt_at,
    lastStatus: row.last_status,
    lastError: row.last_error,
    deliveredAt: row.delivered_at,
    createdAt: row.created_at,
    resends: row.resends,
  }));
}

/** Every recorded attempt of one delivery, first first, with the re-sends marked. */
export async function deliveryAttempts(ctx: Pick<Context, 'db'>, accountId: string, endpointId: string, eventId: string): Promise<DeliveryAttempt[]> {
  const rows = await ctx.db
    .selectFrom('webhook_attempts as a')
    .leftJoin('webhook_resends as r', (join) => join.onRef('r.account_id', '=', 'a.account_id').onRef('r.endpoint_id', '=', 'a.endpoint_id').onRef('r.event_id', '=', 'a.event_id').onRef('r.attempt', '=', 'a.attempt'))
    .select(['a.attempt', 'a.attempted_at', 'a.succeeded', 'a.http_status', 'a.error', 'a.duration_ms', 'r.operator'])
    .where('a.account_id', '=', accountId)
    .where('a.endpoint_id', '=', endpointId)
    .where('a.event_id', '=', eventId)
    .orderBy('a.attempt')
    .execute();
  return rows.map((row) => ({ attempt: row.attempt, attemptedAt: row.attempted_at, succeeded: row.succeeded, httpStatus: row.http_status, error: row.error, durationMs: row.duration_ms, resentBy: row.operator }));
}

export interface ResendResult {
  /** Deliveries put back by this request (0 when it was a retry, or nothing was given up). */
  readonly resent: number;
  /** The (event, attempt number) of each re-send this request key asked for, this time or before. */
  readonly deliveries: readonly { readonly eventId: string; readonly attempt: number }[];
}

const REQUEST_KEY = new RegExp(`^[\\x21-\\x7e]{1,${MAX_TEXT_LENGTH}}$`);

/**
 * Re-sends given-up deliveries of an endpoint: one (`eventId`) or every one. `requestKey` makes the
 * request idempotent (a retry with the same key re-sends nothing more); `operator` is recorded.
 */
export async function resendGivenUp(ctx: Pick<Context, 'db' | 'clock'>, input: { readonly accountId: string; readonly endpointId: string; readonly eventId?: string; readonly requestKey: string; readonly operator: string }): Promise<ResendResult> {
  if (!REQUEST_KEY.test(input.requestKey)) throw new KessaiError('invalid_param_key', { param: 'idempotency_key', message: `the request key must be 1 to ${MAX_TEXT_LENGTH} printable ASCII characters` });
  await endpointForSending(ctx.db, input.accountId, input.endpointId);
  if (input.eventId !== undefined) {
    const delivery = await ctx.db
      .selectFrom('webhook_deliveries')
      .select(['status', 'attempts'])
      .where('account_id', '=', input.accountId)
      .where('endpoint_id', '=', input.endpointId)
      .where('event_id', '=', input.eventId)
      .executeTakeFirst();
    if (!delivery) throw new KessaiError('invalid_id', { param: 'event', message: `No delivery of ${input.eventId} to ${input.endpointId}` });
  }
  const now = ctx.clock.now();
  const oneEvent = input.eventId === undefined ? sql`TRUE` : sql`d.event_id = ${input.eventId}`;
  // One statement: the request's rows for the given-up deliveries not yet asked for under this
  // key, and those deliveries back to pending, due now. The delivery's status is checked and
  // changed in the same statement, under its row lock: two racing requests put it back once.
  const resent = await sql<{ event_id: string }>`
    WITH given_up AS (
      SELECT d.account_id, d.endpoint_id, d.event_id, d.attempts FROM webhook_deliveries d
      WHERE d.account_id = ${input.accountId} AND d.endpoint_id = ${input.endpointId} AND d.status = 'failed' AND ${oneEvent}
        AND NOT EXISTS (SELECT 1 FROM webhook_resends r WHERE r.account_id = d.account_id AND r.endpoint_id = d.endpoint_id AND r.event_id = d.event_id AND r.request_key = ${input.requestKey})
      FOR UPDATE OF d
    ), requested AS (
      INSERT INTO webhook_resends (account_id, endpoint_id, event_id, request_key, attempt, operator, requested_at)
      SELECT account_id, endpoint_id, event_id, ${input.requestKey}, attempts + 1, ${input.operator}, ${now} FROM given_up
      ON CONFLICT ON CONSTRAINT webhook_resends_pkey DO NOTHING
      RETURNING account_id, endpoint_id, event_id
    )
    UPDATE webhook_deliveries d SET status = 'pending', next_attempt_at = ${now}, lease_owner = NULL, lease_until = NULL
    FROM requested q
    WHERE d.account_id = q.account_id AND d.endpoint_id = q.endpoint_id AND d.event_id = q.event_id AND d.account_id = ${input.accountId}
    RETURNING d.event_id`.execute(ctx.db);
  let asked = ctx.db
    .selectFrom('webhook_resends')
    .select(['event_id', 'attempt'])
    .where('account_id', '=', input.accountId)
    .where('endpoint_id', '=', input.endpointId)
    .where('request_key', '=', input.requestKey);
  if (input.eventId !== undefined) asked = asked.where('event_id', '=', input.eventId);
  const deliveries = (await asked.orderBy('event_id').execute()).map((row) => ({ eventId: row.event_id, attempt: row.attempt }));
  if (input.eventId !== undefined && deliveries.length === 0) {
    throw new KessaiError('invalid_param_key', { param: 'event', message: `the delivery of ${input.eventId} to ${input.endpointId} is not given up: only a given-up delivery is re-sent` });
  }
  return { resent: resent.rows.length, deliveries };
}
