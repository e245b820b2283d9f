/**
 * `kessai serve` on PostgreSQL with `KESSAI_REDIS_URL`: the rate-limit
 * counters live in that Redis (the real one of KESSAI_TEST_REDIS_URL, default the machine's
 * redis://127.0.0.1:6379, which CI has), not in `rate_limit_counters`; a Redis that cannot be
 * reached stops start-up with a message that does not show the URL.
 *
 * PostgreSQL only: on the embedded database, which one process owns, `serve` counts in memory and
 * ignores the variable (a warning says so).
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, isPostgres, type TestDatabase } from '../support/database';
import { call } from '../support/http-server';
import { spawnKessai, startServe, type SpawnedWorker } from '../support/spawn-worker';

const REDIS_URL = process.env.KESSAI_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
let database: TestDatabase;
let env: Record<string, string>;
let secret: string;
let accountId: string;
const running: SpawnedWorker[] = [];
const redis = new Redis(REDIS_URL, { lazyConnect: true });

beforeAll(async () => {
  if (!isPostgres()) return;
  database = await createTestDatabase();
  env = { DATABASE_URL: database.url!, KESSAI_LOG_LEVEL: 'warn', KESSAI_RATE_LIMITS: '', KESSAI_REDIS_URL: '' };
  // An account id of this run's own: Redis outlives the scratch database.
  accountId = `acct_redis_${randomBytes(4).toString('hex')}`;
  const created = spawnKessai(['accounts', 'create', '--name', 'Redis Shop', '--id', accountId, '--json'], env);
  expect((await created.exited).code).toBe(0);
  secret = (JSON.parse(created.output()) as { keys: { test: { secret: string } } }).keys.test.secret;
}, 60_000);

afterAll(async () => {
  for (const server of running) server.child.kill('SIGKILL');
  await Promise.all(running.map((s) => s.exited));
  if (redis.status !== 'wait') await redis.quit();
  await database?.drop();
});

describe.runIf(isPostgres())('kessai serve with KESSAI_REDIS_URL', () => {
  it("counts in Redis, shared by two server processes: the zone's budget + 1 requests → 429 over_capacity", async () => {
    // A one-minute window would need a limiter option serve does not have; 3 requests in one second fit.
    const limits = JSON.stringify({ accounts: { [accountId]: { test: { sk: 3 } } } });
    const servers = await Promise.all([1, 2].map(() => startServe(['--no-worker'], { ...env, KESSAI_REDIS_URL: REDIS_URL, KESSAI_RATE_LIMITS: limits })));
    running.push(...servers.map((s) => s.server));
    // Warm both up on a route that is not counted (health), so the counted requests come quickly.
    for (const s of servers) expect((await fetch(s.apibase.replace(/\/v1$/, '/health'))).status).toBe(200);
    let statuses: number[] = [];
    // Four requests within one one-second window (retried whole if a window boundary split them).
    for (let attempt = 0; attempt < 5; attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 1000 - (Date.now() % 1000) + 20));
      statuses = [];
      for (const s of [servers[0]!, servers[1]!, servers[0]!, servers[1]!]) statuses.push((await call(s.apibase, secret, 'GET', '/charges/ch_none')).status);
      if (statuses.filter((s) => s === 404).length === 3) break;
    }
    expect(statuses).toEqual([404, 404, 404, 429]);
    await redis.connect();
    expect(await redis.exists(`kessai:${accountId}:test:sk`)).toBe(1);
    expect(await database.store.db.selectFrom('rate_limit_counters').select('key').where('key', 'like', `kessai:${accountId}:%`).execute()).toEqual([]);
  }, 60_000);

  it('a Redis that cannot be reached stops start-up, naming the variable, not the URL', async () => {
    const url = 'redis://:s3cret-password@127.0.0.1:1';
    await expect(startServe(['--no-worker'], { ...env, KESSAI_REDIS_URL: url })).rejects.toThrow(/KESSAI_REDIS_URL: cannot connect to Redis/);
    await expect(startServe(['--no-worker'], { ...env, KESSAI_REDIS_URL: url })).rejects.not.toThrow(/s3cret-password/);
  }, 60_000);
});
