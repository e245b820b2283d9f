/**
 * Idempotency keys on the real server (buildServer with the server's own policies, as `kessai
 * serve` wires them), the accounts' real keys and its real routes that write charges: a retry
 * returns the same response without doing the work again, the same key with another request is
 * refused, two concurrent requests with one key do the work once (on PostgreSQL from two server
 * instances on two pools, as two server processes), server faults are not kept, and keys expire
 * after 24 hours and are purged. Requests in flight are held at a gated card network, and a retry
 * is known to wait once the server has read the key's row `pending`: nothing is ordered by sleeps.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, type AccountKeys } from '../../src/accounts/accounts';
import { purgeExpiredIdempotencyKeys, requestHash } from '../../src/api/idempotency';
import { IDEMPOTENCY_TTL_MS } from '../../src/domain/limits';
import { simulatedCardNetwork, type CardNetwork } from '../../src/processor/card-network';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { createTestDatabase, isPostgres, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { call, commitFailsOnce, serveOn, type Served, type ServeOptions } from '../support/http-server';
import { watchPendingKeys } from '../support/pending-key-watch';
import { gatedNetwork } from '../support/recording-network';

type Ctx = ReturnType<typeof testContext>;
let database: TestDatabase;
let ctx: Ctx;
let keys: AccountKeys;
let server: Served;
const opened: Served[] = [];
const ACCOUNT = 'acct_idempotent';
let seed = 71;

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 71 });
  keys = (await createAccount(ctx, { name: 'Idempotent Shop', id: ACCOUNT, liveEnabled: true })).keys;
  server = await open(ctx);
});
afterAll(async () => {
  await Promise.all(opened.map((a) => a.close()));
  await database?.drop();
});

/** A server process on `on` (its database handle, clock and card network). */
async function open(on: Ctx, idempotency: ServeOptions['idempotency'] = {}): Promise<Served> {
  const started = await serveOn(on, database.kind, { idempotency: { purgeIntervalMs: 0, ...idempotency } });
  opened.push(started);
  return started;
}

/** A context on the file's database with its own seeded ids (and, on PostgreSQL with `pool`, its own pool: another server process). */
async function contextWith(processor: CardNetwork = simulatedCardNetwork(), options: { pool?: boolean } = {}): Promise<Ctx> {
  seed += 1;
  const store = options.pool && isPostgres() ? await database.openAnother() : database.store;
  return { ...testContext(store, { seed }), processor };
}

async function customer(apibase = server.apibase): Promise<string> {
  const token = await call(apibase, keys.test.public, 'POST', '/tokens', { 'card[number]': TEST_CARDS.visa.number, 'card[exp_month]': '12', 'card[exp_year]': '2035', 'card[cvc]': '123' });
  return (await call(apibase, keys.test.secret, 'POST', '/customers', { card: token.body.id! })).body.id!;
}

async function chargesOf(customerId: string) {
  return ctx.db.selectFrom('charges').select(['charge_id', 'amount', 'paid']).where('account_id', '=', ACCOUNT).where('customer_id', '=', customerId).orderBy('charge_id').execute();
}
const chargeCount = async () => (await ctx.db.selectFrom('charges').select('charge_id').where('account_id', '=', ACCOUNT).execute()).length;
const customerCount = async () => (await ctx.db.selectFrom('customers').select('customer_id').where('account_id', '=', ACCOUNT).execute()).length;

const key = (name: string) => ({ 'idempotency-key': `${name}-${(seed += 1)}` });

describe('Idempotency-Key on POST', () => {
  it('a retry returns the same response without doing the work again', async () => {
    const cus = await customer();
    const header = key('retry');
    const first = await call(server.apibase, keys.test.secret, 'POST', '/charges', { amount: '1200', currency: 'jpy', customer: cus }, header);
    const second = await call(server.apibase, keys.test.secret, 'POST', '/charges', { amount: '1200', currency: 'jpy', customer: cus }, header);
    expect(first.status).toBe(200);
    expect(second).toMatchObject({ status: 200, body: first.body });
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.headers.get('content-type')).toMatch(/^application\/json/);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(await chargesOf(cus)).toEqual([{ charge_id: first.body.id, amount: 1200, paid: true }]);
    // The same parameters in another order are the same request.
    const reordered = await fetch(`${server.apibase}/charges`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${keys.test.secret}:`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded', ...header },
      body: `customer=${cus}&currency=jpy&amount=1200`,
    });
    expect(await reordered.json()).toEqual(first.body);
    // Without a key, the same request is a new charge.
    await call(server.apibase, keys.test.secret, 'POST', '/charges', { amount: '1200', currency: 'jpy', customer: cus });
    expect(await chargesOf(cus)).toHaveLength(2);
  });

  it('a refusal is kept too: a declined card\'s 402 comes back the same, with no second attempt', async () => {
    const token = await call(server.apibase, keys.test.public, 'POST', '/tokens', { 'card[number]': TEST_CARDS.declinesOnCharge.number, 'card[exp_month]': '12', 'card[exp_year]': '2035', 'card[cvc]': '123' });
    const cus = (await call(server.apibase, keys.test.secret, 'POST', '/customers', { card: token.body.id! })).body.id!;
    const header = key('declined');
    const first = await call(server.apibase, keys.test.secret, 'POST', '/charges', { amount: '800', currency: 'jpy', customer: cus }, header);
    const second = await call(server.apibase, keys.test.secret, 'POST', '/charges', { amount: '800', currency: 'jpy', customer: cus }, header);
    expect(first).toMatchObject({ status: 402, body: { error: { code: 'card_declined', type: 'card_error', charge: expect.any(String) } } });
    expect(second).toMatchObject({ status: 402, body: first.body });
    expect(await chargesOf(cus)).toHaveLength(1);
  });

  it('a refusal from inside the operation\'s own transaction (rolled back to its savepoint) is kept and replayed', async () => {
    const header = key('inside');
    const before = await chargeCount();
    const body = { amount: '500', currency: 'jpy', customer: 'cus_does_not_exist' };
    const first = await call(server.apibase, keys.test.secret, 'POST', '/charges', body, header);
    expect(first).toMatchObject({ status: 404, body: { error: { status: 404, param: 'customer' } } });
    const second = await call(server.apibase, keys.test.secret, 'POST', '/charges', body, header);
    expect(second).toMatchObject({ status: 404, body: first.body });
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(await chargeCount()).toBe(before);
  });

  it('the same key with another request is refused (400 already_exist_id on Idempotency-Key) and changes nothing', async () => {
    const cus = await customer();
    const header = key('conflict');
    await call(server.apibase, keys.test.secret, 'POST', '/charges', { amount: '1000', currency: 'jpy', customer: cus }, header);
    const customersBefore = await customerCount();
    for (const [path, body] of [
      ['/charges', { amount: '1001', currency: 'jpy', customer: cus }],
      ['/customers', {}],
    ] as const) {
      const refused = await call(server.apibase, keys.test.secret, 'POST', path, body, header);
      expect(refused).toMatchObject({ status: 400, body: { error: { status: 400, type: 'client_error', code: 'already_exist_id', param: 'Idempotency-Key' } } });
    }
    expect(await chargesOf(cus)).toHaveLength(1);
    expect(await customerCount()).toBe(customersBefore);
  });

  it('keys are per account and mode: the same key in live mode is another key', async () => {
    const header = key('modes');
    const test = await call(server.apibase, keys.test.secret, 'POST', '/customers', { email: 'a@example.com' }, header);
    const live = await call(server.apibase, keys.live.secret, 'POST', '/customers', { email: 'a@example.com' }, header);
    expect(test.status).toBe(200);
    expect(live.status).toBe(200);
    expect(live.body.id).not.toBe(test.body.id);
    expect(live.body.livemode).toBe(true);
  });

  it('a malformed key is refused (invalid_param_key on Idempotency-Key) before any work', async () => {
    const before = await customerCount();
    for (const bad of ['has space', 'x'.repeat(256), 'semi;colon']) {
      const refused = await call(server.apibase, keys.test.secret, 'POST', '/customers', {}, { 'idempotency-key': bad });
      expect(refused.body.error).toMatchObject({ status: 400, code: 'invalid_param_key', param: 'Idempotency-Key' });
    }
    expect(await customerCount()).toBe(before);
  });

  it('a server fault (5xx) is not kept: the retry does the work', async () => {
    // A card network that fails its first authorization with a fault (not a decline): a 500.
    const network = simulatedCardNetwork();
    let authorizations = 0;
    const faulty = await open(await contextWith({ ...network, authorize: async (requests) => ((authorizations += 1) === 1 ? Promise.reject(new Error('the card network broke')) : network.authorize(requests)) }));
    const cus = await customer();
    const header = key('fault');
    const body = { amount: '600', currency: 'jpy', customer: cus };
    const first = await call(faulty.apibase, keys.test.secret, 'POST', '/charges', body, header);
    expect(first).toMatchObject({ status: 500, body: { error: { status: 500, code: 'pg_wrong' } } });
    expect(await chargesOf(cus)).toEqual([]);
    const second = await call(faulty.apibase, keys.test.secret, 'POST', '/charges', body, header);
    expect(second).toMatchObject({ status: 200, body: { object: 'charge', amount: 600, paid: true } });
    expect(second.headers.get('idempotent-replayed')).toBeNull();
    const asked = authorizations;
    const third = await call(faulty.apibase, keys.test.secret, 'POST', '/charges', body, header);
    expect(third).toMatchObject({ status: 200, body: second.body });
    expect(third.headers.get('idempotent-replayed')).toBe('true');
    expect(authorizations).toBe(asked);
    expect(await chargesOf(cus)).toEqual([{ charge_id: second.body.id, amount: 600, paid: true }]);
  });

  it('two concurrent requests with one key do the work once; the second waits and gets the same response', async () => {
    // Two server instances (on PostgreSQL two pools, as two server processes); the first is held at the card network.
    const gated = gatedNetwork();
    const first = await open(await contextWith(gated.processor));
    const watch = watchPendingKeys((await contextWith(simulatedCardNetwork(), { pool: true })).db);
    const second = await open({ ...(await contextWith(simulatedCardNetwork(), { pool: true })), db: watch.db });
    const cus = await customer();
    const header = key('concurrent');
    const body = { amount: '1500', currency: 'jpy', customer: cus };
    const a = call(first.apibase, keys.test.secret, 'POST', '/charges', body, header);
    await gated.atNetwork();
    const b = call(second.apibase, keys.test.secret, 'POST', '/charges', body, header);
    // The second has found the key in progress and waits for it; only then does the first get its answer.
    await watch.waiting;
    gated.open();
    const [answered, waited] = await Promise.all([a, b]);
    expect(answered.status).toBe(200);
    expect(waited).toMatchObject({ status: 200, body: answered.body });
    expect(waited.headers.get('idempotent-replayed')).toBe('true');
    expect(await chargesOf(cus)).toHaveLength(1);
    expect(gated.authorized).toHaveLength(1);
  });

  it('a request waits for one in flight with its key only up to waitMs (then 429 over_capacity), and the key stays usable', async () => {
    const gated = gatedNetwork();
    const slow = await open(await contextWith(gated.processor), { waitMs: 50 });
    const cus = await customer();
    const header = key('impatient');
    const body = { amount: '1300', currency: 'jpy', customer: cus };
    const first = call(slow.apibase, keys.test.secret, 'POST', '/charges', body, header);
    await gated.atNetwork();
    // The first stays at the network until the second has been answered.
    const waited = await call(slow.apibase, keys.test.secret, 'POST', '/charges', body, header);
    expect(waited).toMatchObject({ status: 429, body: { error: { code: 'over_capacity', status: 429 } } });
    gated.open();
    const done = await first;
    expect(done.status).toBe(200);
    expect(await call(slow.apibase, keys.test.secret, 'POST', '/charges', body, header)).toMatchObject({ status: 200, body: done.body });
    expect(await chargesOf(cus)).toHaveLength(1);
    expect(gated.authorized).toHaveLength(1);
  });

  it('a `pending` row committed by the earlier protocol is 429 until staleMs, then taken over', async () => {
    const impatient = await open(ctx, { staleMs: 60_000, waitMs: 50 });
    ctx.clock.set(REFERENCE_INSTANT);
    const body = { email: 'pending@example.com' };
    const header = key('pending');
    // A reservation as a process of the earlier protocol that died mid-request leaves it, stamped now.
    await ctx.db
      .insertInto('idempotency_keys')
      .values({ account_id: ACCOUNT, livemode: false, idempotency_key: header['idempotency-key'], request_hash: requestHash('POST', '/v1/customers', body), state: 'pending', created_at: REFERENCE_INSTANT, expires_at: new Date(REFERENCE_INSTANT.getTime() + IDEMPOTENCY_TTL_MS) })
      .execute();
    const before = await customerCount();
    const waited = await call(impatient.apibase, keys.test.secret, 'POST', '/customers', body, header);
    expect(waited).toMatchObject({ status: 429, body: { error: { code: 'over_capacity', status: 429 } } });
    expect(await customerCount()).toBe(before);
    // 60 s later the reservation counts as abandoned: the request does the work and keeps its answer.
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 60_000));
    const taken = await call(impatient.apibase, keys.test.secret, 'POST', '/customers', body, header);
    expect(taken).toMatchObject({ status: 200, body: { object: 'customer', email: 'pending@example.com' } });
    expect(await call(impatient.apibase, keys.test.secret, 'POST', '/customers', body, header)).toMatchObject({ status: 200, body: taken.body });
    expect(await customerCount()).toBe(before + 1);
    ctx.clock.set(REFERENCE_INSTANT);
  });

  it('the operation\'s writes and the stored response commit together: a failure between them keeps neither, and the retry charges once', async () => {
    const failing = await open(ctx, { fault: commitFailsOnce() });
    const cus = await customer();
    const header = key('atomic');
    const body = { amount: '700', currency: 'jpy', customer: cus };
    const first = await call(failing.apibase, keys.test.secret, 'POST', '/charges', body, header);
    expect(first).toMatchObject({ status: 500, body: { error: { code: 'payjp_wrong' } } });
    expect(await chargesOf(cus)).toEqual([]);
    expect(await ctx.db.selectFrom('idempotency_keys').select('state').where('idempotency_key', '=', header['idempotency-key']).execute()).toEqual([]);
    const retried = await call(failing.apibase, keys.test.secret, 'POST', '/charges', body, header);
    expect(retried).toMatchObject({ status: 200, body: { object: 'charge', amount: 700 } });
    expect(await chargesOf(cus)).toEqual([{ charge_id: retried.body.id, amount: 700, paid: true }]);
    expect(await call(failing.apibase, keys.test.secret, 'POST', '/charges', body, header)).toMatchObject({ status: 200, body: retried.body });
  });

  it('keys last 24 hours: an expired key is a new key, and the purge deletes expired keys only', async () => {
    const cus = await customer();
    const header = key('expiry');
    ctx.clock.set(REFERENCE_INSTANT);
    const first = await call(server.apibase, keys.test.secret, 'POST', '/charges', { amount: '900', currency: 'jpy', customer: cus }, header);
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + IDEMPOTENCY_TTL_MS - 1));
    expect((await call(server.apibase, keys.test.secret, 'POST', '/charges', { amount: '900', currency: 'jpy', customer: cus }, header)).body.id).toBe(first.body.id);
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + IDEMPOTENCY_TTL_MS));
    const later = await call(server.apibase, keys.test.secret, 'POST', '/charges', { amount: '900', currency: 'jpy', customer: cus }, header);
    expect(later.body.id).not.toBe(first.body.id);
    expect(await chargesOf(cus)).toHaveLength(2);

    const stored = () => ctx.db.selectFrom('idempotency_keys').select(['idempotency_key', 'expires_at']).where('account_id', '=', ACCOUNT).execute();
    const asOf = new Date(REFERENCE_INSTANT.getTime() + IDEMPOTENCY_TTL_MS);
    const expiredBefore = (await stored()).filter((r) => r.expires_at.getTime() <= asOf.getTime()).length;
    expect(expiredBefore).toBeGreaterThan(0);
    const kept = (await stored()).filter((r) => r.expires_at.getTime() > asOf.getTime()).map((r) => r.idempotency_key);
    expect(kept).toContain(header['idempotency-key']);
    expect(await purgeExpiredIdempotencyKeys(ctx.db, asOf, 2)).toBe(expiredBefore);
    expect((await stored()).map((r) => r.idempotency_key).sort()).toEqual(kept.sort());
    ctx.clock.set(REFERENCE_INSTANT);
  });

  it('"the same request" is the method, the path with its query, and the body whatever its key order', () => {
    expect(requestHash('POST', '/v1/charges', { a: '1', b: { c: '2', d: '3' } })).toBe(requestHash('POST', '/v1/charges', { b: { d: '3', c: '2' }, a: '1' }));
    expect(requestHash('POST', '/v1/charges', { a: '1' })).not.toBe(requestHash('POST', '/v1/charges?x=1', { a: '1' }));
    expect(requestHash('POST', '/v1/charges', { a: '1' })).not.toBe(requestHash('POST', '/v1/customers', { a: '1' }));
    expect(requestHash('POST', '/v1/charges', { a: '1' })).not.toBe(requestHash('POST', '/v1/charges', { a: '2' }));
  });
});
