/**
 * Rate limits of the v1 API (v1 §8): requests per second per account, zone and mode, with the
 * document's values as defaults:
 *
 * | zone      | applies to                                                     | live | test |
 * |-----------|----------------------------------------------------------------|------|------|
 * | `pk`      | token creation with a public key                               | 10   | 2    |
 * | `payment` | create charge, capture, refund, reauth, finish 3-D Secure      | 14   | 2    |
 * | `sk`      | all other secret-key requests                                  | 30   | 2    |
 *
 * A limited request gets 429 with the v1 error body, code `over_capacity`, before any work is
 * done. The counting is rate-limiter-flexible's (fixed windows): on PostgreSQL its store keeps the
 * counters in `rate_limit_counters`, so every server process on one database shares them, or in
 * Redis when the server is given one (`KESSAI_REDIS_URL`: the library's Redis store, one atomic
 * INCR-and-expire script a request, no row that every request of an account waits on); on the
 * embedded database, which one process owns, they are kept in memory. A store that fails falls
 * back to an in-memory limiter of the same values (the library's insurance limiter) rather than
 * refusing every request. Windows run on the wall clock: rate limiting is about real traffic,
 * not business time.
 *
 * Large budgets are taken from a shared store in leases (LeasedBudgets): a budget of at least
 * 2 × LEASE_SHARE requests a window is counted in steps of 1/LEASE_SHARE of it, which this process
 * then hands out request by request without asking the store, so a raised account (a benchmark's,
 * a platform's) costs one store round trip a lease instead of one a request. The budget is never
 * exceeded; points leased and left unused when the window ends are lost (other processes may be
 * refused up to one lease a process early). Budgets below that, v1 §8's defaults among them, are
 * counted request by request as before.
 *
 * Registered after the authentication hook: it limits requests that carry a caller
 * (`request.caller`) and lets the others through to be refused by authentication.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fastifyPlugin from 'fastify-plugin';
import { CompiledQuery, type Kysely } from 'kysely';
import { RateLimiterMemory, RateLimiterPostgres, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Redis } from 'ioredis';
import type { Caller } from '../accounts/accounts';
import type { Database } from '../db/schema';
import { KessaiError } from '../domain/errors';
import { DEFAULT_RATE_LIMITS, RATE_LIMIT_PROFILES, RATE_LIMIT_ZONES, type RateLimitOverrides, type RateLimitProfile, type RateLimitTable, type RateLimitZone, type ZoneLimits } from './rate-limit-profiles';
import { sendRefusal } from './refusal';

export { DEFAULT_RATE_LIMITS, RATE_LIMIT_PROFILES, RATE_LIMIT_PROFILE_NAMES, RATE_LIMIT_ZONES } from './rate-limit-profiles';
export type { RateLimitOverrides, RateLimitProfile, RateLimitTable, RateLimitZone, ZoneLimits } from './rate-limit-profiles';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The rate-limit zone of the route; without it the zone follows from the key and the path. */
    zone?: RateLimitZone;
  }
}

export interface RateLimitOptions {
  /**
   * `postgres`: counters shared by every process on the database (needs `db`); `redis`: shared by
   * every process on the Redis server (needs `redis`, connected); `memory`: this process only.
   */
  readonly store: 'postgres' | 'redis' | 'memory';
  /** The database whose `rate_limit_counters` table holds the counters (store `postgres`). */
  readonly db?: Kysely<Database>;
  /** The Redis connection (ioredis) that holds the counters (store `redis`); its owner closes it. */
  readonly redis?: Redis;
  /** The table the limits start from (default `spec`, v1 §8's). */
  readonly profile?: RateLimitProfile;
  /** Server-wide values laid over the profile's table. */
  readonly limits?: RateLimitOverrides;
  /** Per account id, values laid over the server-wide table (a benchmark account raised, say). */
  readonly accounts?: Readonly<Record<string, RateLimitOverrides>>;
  /** Length of a window in seconds; v1 §8 counts per second (default 1). */
  readonly windowSeconds?: number;
  /** The zone of a request; default `defaultZoneOf`. */
  readonly zoneOf?: (request: FastifyRequest, caller: Caller) => RateLimitZone;
}

/**
 * The caller the authentication hook set, if any (the hook is the server's, not this plugin's:
 * src/api/server.ts decorates every request with `caller`, null on the routes without a key).
 */
export function callerOf(request: FastifyRequest): Caller | undefined {
  return request.caller ?? undefined;
}

/**
 * v1 §8's `payment` zone: "create charge, capture, refund, reauth, finish 3-D Secure" — the charge
 * routes, and the 3-D Secure finish of a charge or of a token.
 */
const PAYMENT_PATH = /^\/v1\/(?:charges(?:\/[^/]+\/(?:capture|refund|reauth|tds_finish))?|tokens\/[^/]+\/tds_finish)\/?$/;

/**
 * The route's configured `zone`; else `pk` for a public key, `payment` for a POST to a charge
 * route of v1 §8's list, and `sk` for everything else a secret key does.
 */
export function defaultZoneOf(request: Pick<FastifyRequest, 'routeOptions' | 'method' | 'url'>, caller: Caller): RateLimitZone {
  const configured = request.routeOptions.config?.zone;
  if (configured !== undefined) return configured;
  if (caller.kind === 'public') return 'pk';
  const path = request.routeOptions.url ?? request.url.split('?')[0]!;
  if (request.method === 'POST' && PAYMENT_PATH.test(path)) return 'payment';
  return 'sk';
}

function checkLimit(value: unknown, where: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) throw new Error(`rate limit ${where} must be a whole number of requests of at least 1, got ${JSON.stringify(value)}`);
  return value;
}

function applyOverrides(table: RateLimitTable, overrides: RateLimitOverrides | undefined, where: string): RateLimitTable {
  if (overrides === undefined) return table;
  const mode = (name: 'live' | 'test'): ZoneLimits => {
    const given = overrides[name] ?? {};
    for (const zone of Object.keys(given)) {
      if (!(RATE_LIMIT_ZONES as readonly string[]).includes(zone)) throw new Error(`rate limit ${where}.${name}: unknown zone ${JSON.stringify(zone)} (zones: ${RATE_LIMIT_ZONES.join(', ')})`);
    }
    const merged = { ...table[name] };
    for (const zone of RATE_LIMIT_ZONES) if (given[zone] !== undefined) merged[zone] = checkLimit(given[zone], `${where}.${name}.${zone}`);
    return merged;
  };
  for (const key of Object.keys(overrides)) if (key !== 'live' && key !== 'test') throw new Error(`rate limit ${where}: unknown mode ${JSON.stringify(key)} (live or test)`);
  return { live: mode('live'), test: mode('test') };
}

/**
 * Reads the rate-limit configuration from JSON text (the server's `KESSAI_RATE_LIMITS`):
 * `{ "live": { "sk": 60 }, "test": { … }, "accounts": { "acct_bench": { "test": { "payment": 5000 } } } }`.
 * Unknown modes, zones or non-integer values are refused with a message naming them.
 */
export function parseRateLimits(text: string): Pick<RateLimitOptions, 'limits' | 'accounts'> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new Error(`rate limits are not JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('rate limits must be a JSON object');
  const { accounts, ...limits } = parsed as { accounts?: unknown } & RateLimitOverrides;
  applyOverrides(DEFAULT_RATE_LIMITS, limits, 'limits');
  if (accounts !== undefined && (typeof accounts !== 'object' || accounts === null || Array.isArray(accounts))) throw new Error('rate limits: accounts must be an object of account id → limits');
  for (const [account, overrides] of Object.entries((accounts ?? {}) as Record<string, RateLimitOverrides>)) applyOverrides(DEFAULT_RATE_LIMITS, overrides, `accounts.${account}`);
  return { limits, ...(accounts === undefined ? {} : { accounts: accounts as Record<string, RateLimitOverrides> }) };
}

/**
 * rate-limiter-flexible's PostgreSQL store speaks to a `pg`-style client (`query({ text, values })`
 * resolving to `{ rows }`); this one runs the library's statements through Kysely, so the limiter
 * uses the server's own pool.
 */
function kyselyClient(db: Kysely<Database>): { query(q: { text: string; values?: unknown[] }): Promise<{ rows: unknown[] }> } {
  return { query: (q) => db.executeQuery(CompiledQuery.raw(q.text, q.values ?? [])) };
}

const KEY_PREFIX = 'kessai';
const COUNTER_TABLE = 'rate_limit_counters';

/** One limiter per distinct budget (the library fixes `points` per instance); keys tell accounts apart. */
class Limiters {
  readonly #byPoints = new Map<number, RateLimiterAbstract>();
  constructor(
    private readonly options: RateLimitOptions,
    private readonly duration: number,
  ) {}

  of(points: number): RateLimiterAbstract {
    let limiter = this.#byPoints.get(points);
    if (limiter === undefined) {
      const memory = new RateLimiterMemory({ points, duration: this.duration, keyPrefix: KEY_PREFIX });
      const shared = { points, duration: this.duration, keyPrefix: KEY_PREFIX, insuranceLimiter: memory };
      switch (this.options.store) {
        case 'memory':
          limiter = memory;
          break;
        case 'redis':
          // While the connection is not ready, the insurance limiter answers at once (no queueing).
          limiter = new RateLimiterRedis({ ...shared, storeClient: this.options.redis!, rejectIfRedisNotReady: true });
          break;
        case 'postgres':
          limiter = new RateLimiterPostgres({
            ...shared,
            storeClient: kyselyClient(this.options.db!),
            storeType: 'pool',
            tableName: COUNTER_TABLE,
            tableCreated: true, // by migration 000025, with named constraints
          });
          break;
      }
      this.#byPoints.set(points, limiter);
    }
    return limiter;
  }
}

/**
 * Leases are 1/LEASE_SHARE of the budget: a budget under 2 × LEASE_SHARE leases single points, and
 * is counted request by request.
 */
export const LEASE_SHARE = 100;

/** Points a process takes from the shared store at once for a budget of `points` a window. */
export function leaseSize(points: number): number {
  return Math.max(1, Math.floor(points / LEASE_SHARE));
}

/** One point of `key`'s budget in the store: undefined when granted, else the ms before the window ends. */
async function consumeOne(limiter: RateLimiterAbstract, key: string): Promise<number | undefined> {
  try {
    await limiter.consume(key);
    return undefined;
  } catch (refusal) {
    // A RateLimiterRes is "no points left"; anything else is a fault of the store and its
    // insurance limiter both, which the server's error handler answers.
    if (refusal instanceof RateLimiterRes) return refusal.msBeforeNext;
    throw refusal;
  }
}

interface Lease {
  /** Points of the lease not yet handed out. */
  left: number;
  /** When the store's window of the lease ends (this process's monotonic clock, ms). */
  until: number;
  /** The store had no more points this window: refuse without asking it again until `until`. */
  spent: boolean;
  /** A lease being taken: requests of the key wait for it rather than each asking the store. */
  pending: Promise<void> | undefined;
}

/**
 * This process's leases of shared budgets, per limiter key. A lease is one `consume(key, size)`
 * in the store; the store's counter rises by `size` atomically, so leases of different processes
 * hold disjoint points of the window. A lease the store refuses still holds the points its counter
 * had left before it (`points − (consumedPoints − size)`, possibly none): they are handed out, then
 * the key is refused until the window ends. At most `points` requests are let through a window,
 * across all processes.
 */
class LeasedBudgets {
  readonly #leases = new Map<string, Lease>();
  constructor(private readonly now: () => number = () => performance.now()) {}

  /** One point of `key`'s budget of `points`: undefined when granted, else the ms before the window ends. */
  async take(limiter: RateLimiterAbstract, key: string, points: number): Promise<number | undefined> {
    for (;;) {
      const lease = this.#leases.get(key);
      if (lease?.pending !== undefined) {
        await lease.pending;
        continue;
      }
      const now = this.now();
      if (lease !== undefined && now < lease.until) {
        if (lease.left > 0) {
          lease.left -= 1;
          return undefined;
        }
        if (lease.spent) return lease.until - now;
      }
      return this.#lease(limiter, key, points);
    }
  }

  /** Takes a new lease of `key` and its first point for the request that took it (whatever the clock says by then). */
  async #lease(limiter: RateLimiterAbstract, key: string, points: number): Promise<number | undefined> {
    const size = leaseSize(points);
    let settle!: () => void;
    const lease: Lease = { left: 0, until: 0, spent: true, pending: new Promise((resolve) => (settle = resolve)) };
    if (this.#leases.size >= 10_000) this.#sweep();
    this.#leases.set(key, lease);
    try {
      let answer: RateLimiterRes;
      let granted: number;
      try {
        answer = await limiter.consume(key, size);
        granted = size;
      } catch (refusal) {
        if (!(refusal instanceof RateLimiterRes)) throw refusal;
        answer = refusal;
        granted = Math.max(0, Math.min(size, points - (refusal.consumedPoints - size)));
      }
      lease.left = Math.max(0, granted - 1);
      lease.spent = granted < size;
      lease.until = this.now() + answer.msBeforeNext;
      return granted > 0 ? undefined : Math.max(0, answer.msBeforeNext);
    } catch (error) {
      this.#leases.delete(key);
      throw error;
    } finally {
      lease.pending = undefined;
      settle();
    }
  }

  /** Forgets the leases whose window has ended (bounds the map: keys are accounts × modes × zones). */
  #sweep(): void {
    const now = this.now();
    for (const [key, lease] of this.#leases) if (lease.pending === undefined && lease.until <= now) this.#leases.delete(key);
  }
}

function overCapacity(request: FastifyRequest, reply: FastifyReply, zone: RateLimitZone, msBeforeNext: number): FastifyReply {
  const error = new KessaiError('over_capacity', { message: `Too many requests in the ${zone} zone; retry with exponential back-off.` });
  return sendRefusal(request, reply.header('retry-after', String(Math.max(1, Math.ceil(msBeforeNext / 1000)))), error);
}

async function rateLimitsPlugin(app: FastifyInstance, options: RateLimitOptions): Promise<void> {
  if (options.store === 'postgres' && options.db === undefined) throw new Error('rate limits on the postgres store need db');
  if (options.store === 'redis' && options.redis === undefined) throw new Error('rate limits on the redis store need redis');
  const windowSeconds = options.windowSeconds ?? 1;
  if (!Number.isInteger(windowSeconds) || windowSeconds < 1) throw new Error(`rate limit windowSeconds must be a whole number of seconds of at least 1, got ${windowSeconds}`);
  const table = applyOverrides(RATE_LIMIT_PROFILES[options.profile ?? 'spec'], options.limits, 'limits');
  const perAccount = new Map(Object.entries(options.accounts ?? {}).map(([account, overrides]) => [account, applyOverrides(table, overrides, `accounts.${account}`)]));
  const limiters = new Limiters(options, windowSeconds);
  const leases = new LeasedBudgets();
  const zoneOf = options.zoneOf ?? defaultZoneOf;

  app.addHook('onRequest', async (request, reply) => {
    const caller = callerOf(request);
    if (caller === undefined) return;
    const zone = zoneOf(request, caller);
    const mode = caller.livemode ? 'live' : 'test';
    const points = (perAccount.get(caller.accountId) ?? table)[mode][zone];
    const key = `${caller.accountId}:${mode}:${zone}`;
    // The memory store is this process's own: nothing to save by leasing from it.
    const wait = options.store !== 'memory' && leaseSize(points) > 1 ? await leases.take(limiters.of(points), key, points) : await consumeOne(limiters.of(points), key);
    if (wait !== undefined) return overCapacity(request, reply, zone, wait);
  });
}

/**
 * The plugin: `app.register(rateLimits, { store: 'postgres', db, limits, accounts })`, after the
 * hook that authenticates. Not encapsulated, so it limits every route of the server.
 */
export const rateLimits = fastifyPlugin(rateLimitsPlugin, { name: 'kessai-rate-limits', fastify: '5.x' });
