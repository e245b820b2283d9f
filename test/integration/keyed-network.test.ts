/**
 * Keyed requests and the card network ("checkpoint at the network", src/api/idempotency.ts), on the
 * real server (buildServer with the server's own policies) with a gated card network: a POST
 * with an Idempotency-Key commits its request transaction before each card-network call (the key
 * row `pending`, stamped, with its recovery point) and goes on in a new one after it. So no row
 * lock is held while the network answers (PostgreSQL: another connection locks the rows FOR
 * UPDATE NOWAIT), the embedded database's one connection is free meanwhile (no deadlock), a retry
 * waits for and replays the answer, a request that dies at the network is taken over after the
 * lease by a retry that first undoes its create intent (authorization released, token given back)
 * and then charges once, and a failed final commit undoes what the checkpoint committed. Nothing
 * is ordered by sleeps: calls wait at the network gate, a retry is let go once the server has read
 * the key `pending`, and a late answer is awaited through the server's own end of the request.
 */
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, type AccountKeys } from '../../src/accounts/accounts';
import type { Database } from '../../src/db/schema';
import { simulatedCardNetwork, type CardNetwork } from '../../src/processor/card-network';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { createTestDatabase, isPostgres, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { call, commitFailsOnce, serveOn, startTestServer, type Served, type ServeOptions } from '../support/http-server';
import { watchPendingKeys, type PendingKeyWatch } from '../support/pending-key-watch';
import { gatedNetwork, recordingNetwork } from '../support/recording-network';
import { probeRowLock, whileLocked, type ProbedRow } from '../support/row-locks';

type Ctx = ReturnType<typeof testContext>;
const ACCOUNT = 'acct_keyed_network';
let database: TestDatabase;
let ctx: Ctx;
let keys: AccountKeys;
let seed = 400;
const opened: Served[] = [];

/** Resolves each time the server has finished a request's handling (its onSend hooks run, the idempotency plugin's commit among them), answered or not. */
function requestsEnded(): { ended: () => Promise<void>; extraRoutes: (app: FastifyInstance) => Promise<void> } {
  let arrive: () => void = () => undefined;
  let next = new Promise<void>((resolve) => (arrive = resolve));
  return {
    ended: () => next,
    extraRoutes: async (app) => {
      app.addHook('onSend', async (_request, _reply, payload) => {
        const done = arrive;
        next = new Promise<void>((resolve) => (arrive = resolve));
        done();
        return payload;
      });
    },
  };
}

/** A server process on the file's database with `processor` as its card network (and, given `watch`, its database handle watched for pending keys). */
async function open(processor: CardNetwork, options: ServeOptions['idempotency'] = {}, at = REFERENCE_INSTANT, extra: { watch?: (db: Kysely<Database>) => PendingKeyWatch; extraRoutes?: ServeOptions['extraRoutes'] } = {}): Promise<Served & { watch?: PendingKeyWatch }> {
  seed += 1;
  const base = { ...testContext(database.store, { seed, at }), processor };
  const watch = extra.watch?.(base.db);
  const app = await serveOn(watch ? { ...base, db: watch.db } : base, database.kind, { idempotency: { purgeIntervalMs: 0, ...options }, ...(extra.extraRoutes ? { extraRoutes: extra.extraRoutes } : {}) });
  opened.push(app);
  return watch ? { ...app, watch } : app;
}

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 399 });
  keys = (await createAccount(ctx, { name: 'Keyed Network Shop', id: ACCOUNT })).keys;
});
afterAll(async () => {
  await Promise.all(opened.map((app) => app.close()));
  await database?.drop();
});

const key = (name: string) => ({ 'idempotency-key': `${name}-${(seed += 1)}` });
const plain = () => open(simulatedCardNetwork());

async function token(apibase: string): Promise<string> {
  return (await call(apibase, keys.test.public, 'POST', '/tokens', { 'card[number]': TEST_CARDS.visa.number, 'card[exp_month]': '12', 'card[exp_year]': '2035', 'card[cvc]': '123' })).body.id!;
}

const chargeRows = () => ctx.db.selectFrom('charges').select(['charge_id', 'amount', 'paid']).where('account_id', '=', ACCOUNT).orderBy('charge_id').execute();
const intents = () => ctx.db.selectFrom('network_claims').select('resource_id').where('account_id', '=', ACCOUNT).where('operation', '=', 'charges.create').execute();
const keyRow = (name: string) => ctx.db.selectFrom('idempotency_keys').select(['state', 'created_at', 'response_body']).where('account_id', '=', ACCOUNT).where('idempotency_key', '=', name).execute();
const tokenUsed = async (id: string) => (await ctx.db.selectFrom('tokens').select('used_at').where('account_id', '=', ACCOUNT).where('token_id', '=', id).executeTakeFirstOrThrow()).used_at !== null;

describe('keyed requests checkpoint at the card network (PGlite and PostgreSQL)', () => {
  it('a keyed create with a token: at the network the key is committed pending, other requests run (no deadlock), a retry waits and replays', async () => {
    const gated = gatedNetwork();
    const app = await open(gated.processor);
    const tok = await token(app.apibase);
    const header = key('create');
    const body = { amount: '1500', currency: 'jpy', card: tok };
    const first = call(app.apibase, keys.test.secret, 'POST', '/charges', body, header);
    await gated.atNetwork();
    // The checkpoint committed the key row (pending, with its recovery point: the create intent) and the intent.
    const [pending] = await keyRow(header['idempotency-key']);
    expect(pending).toMatchObject({ state: 'pending' });
    const point = JSON.parse(pending!.response_body!) as { intents: { chargeId: string }[] };
    expect(point.intents).toHaveLength(1);
    expect(await intents()).toEqual([{ resource_id: point.intents[0]!.chargeId }]);
    // The one connection of the embedded database is free: an unkeyed request runs to its end meanwhile.
    const customer = await call(app.apibase, keys.test.secret, 'POST', '/customers', { email: 'meanwhile@example.com' });
    expect(customer.status).toBe(200);
    // A retry with the key (to another server process) waits for the answer, polling the committed
    // pending row; the first is let through only once the retry has found it pending...
    const other = await open(simulatedCardNetwork(), {}, REFERENCE_INSTANT, { watch: watchPendingKeys });
    const retry = call(other.apibase, keys.test.secret, 'POST', '/charges', body, header);
    await other.watch!.waiting;
    gated.open();
    const [a, b] = await Promise.all([first, retry]);
    expect(a).toMatchObject({ status: 200, body: { object: 'charge', id: point.intents[0]!.chargeId, amount: 1500, paid: true } });
    // ...and replays it: one authorization, one charge, no intent left.
    expect(b).toMatchObject({ status: 200, body: a.body });
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(gated.authorized).toHaveLength(1);
    expect(await intents()).toEqual([]);
    expect(await keyRow(header['idempotency-key'])).toEqual([expect.objectContaining({ state: 'done' })]);
  });

  it('a keyed create whose final commit fails: the authorization is released, the token given back, the key freed; the retry charges once', async () => {
    const recording = recordingNetwork();
    const app = await open(recording.processor, { fault: commitFailsOnce() });
    const tok = await token(app.apibase);
    const header = key('commit-fails');
    const body = { amount: '700', currency: 'jpy', card: tok };
    const before = await chargeRows();
    const first = await call(app.apibase, keys.test.secret, 'POST', '/charges', body, header);
    expect(first).toMatchObject({ status: 500, body: { error: { code: 'payjp_wrong' } } });
    const approval = recording.authorized[0] as { reference: string; authorizationCode: string };
    // Found again by its reference (the same authorization) and released, once.
    expect(recording.authorized).toEqual([approval, approval]);
    expect(recording.released.map((r) => [r.reference, r.authorizationCode, r.amount])).toEqual([[approval.reference, approval.authorizationCode, 700]]);
    expect(await chargeRows()).toEqual(before);
    expect(await intents()).toEqual([]);
    expect(await keyRow(header['idempotency-key'])).toEqual([]);
    expect(await tokenUsed(tok)).toBe(false);
    const retried = await call(app.apibase, keys.test.secret, 'POST', '/charges', body, header);
    expect(retried).toMatchObject({ status: 200, body: { object: 'charge', amount: 700, paid: true } });
    expect(await chargeRows()).toEqual([...before, { charge_id: retried.body.id!, amount: 700, paid: true }].sort((x, y) => (x.charge_id < y.charge_id ? -1 : 1)));
  });

  it('a keyed create that died at the network is taken over after the lease: its authorization released and token given back first, then one charge', async () => {
    const gated = gatedNetwork();
    const dyingEnds = requestsEnded();
    const dying = await open(gated.processor, {}, REFERENCE_INSTANT, { extraRoutes: dyingEnds.extraRoutes });
    const tok = await token(dying.apibase);
    const header = key('died');
    const body = { amount: '2100', currency: 'jpy', card: tok };
    const aborted = new AbortController();
    const lost = fetch(`${dying.apibase}/charges`, {
      method: 'POST',
      signal: aborted.signal,
      headers: { authorization: `Basic ${Buffer.from(`${keys.test.secret}:`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded', ...header },
      body: new URLSearchParams(body).toString(),
    }).catch(() => 'aborted');
    await gated.atNetwork();
    aborted.abort();
    expect(await lost).toBe('aborted');
    const [firstIntent] = await intents();
    const firstCharge = firstIntent!.resource_id;
    expect(await tokenUsed(tok)).toBe(true);

    // Within the lease a retry is told to come back later (waitMs shortened).
    const early = await open(simulatedCardNetwork(), { waitMs: 50 });
    expect(await call(early.apibase, keys.test.secret, 'POST', '/charges', body, header)).toMatchObject({ status: 429, body: { error: { code: 'over_capacity' } } });

    // After it, the retry takes the key over: the first authorization released, the token free again, one charge.
    const recording = recordingNetwork();
    const taker = await open(recording.processor, {}, new Date(REFERENCE_INSTANT.getTime() + 60_000));
    const before = await chargeRows();
    const retried = await call(taker.apibase, keys.test.secret, 'POST', '/charges', body, header);
    expect(retried).toMatchObject({ status: 200, body: { object: 'charge', amount: 2100, paid: true, captured: true } });
    expect(retried.body.id).not.toBe(firstCharge);
    expect(recording.released.map((r) => r.reference)).toEqual([firstCharge]);
    expect(recording.authorized.map((r) => r.reference)).toEqual([firstCharge, retried.body.id]);
    expect(await chargeRows()).toEqual([...before, { charge_id: retried.body.id!, amount: 2100, paid: true }].sort((x, y) => (x.charge_id < y.charge_id ? -1 : 1)));
    expect(await intents()).toEqual([]);
    expect(await call(taker.apibase, keys.test.secret, 'POST', '/charges', body, header)).toMatchObject({ status: 200, body: retried.body });

    // The first request's late answer changes nothing: its key was taken over.
    const lateEnded = dyingEnds.ended();
    gated.open();
    await lateEnded;
    expect(await chargeRows()).toEqual([...before, { charge_id: retried.body.id!, amount: 2100, paid: true }].sort((x, y) => (x.charge_id < y.charge_id ? -1 : 1)));
    expect(gated.released).toEqual([]);
  });

});

describe.runIf(isPostgres())('no row lock is held while a keyed request is at the card network (PostgreSQL)', () => {
  let prober: Kysely<Database>;
  beforeAll(async () => {
    prober = (await database.openAnother()).db;
  });

  const rowOf = (table: ProbedRow['table'], column: string, id: string): ProbedRow => ({ table, key: { account_id: ACCOUNT, [column]: id } });
  const free = async (row: ProbedRow) => (await probeRowLock(prober, row)).lock;

  it('the probe says "locked" for each row it probes while another connection holds it (so its "free" below means something)', async () => {
    const setup = await plain();
    const customer = (await call(setup.apibase, keys.test.secret, 'POST', '/customers', { card: await token(setup.apibase) })).body as { id: string; default_card: string };
    const header = key('control');
    const held = (await call(setup.apibase, keys.test.secret, 'POST', '/charges', { amount: '1200', currency: 'jpy', customer: customer.id, capture: 'false' }, header)).body as { id: string };
    const rows = [rowOf('customers', 'customer_id', customer.id), rowOf('cards', 'card_id', customer.default_card), rowOf('charges', 'charge_id', held.id), rowOf('idempotency_keys', 'idempotency_key', header['idempotency-key'])];
    for (const row of rows) {
      expect([row.table, await whileLocked(ctx.db, row, () => free(row))]).toEqual([row.table, 'locked']);
      expect([row.table, await free(row)]).toEqual([row.table, 'free']);
    }
  });

  it('keyed charges.create by customer: the customer, its card and the key row are free while the network authorizes', async () => {
    const setup = await plain();
    const customer = (await call(setup.apibase, keys.test.secret, 'POST', '/customers', { card: await token(setup.apibase) })).body as { id: string; default_card: string };
    const gated = gatedNetwork();
    const app = await open(gated.processor);
    const header = key('locks-create');
    const done = call(app.apibase, keys.test.secret, 'POST', '/charges', { amount: '1000', currency: 'jpy', customer: customer.id }, header);
    await gated.atNetwork();
    expect([await free(rowOf('customers', 'customer_id', customer.id)), await free(rowOf('cards', 'card_id', customer.default_card)), await free(rowOf('idempotency_keys', 'idempotency_key', header['idempotency-key']))]).toEqual(['free', 'free', 'free']);
    gated.open();
    expect((await done).status).toBe(200);
  });

  it('keyed charges.capture: the charge row is free while the network captures, and the capture is recorded once', async () => {
    const setup = await plain();
    const customer = (await call(setup.apibase, keys.test.secret, 'POST', '/customers', { card: await token(setup.apibase) })).body as { id: string };
    const held = (await call(setup.apibase, keys.test.secret, 'POST', '/charges', { amount: '1200', currency: 'jpy', customer: customer.id, capture: 'false' })).body as { id: string };
    const gated = gatedNetwork();
    const app = await open(gated.processor);
    const header = key('locks-capture');
    const done = call(app.apibase, keys.test.secret, 'POST', `/charges/${held.id}/capture`, {}, header);
    await gated.atNetwork();
    expect(await free(rowOf('charges', 'charge_id', held.id))).toBe('free');
    gated.open();
    expect(await done).toMatchObject({ status: 200, body: { id: held.id, captured: true, amount: 1200, amount_refunded: 0 } });
    expect(gated.captured).toHaveLength(1);
    expect(await call(app.apibase, keys.test.secret, 'POST', `/charges/${held.id}/capture`, {}, header)).toMatchObject({ status: 200, body: { id: held.id, captured: true } });
    expect(gated.captured).toHaveLength(1);
  });
});

describe('a keyed subscriptions.create is checkpointed at the card network (its charge is claimed, not made inside its transaction)', () => {
  async function subscribe(networkInBlock: 'hold' | 'refuse') {
    const server = await startTestServer('pglite', { idempotency: { purgeIntervalMs: 0, networkInBlock } });
    try {
      const payjp = server.sdk(server.keys.a.test.secret);
      const tok = await payjp.tokens.create({ card: { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: 2035, cvc: '123' } } as never, { 'X-Payjp-Direct-Token-Generate': 'true' });
      const customer = await payjp.customers.create({ card: tok.id });
      const plan = await payjp.plans.create({ amount: 800, currency: 'jpy', interval: 'month' });
      const response = await fetch(`${server.baseUrl}/v1/subscriptions`, {
        method: 'POST',
        headers: { authorization: `Basic ${Buffer.from(`${server.keys.a.test.secret}:`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded', 'idempotency-key': `sub-${networkInBlock}` },
        body: new URLSearchParams({ customer: customer.id, plan: plan.id }).toString(),
      });
      const charges = await payjp.charges.list({ customer: customer.id });
      return { status: response.status, body: (await response.json()) as Record<string, unknown>, charges: charges.data.length };
    } finally {
      await server.close();
    }
  }

  it('charges once, also with networkInBlock: refuse (no network call inside an open block is left to refuse)', async () => {
    expect(await subscribe('hold')).toMatchObject({ status: 200, body: { object: 'subscription', status: 'active' }, charges: 1 });
    expect(await subscribe('refuse')).toMatchObject({ status: 200, body: { object: 'subscription', status: 'active' }, charges: 1 });
  });
});
