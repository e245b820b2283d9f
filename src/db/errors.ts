/**
 * The one database error policy: which SQLSTATEs mean what to the engine, and the retry of short
 * API transactions. Every check of a PostgreSQL error code goes through here.
 *
 * - unique violation (23505): the row is already there (a concurrent request wrote it first);
 *   the caller turns it into "already done" or its own catalogue error.
 * - serialization failure (40001) and deadlock (40P01): the transaction lost a race and nothing
 *   of it was committed; run the whole transaction again.
 * - lock not available (55P03): a wait ran past `lock_timeout` (the caller's bounded wait).
 * - connection exception (class 08) and the shutdown codes (57P01–57P03), or a socket the driver
 *   saw fail: the database could not be reached — on Citus, typically the worker node that holds
 *   the account's shard. Temporary: the API answers 503 with Retry-After (isDatabaseUnavailable).
 *
 * Errors are wrapped with `{ cause }`, so the driver's original error is never lost.
 */
import type { Kysely, Transaction } from 'kysely';
import { KessaiError } from '../domain/errors';

/** SQLSTATE groups the engine acts on. */
export const SQLSTATE = {
  uniqueViolation: '23505',
  serializationFailure: '40001',
  deadlockDetected: '40P01',
  lockNotAvailable: '55P03',
  /** Class 08, connection exception: Citus raises 08006 when it cannot reach a worker node. */
  connectionExceptionClass: '08',
  adminShutdown: '57P01',
  crashShutdown: '57P02',
  cannotConnectNow: '57P03',
} as const;

/** Socket errors of the driver itself (no SQLSTATE): the server is not there, or went away. */
const UNREACHABLE_SOCKET_CODES: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH']);

/** The SQLSTATE of a database error (pg and PGlite both expose it as `code`), else undefined. */
export function sqlState(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** A unique violation: the row was already written (by this request's twin or a racing one). */
export function isUniqueViolation(error: unknown): boolean {
  return sqlState(error) === SQLSTATE.uniqueViolation;
}

/** A wait for a lock ran past the session's `lock_timeout` (nothing of the statement happened). */
export function isLockTimeout(error: unknown): boolean {
  return sqlState(error) === SQLSTATE.lockNotAvailable;
}

/**
 * The driver's own words for a connection it lost: ended by the server or the network, or found
 * broken when the next query of the same session was sent (node-postgres, lib/client.js).
 */
const DRIVER_LOST_CONNECTION = /^(Connection terminated( unexpectedly| due to connection timeout)?|Client has encountered a connection error and is not queryable)$/;

/**
 * The database (or, on Citus, the worker node holding the rows) could not be reached: a connection
 * exception (SQLSTATE class 08), a server shutting down or starting (57P01–57P03), a socket error
 * of the driver, or node-postgres's words for a lost connection. Looked for along the `cause` chain, as
 * errors are wrapped. Nothing the statement did was committed; the same request may succeed later.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; typeof current === 'object' && current !== null && depth < 10; depth += 1) {
    const state = sqlState(current);
    if (state !== undefined) {
      return state.startsWith(SQLSTATE.connectionExceptionClass) || state === SQLSTATE.adminShutdown || state === SQLSTATE.crashShutdown || state === SQLSTATE.cannotConnectNow;
    }
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && UNREACHABLE_SOCKET_CODES.has(code)) return true;
    const message = (current as { message?: unknown }).message;
    if (typeof message === 'string' && DRIVER_LOST_CONNECTION.test(message)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/** Seconds a client is asked to wait (Retry-After) when the database could not be reached. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

/**
 * The API's answer to a request whose database could not be reached: 503 `service_unavailable`
 * (retryable; the server adds Retry-After), the original error kept as its cause.
 */
export function unavailableRefusal(error: unknown): KessaiError {
  return new KessaiError('service_unavailable', {
    message: 'The data of this account cannot be reached right now and the request was not completed; retry it shortly (with the same Idempotency-Key).',
    cause: error,
  });
}

/** A serialization failure or a deadlock: nothing was committed, the whole transaction may run again. */
export function isRetryableTransactionError(error: unknown): boolean {
  const state = sqlState(error);
  return state === SQLSTATE.serializationFailure || state === SQLSTATE.deadlockDetected;
}

export interface RetryOptions {
  /** Attempts in all, the first included (default 3). */
  readonly attempts?: number;
  /** Isolation level of each attempt (default the server's, read committed). */
  readonly isolation?: 'read committed' | 'repeatable read' | 'serializable';
}

export const DEFAULT_TRANSACTION_ATTEMPTS = 3;

/**
 * Runs `body` in a transaction, and again in a new transaction when the attempt fails with a
 * serialization failure or a deadlock, at most `attempts` times in all. For short API
 * transactions only: the body must do no network I/O (it may run more than once) and must return
 * what it computed rather than act outside the database. Any other error is rethrown as it is;
 * when every attempt lost its race, the last database error is the `cause` of a retryable
 * server error (the client retries the request with its idempotency key).
 */
export async function inRetriedTransaction<DB, T>(db: Kysely<DB>, body: (trx: Transaction<DB>) => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const attempts = options.attempts ?? DEFAULT_TRANSACTION_ATTEMPTS;
  if (!Number.isInteger(attempts) || attempts < 1) throw new RangeError(`attempts must be a positive integer, got ${attempts}`);
  for (let attempt = 1; ; attempt += 1) {
    try {
      const builder = options.isolation === undefined ? db.transaction() : db.transaction().setIsolationLevel(options.isolation);
      return await builder.execute(body);
    } catch (error) {
      if (!isRetryableTransactionError(error)) throw error;
      if (attempt >= attempts) {
        throw new KessaiError('payjp_wrong', {
          message: `The request conflicted with concurrent requests ${attempts} times (SQLSTATE ${sqlState(error)}); retry it.`,
          cause: error,
        });
      }
    }
  }
}
