/**
 * The Idempotency-Key crash window, with a real kill (issue 15, point 7): `kessai serve` on a
 * scratch PostgreSQL database dies by SIGKILL at a fault point of a keyed `charges.create`
 * (KESSAI_FAULT, src/api/idempotency.ts), is started again, and the client retries with the same
 * key. Dying right after the commit: exactly one charge, and the retry gets the stored response.
 * Dying right before it: nothing was kept, and the retry charges once, at once (no stale wait).
 *
 * PostgreSQL only: the embedded database is one process's files, and what a SIGKILL leaves of them
 * is not what this test is about; the request transaction is the same code on both.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { createTestDatabase, isPostgres, type TestDatabase } from '../support/database';
import { call } from '../support/plugin-app';
import { spawnKessai, startServe, type SpawnedWorker } from '../support/spawn-worker';

let database: TestDatabase;
let env: Record<string, string>;
let secret: string;
let publicKey: string;
const running: SpawnedWorker[] = [];

beforeAll(async () => {
  if (!isPostgres()) return;
  database = await createTestDatabase();
  env = { DATABASE_URL: database.url!, KESSAI_LOG_LEVEL: 'warn', KESSAI_FAULT: '' };
  const created = spawnKessai(['accounts', 'create', '--name', 'Crash Shop', '--json'], env);
  expect((await created.exited).code).toBe(0);
  const { keys } = JSON.parse(created.output()) as { keys: { test: { secret: string; public: string } } };
  secret = keys.test.secret;
  publicKey = keys.test.public;
}, 60_000);

afterAll(async () => {
  for (const server of running) server.child.kill('SIGKILL');
  await Promise.all(running.map((s) => s.exited));
  await database?.drop();
});

async function serve(fault: string): Promise<{ server: SpawnedWorker; apibase: string }> {
  const started = await startServe([], { ...env, KESSAI_FAULT: fault });
  running.push(started.server);
  return started;
}

async function customerOn(apibase: string): Promise<string> {
  const token = await call(apibase, publicKey, 'POST', '/tokens', { 'card[number]': TEST_CARDS.visa.number, 'card[exp_month]': '12', 'card[exp_year]': '2035', 'card[cvc]': '123' });
  return (await call(apibase, secret, 'POST', '/customers', { card: token.body.id! })).body.id!;
}

const chargesOf = (customer: string) => database.store.db.selectFrom('charges').select(['charge_id', 'amount']).where('customer_id', '=', customer).execute();
const keyRow = (key: string) => database.store.db.selectFrom('idempotency_keys').select(['state', 'status_code', 'response_body']).where('idempotency_key', '=', key).execute();

describe.skipIf(!isPostgres())('a keyed charges.create survives the death of its server', () => {
  it('killed right after the commit: one charge, and the retry after a restart replays its response', async () => {
    const first = await serve('after-operation-commit');
    // Unkeyed requests never reach the fault point.
    const customer = await customerOn(first.apibase);
    const key = `crash-after-${customer}`;
    const body = { amount: '2500', currency: 'jpy', customer };
    await expect(call(first.apibase, secret, 'POST', '/charges', body, { 'idempotency-key': key })).rejects.toThrow();
    expect(await first.server.exited).toMatchObject({ signal: 'SIGKILL' });
    const charges = await chargesOf(customer);
    expect(charges).toEqual([{ charge_id: expect.any(String), amount: 2500 }]);
    expect(await keyRow(key)).toEqual([{ state: 'done', status_code: 200, response_body: expect.any(String) }]);

    const second = await serve('');
    const retried = await call(second.apibase, secret, 'POST', '/charges', body, { 'idempotency-key': key });
    expect(retried.status).toBe(200);
    expect(retried.headers.get('idempotent-replayed')).toBe('true');
    expect(retried.body).toMatchObject({ object: 'charge', id: charges[0]!.charge_id, amount: 2500, paid: true, customer });
    // The response the first request would have sent is the charge as it is.
    expect(retried.body).toEqual((await call(second.apibase, secret, 'GET', `/charges/${charges[0]!.charge_id}`)).body);
    expect(await chargesOf(customer)).toEqual(charges);
  }, 90_000);

  it('killed right before the commit: nothing kept, and the retry after a restart charges once, at once', async () => {
    const first = await serve('before-operation-commit');
    const customer = await customerOn(first.apibase);
    const key = `crash-before-${customer}`;
    const body = { amount: '3100', currency: 'jpy', customer };
    await expect(call(first.apibase, secret, 'POST', '/charges', body, { 'idempotency-key': key })).rejects.toThrow();
    expect(await first.server.exited).toMatchObject({ signal: 'SIGKILL' });
    expect(await chargesOf(customer)).toEqual([]);
    expect(await keyRow(key)).toEqual([]);

    const second = await serve('');
    const retried = await call(second.apibase, secret, 'POST', '/charges', body, { 'idempotency-key': key });
    expect(retried).toMatchObject({ status: 200, body: { object: 'charge', amount: 3100, paid: true, customer } });
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
    expect(await chargesOf(customer)).toEqual([{ charge_id: retried.body.id, amount: 3100 }]);
  }, 90_000);

  it('refuses a KESSAI_FAULT it does not know, before it opens anything', async () => {
    await expect(startServe([], { ...env, KESSAI_FAULT: 'sometimes' })).rejects.toThrow(/KESSAI_FAULT must be one of before-operation-commit, after-operation-commit/);
  }, 60_000);
});
