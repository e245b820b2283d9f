/**
 * The request policies of the real server, in one place: `kessai serve` and the HTTP tests both
 * pass `serverPolicies(…)` as `buildServer`'s `requestPolicies`. Rate limits per account, zone and
 * mode (store `postgres`: shared by every server process on the database, or `redis` when the
 * server has a Redis connection (`KESSAI_REDIS_URL`); `memory` on the embedded database, where one
 * process owns the data), then Idempotency-Key handling on the server's clock,
 * whose timer also purges expired keys (every 10 minutes by default).
 */
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import type { Logger } from '../engine/logger';
import type { Context } from '../engine/context';
import { idempotency, type IdempotencyOptions } from './idempotency';
import { parseRateLimits, rateLimits, type RateLimitOptions } from './rate-limits';

export interface ServerPolicyOptions {
  readonly ctx: Context;
  /** The database kind: `postgres` shares the rate-limit counters, `pglite` keeps them in memory. */
  readonly storeKind: 'postgres' | 'pglite';
  /** On PostgreSQL: count rate limits in this Redis (openRateLimitRedis) instead of `rate_limit_counters`. */
  readonly redis?: Redis;
  /**
   * Limits laid over the profile's table (`parseRateLimits` of `KESSAI_RATE_LIMITS`), the profile
   * (default `spec`), and `windowSeconds` (v1 §8: 1), lengthened only by tests, so a burst cannot
   * straddle two windows.
   */
  readonly rateLimits?: Pick<RateLimitOptions, 'profile' | 'limits' | 'accounts' | 'windowSeconds'>;
  /** Idempotency tuning (tests shorten the waits; `kessai serve` passes KESSAI_FAULT's fault point); db and clock are the context's. */
  readonly idempotency?: Omit<IdempotencyOptions, 'db' | 'clock' | 'onStoreError' | 'onWarning'>;
}

/** `KESSAI_RATE_LIMITS` (JSON, see parseRateLimits) or the defaults when unset or empty. */
export function rateLimitsFromText(text: string | undefined): Pick<RateLimitOptions, 'limits' | 'accounts'> {
  return text === undefined || text.trim() === '' ? {} : parseRateLimits(text);
}

export function serverPolicies(options: ServerPolicyOptions): (app: FastifyInstance) => Promise<void> {
  const { ctx } = options;
  return async (app) => {
    await app.register(rateLimits, {
      store: options.storeKind === 'pglite' ? 'memory' : options.redis === undefined ? 'postgres' : 'redis',
      db: ctx.db,
      ...(options.redis === undefined ? {} : { redis: options.redis }),
      ...options.rateLimits,
    });
    await app.register(idempotency, {
      db: ctx.db,
      clock: ctx.clock,
      processor: ctx.processor,
      ...options.idempotency,
      onStoreError: (error) => ctx.log.error({ err: error }, 'idempotency key: storing or purging failed'),
      onWarning: (message) => ctx.log.warn(message),
    });
  };
}

/**
 * The Redis connection of the rate-limit counters (`KESSAI_REDIS_URL`, `redis://[:password@]host:port[/db]`),
 * connected before the server listens, so a wrong address stops start-up. Commands are not queued
 * while the connection is down (the limiter's in-memory insurance answers meanwhile) and ioredis
 * reconnects by itself; connection errors are logged without the URL (it may hold a password).
 */
export async function openRateLimitRedis(url: string, log: Logger): Promise<Redis> {
  const redis = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1, connectionName: 'kessai-rate-limits' });
  redis.on('error', (error: Error) => log.warn({ error: error.message }, 'rate limits: Redis connection error'));
  try {
    await redis.connect();
  } catch (error) {
    redis.disconnect();
    throw new Error(`KESSAI_REDIS_URL: cannot connect to Redis (${(error as Error).message})`);
  }
  return redis;
}
