/**
 * Rate limits (v1 §8) on the real server (buildServer with the server's own policies, as `kessai
 * serve` wires them), the accounts' real keys and its real routes: per account, zone and mode; 429
 * `over_capacity` in the v1 error body; the official SDK's back-off gets through. Each test runs on
 * every store the server uses: `memory` on the embedded database (as the embedded `serve` counts,
 * one process), and on PostgreSQL `postgres` (`rate_limit_counters`, shared by every server process
 * on the database) and `redis` (`KESSAI_REDIS_URL`) against the real Redis of KESSAI_TEST_REDIS_URL
 * (default the machine's, redis://127.0.0.1:6379, which CI has too), with account ids of this run's
 * own so counters of an earlier run never count. Most tests use a 60-second window so a slow
 * machine cannot split a burst over two windows; the SDK's back-off uses v1 §8's one second.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import Payjp from 'payjp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, type AccountKeys } from '../../src/accounts/accounts';
import { DEFAULT_RATE_LIMITS, defaultZoneOf, leaseSize, parseRateLimits, type RateLimitOptions } from '../../src/api/rate-limits';
import { openStore, type Store } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import type { Context } from '../../src/engine/context';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { createTestDatabase, isPostgres, testContext, type TestDatabase } from '../support/database';
import { call, serveOn, type Served } from '../support/http-server';

const opened: Served[] = [];
const redisConnections: Redis[] = [];
const REDIS_URL = process.env.KESSAI_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const RUN = randomBytes(4).toString('hex');

afterAll(async () => {
  await Promise.all(opened.map((a) => a.close()));
  await Promise.all(redisConnections.map((r) => r.quit()));
});

/**
 * A Redis connection of its own (as each server process has), closed after the file; connected
 * before use, as `kessai serve` connects before it listens (until then the limiter would count in
 * its in-memory insurance).
 */
async function redisConnection(): Promise<Redis> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  redisConnections.push(redis);
  await redis.connect();
  return redis;
}

type RateLimitStore = RateLimitOptions['store'];
type Limits = Pick<RateLimitOptions, 'limits' | 'accounts' | 'windowSeconds'>;

/** A token made with the public key (zone pk), then a charge with the secret key (zone payment). */
async function charge(apibase: string, keys: AccountKeys): Promise<string> {
  const token = await call(apibase, keys.test.public, 'POST', '/tokens', { 'card[number]': TEST_CARDS.visa.number, 'card[exp_month]': '12', 'card[exp_year]': '2035', 'card[cvc]': '123' });
  expect(token.status).toBe(200);
  const created = await call(apibase, keys.test.secret, 'POST', '/charges', { amount: '500', currency: 'jpy', card: token.body.id! });
  expect(created.status).toBe(200);
  return created.body.id!;
}

// The memory store is the embedded database's (its server is one process); the shared stores are PostgreSQL's.
const STORES: readonly RateLimitStore[] = ['memory', ...(isPostgres() ? (['postgres', 'redis'] as const) : [])];
for (const store of STORES) describe(`rate limits (${store} store)`, () => {
  let database: TestDatabase | undefined;
  let embedded: Store | undefined;
  let ctx: Context;

  beforeAll(async () => {
    if (store === 'memory') {
      embedded = await openStore({ dataDir: 'memory://' });
      await migrate(embedded);
      ctx = testContext(embedded, { seed: 61 });
    } else {
      database = await createTestDatabase();
      ctx = testContext(database.store, { seed: 61 });
    }
  });
  afterAll(async () => {
    await Promise.all(opened.splice(0).map((a) => a.close()));
    await embedded?.close();
    await database?.drop();
  });

  /** A server process on this store's database (on `on`, its own pool, when given). */
  const app = async (options: Limits = {}, on: Context = ctx): Promise<Served> => {
    const served = await serveOn(on, store === 'memory' ? 'pglite' : 'postgres', { rateLimits: { windowSeconds: 60, ...options }, ...(store === 'redis' ? { redis: await redisConnection() } : {}) });
    opened.push(served);
    return served;
  };
  /** Another server process on the same PostgreSQL database, with a pool of its own. */
  const secondProcess = async (seed: number): Promise<Context> => testContext(await database!.openAnother(), { seed });

  /** A fresh account per test, so counters of one test never reach another (the window is long). */
  let accounts = 0;
  async function freshAccount(options: { live?: boolean } = {}): Promise<AccountKeys & { id: string }> {
    accounts += 1;
    const id = `acct_rl${RUN}_${store}_${accounts}`;
    return { id, ...(await createAccount(ctx, { name: `Rate ${accounts}`, id, liveEnabled: options.live ?? false })).keys };
  }
  const customersOf = async (account: string) => (await ctx.db.selectFrom('customers').select('customer_id').where('account_id', '=', account).execute()).length;

  it('v1 §8 defaults: live pk 10, payment 14, sk 30; test 2 each', () => {
    expect(DEFAULT_RATE_LIMITS).toEqual({ live: { pk: 10, payment: 14, sk: 30 }, test: { pk: 2, payment: 2, sk: 2 } });
  });

  it("the zone's budget + 1 requests: the last is 429 over_capacity in the v1 error body, before any work", async () => {
    const keys = await freshAccount();
    const limited = await app({ limits: { test: { sk: 5 } } });
    // sk (test mode, 2 by default; here 5): customer creations, each of which writes a row.
    for (let i = 0; i < 5; i += 1) expect((await call(limited.apibase, keys.test.secret, 'POST', '/customers', { email: `c${i}@example.com` })).status).toBe(200);
    const refused = await call(limited.apibase, keys.test.secret, 'POST', '/customers', { email: 'refused@example.com' });
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({ error: { status: 429, type: 'client_error', code: 'over_capacity', message: expect.stringContaining('sk zone') } });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await customersOf(keys.id)).toBe(5);
  });

  it('zones, modes and accounts are counted apart', async () => {
    const keys = await freshAccount({ live: true });
    const other = await freshAccount();
    const limited = await app();
    const id = await charge(limited.apibase, keys); // pk 1, payment 1 (test mode: 2 each)
    expect((await call(limited.apibase, keys.test.secret, 'GET', `/charges/${id}`)).status).toBe(200); // sk 1
    expect((await call(limited.apibase, keys.test.secret, 'GET', `/charges/${id}`)).status).toBe(200); // sk 2
    expect((await call(limited.apibase, keys.test.secret, 'GET', `/charges/${id}`)).body.error?.code).toBe('over_capacity'); // sk 3
    // payment still has its second request, then refuses.
    const token = () => call(limited.apibase, keys.test.public, 'POST', '/tokens', { 'card[number]': TEST_CARDS.visa.number, 'card[exp_month]': '12', 'card[exp_year]': '2035', 'card[cvc]': '123' });
    const paid = await call(limited.apibase, keys.test.secret, 'POST', '/charges', { amount: '500', currency: 'jpy', card: (await token()).body.id! });
    expect(paid.status).toBe(200);
    expect((await call(limited.apibase, keys.test.secret, 'POST', `/charges/${id}/capture`)).body.error?.code).toBe('over_capacity');
    // pk: the public key's token creations, 2 in test mode, both used above.
    expect((await token()).body.error?.code).toBe('over_capacity');
    // Live mode has its own counters (sk 30), and so has another account.
    expect((await call(limited.apibase, keys.live.secret, 'GET', `/charges/${id}`)).status).toBe(404);
    expect((await call(limited.apibase, other.test.secret, 'GET', `/charges/${id}`)).status).toBe(404);
  });

  it('a per-account override raises one account (a benchmark account) and leaves the others on the table', async () => {
    const raised = await freshAccount();
    const plain = await freshAccount();
    const limited = await app({ accounts: { [raised.id]: { test: { sk: 6 } } } });
    const statuses = async (key: string) => {
      const out: number[] = [];
      for (let i = 0; i < 7; i += 1) out.push((await call(limited.apibase, key, 'GET', '/charges/ch_none')).status);
      return out;
    };
    expect(await statuses(raised.test.secret)).toEqual([404, 404, 404, 404, 404, 404, 429]);
    expect(await statuses(plain.test.secret)).toEqual([404, 404, 429, 429, 429, 429, 429]);
  });

  it('a request that fails authentication is refused by authentication, not counted', async () => {
    const keys = await freshAccount();
    const limited = await app();
    for (let i = 0; i < 3; i += 1) expect((await call(limited.apibase, 'sk_test_wrong', 'GET', '/charges/ch_none')).status).toBe(401);
    expect((await call(limited.apibase, keys.test.secret, 'GET', '/charges/ch_none')).status).toBe(404);
  });

  it('the official SDK with maxRetry backs off on 429 and completes (v1 §8, one-second windows)', async () => {
    const keys = await freshAccount();
    const limited = await app({ windowSeconds: 1 });
    const id = await charge(limited.apibase, keys);
    const payjp = Payjp(keys.test.secret, { apibase: limited.apibase, maxRetry: 10, retryInitialDelay: 200, retryMaxDelay: 1000 });
    const retrieved = await Promise.all([1, 2, 3, 4, 5].map(() => payjp.charges.retrieve(id)));
    expect(retrieved.map((c) => c.id)).toEqual([id, id, id, id, id]);
  });

  it('the official SDK without retries surfaces the 429 with the v1 body: 6 requests at once on a budget of 2, 4 refused', async () => {
    const keys = await freshAccount();
    const limited = await app();
    const id = await charge(limited.apibase, keys);
    const impatient = Payjp(keys.test.secret, { apibase: limited.apibase });
    const outcomes = await Promise.allSettled([1, 2, 3, 4, 5, 6].map(() => impatient.charges.retrieve(id)));
    expect(outcomes.filter((o) => o.status === 'fulfilled').map((o) => o.value.id)).toEqual([id, id]);
    const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    expect(refused).toHaveLength(4);
    for (const r of refused) expect(r.reason).toMatchObject({ status: 429, response: { body: { error: { code: 'over_capacity', status: 429 } } } });
  });

  /** The shared store's count of an account's test-mode sk zone this window. */
  const storedCount = async (account: string): Promise<number> => {
    const key = `kessai:${account}:test:sk`;
    if (store === 'redis') return Number((await (await redisConnection()).get(key)) ?? 0);
    return (await ctx.db.selectFrom('rate_limit_counters').select('points').where('key', '=', key).executeTakeFirst())?.points ?? 0;
  };
  const statusesOf = async (instances: readonly Served[], key: string, n: number): Promise<number[]> => {
    const out: number[] = [];
    for (let i = 0; i < n; i += 1) out.push((await call(instances[i % instances.length]!.apibase, key, 'GET', '/charges/ch_none')).status);
    return out;
  };

  it.runIf(store !== 'memory')('a large budget is taken from the shared store in leases of 1/100, never past the budget across two processes', async () => {
    expect([leaseSize(2), leaseSize(199), leaseSize(200), leaseSize(1_000_000)]).toEqual([1, 1, 2, 10_000]);
    const keys = await freshAccount();
    const one = await app({ limits: { test: { sk: 200 } } });
    const two = await app({ limits: { test: { sk: 200 } } }, await secondProcess(63));
    expect(await statusesOf([one], keys.test.secret, 1)).toEqual([404]);
    expect(await storedCount(keys.id)).toBe(2); // one lease of 2 points, one handed out
    expect(await statusesOf([one], keys.test.secret, 1)).toEqual([404]);
    expect(await storedCount(keys.id)).toBe(2); // the lease's second point: no store round trip
    // Alternating between the two processes, each leasing its own points: of the 198 left, `two`
    // leases 50 × 2 and `one` 49 × 2, so `one` is refused at its 99th request (the store has
    // none left) while `two` still hands out its last point. 200 in all got through, not one more.
    const statuses = await statusesOf([two, one], keys.test.secret, 200);
    expect(statuses.slice(0, 197)).toEqual(Array(197).fill(404));
    expect(statuses.slice(197)).toEqual([429, 404, 429]);
    expect(2 + statuses.filter((s) => s === 404).length).toBe(200);
    expect(await storedCount(keys.id)).toBe(202); // `one`'s refused lease
    // `two`'s refused lease, then every process refuses until the window ends without asking the store.
    expect(await statusesOf([one, two, one, two], keys.test.secret, 4)).toEqual([429, 429, 429, 429]);
    expect(await storedCount(keys.id)).toBe(204);
    expect(await statusesOf([one, two], keys.test.secret, 4)).toEqual([429, 429, 429, 429]);
    expect(await storedCount(keys.id)).toBe(204);
  });

  it.runIf(store !== 'memory')('a lease the store refuses still hands out the points that were left, then refuses', async () => {
    const keys = await freshAccount();
    const limited = await app({ limits: { test: { sk: 201 } } }); // leases of 2
    const statuses = await statusesOf([limited], keys.test.secret, 203);
    expect(statuses.filter((s) => s === 404).length).toBe(201);
    expect(statuses.slice(201)).toEqual([429, 429]);
    expect(await storedCount(keys.id)).toBe(202); // the 101st lease found 1 point of 2 left
  });

  it.runIf(store !== 'memory')('concurrent requests wait for one lease instead of each asking the store', async () => {
    const keys = await freshAccount();
    const limited = await app({ limits: { test: { sk: 1000 } } }); // leases of 10
    const statuses = await Promise.all(Array.from({ length: 40 }, () => call(limited.apibase, keys.test.secret, 'GET', '/charges/ch_none').then((r) => r.status)));
    expect(statuses).toEqual(Array(40).fill(404));
    expect(await storedCount(keys.id)).toBe(40); // four leases of 10, all handed out
  });

  it.runIf(store === 'redis')('two app instances on two Redis connections (two server processes) share one count in Redis', async () => {
    const keys = await freshAccount();
    const one = await app({ limits: { test: { sk: 3 } } });
    const two = await app({ limits: { test: { sk: 3 } } });
    const statuses = [];
    for (const instance of [one, two, one, two]) statuses.push((await call(instance.apibase, keys.test.secret, 'GET', '/charges/ch_none')).status);
    expect(statuses).toEqual([404, 404, 404, 429]);
    expect(await (await redisConnection()).get(`kessai:${keys.id}:test:sk`)).toBe('4');
    // Nothing went to the PostgreSQL store.
    expect(await ctx.db.selectFrom('rate_limit_counters').select('key').where('key', 'like', `kessai:${keys.id}:%`).execute()).toEqual([]);
  });

  it.runIf(store === 'redis')('Redis unreachable: the in-memory insurance limiter counts instead of refusing every request', async () => {
    const keys = await freshAccount();
    // A port nothing listens on; no offline queue, so each consume fails at once and the insurance answers.
    const down = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    down.on('error', () => undefined);
    const started = await serveOn(ctx, 'postgres', { redis: down, rateLimits: { windowSeconds: 60, limits: { test: { sk: 2 } } } });
    opened.push(started);
    const statuses = [];
    for (let i = 0; i < 3; i += 1) statuses.push((await call(started.apibase, keys.test.secret, 'GET', '/charges/ch_none')).status);
    expect(statuses).toEqual([404, 404, 429]);
    down.disconnect();
  });

  it.runIf(store === 'postgres')('two app instances on two pools (two server processes) share one count on PostgreSQL', async () => {
    const keys = await freshAccount();
    const otherCtx = await secondProcess(62);
    const one = await app({ limits: { test: { sk: 3 } } });
    const two = await app({ limits: { test: { sk: 3 } } }, otherCtx);
    const statuses = [];
    for (const instance of [one, two, one, two]) statuses.push((await call(instance.apibase, keys.test.secret, 'GET', '/charges/ch_none')).status);
    expect(statuses).toEqual([404, 404, 404, 429]);
    const counter = await ctx.db.selectFrom('rate_limit_counters').select(['points']).where('key', '=', `kessai:${keys.id}:test:sk`).executeTakeFirstOrThrow();
    expect(counter.points).toBe(4);
  });

  it.runIf(store === 'memory')('the memory store counts per process: a second instance has its own budget', async () => {
    const keys = await freshAccount();
    const one = await app();
    const two = await app();
    const statuses = [];
    for (const instance of [one, one, one, two]) statuses.push((await call(instance.apibase, keys.test.secret, 'GET', '/charges/ch_none')).status);
    expect(statuses).toEqual([404, 404, 429, 404]);
  });
});

describe('zones (v1 §8)', () => {
  const secret = { accountId: 'acct_x', livemode: false, kind: 'secret' as const };
  const zoneOf = (method: string, url: string, config: { zone?: 'pk' | 'payment' | 'sk' } = {}, caller: typeof secret | { accountId: string; livemode: boolean; kind: 'public' } = secret) =>
    defaultZoneOf({ method, url, routeOptions: { url, config } } as unknown as Parameters<typeof defaultZoneOf>[0], caller);

  it('"payment: create charge, capture, refund, reauth, finish 3-D Secure"; "pk: token creation with a public key"; "sk: all other secret-key requests"', () => {
    for (const url of ['/v1/charges', '/v1/charges/:id/capture', '/v1/charges/:id/refund', '/v1/charges/:id/reauth', '/v1/charges/:id/tds_finish', '/v1/tokens/:id/tds_finish']) {
      expect([url, zoneOf('POST', url)]).toEqual([url, 'payment']);
    }
    for (const [method, url] of [['GET', '/v1/charges'], ['GET', '/v1/charges/:id'], ['POST', '/v1/charges/:id'], ['POST', '/v1/customers'], ['POST', '/v1/tokens'], ['DELETE', '/v1/subscriptions/:id']] as const) {
      expect([method, url, zoneOf(method, url)]).toEqual([method, url, 'sk']);
    }
    expect(zoneOf('POST', '/v1/tokens', {}, { accountId: 'acct_x', livemode: false, kind: 'public' })).toBe('pk');
    expect(zoneOf('GET', '/v1/accounts', { zone: 'payment' })).toBe('payment');
  });
});

describe('rate-limit configuration', () => {
  it('reads server-wide and per-account values from JSON and refuses unknown modes, zones and bad values', () => {
    expect(parseRateLimits('{"test":{"payment":100},"accounts":{"acct_bench":{"test":{"payment":5000,"sk":5000}}}}')).toEqual({
      limits: { test: { payment: 100 } },
      accounts: { acct_bench: { test: { payment: 5000, sk: 5000 } } },
    });
    expect(() => parseRateLimits('{"test":{"charges":1}}')).toThrow(/unknown zone "charges"/);
    expect(() => parseRateLimits('{"sandbox":{"sk":1}}')).toThrow(/unknown mode "sandbox"/);
    expect(() => parseRateLimits('{"live":{"sk":0}}')).toThrow(/limits.live.sk must be a whole number/);
    expect(() => parseRateLimits('{"accounts":{"acct_x":{"test":{"sk":1.5}}}}')).toThrow(/accounts.acct_x.test.sk/);
    expect(() => parseRateLimits('[1]')).toThrow(/JSON object/);
    expect(() => parseRateLimits('{')).toThrow(/not JSON/);
  });
});
