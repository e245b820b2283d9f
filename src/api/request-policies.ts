/**
 * The request policies of the real server, in one place: `kessai serve` and the HTTP tests both
 * pass `serverPolicies(…)` as `buildServer`'s `requestPolicies`. Rate limits per account, zone and
 * mode (store `postgres`: shared by every server process on the database; `memory` on the embedded
 * database, where one process owns the data), then Idempotency-Key handling on the server's clock,
 * whose timer also purges expired keys (every 10 minutes by default).
 */
import type { FastifyInstance } from 'fastify';
import type { Context } from '../engine/context';
import { idempotency, type IdempotencyOptions } from './idempotency';
import { parseRateLimits, rateLimits, type RateLimitOptions } from './rate-limits';

export interface ServerPolicyOptions {
  readonly ctx: Context;
  /** The database kind: `postgres` shares the rate-limit counters, `pglite` keeps them in memory. */
  readonly storeKind: 'postgres' | 'pglite';
  /** Limits laid over v1 §8's defaults (`parseRateLimits` of `KESSAI_RATE_LIMITS`). */
  readonly rateLimits?: Pick<RateLimitOptions, 'limits' | 'accounts'>;
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
      store: options.storeKind === 'postgres' ? 'postgres' : 'memory',
      db: ctx.db,
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
