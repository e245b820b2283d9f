/**
 * "No network calls while rows are locked" (STYLE.md): while the card network is
 * answering a charge operation, another connection can lock the rows the operation reads and
 * writes (`SELECT … FOR UPDATE NOWAIT` succeeds), and racing operations on one charge still make
 * one network call each, never two at once, with one recorded outcome (charge-claims.ts).
 * PostgreSQL only: PGlite is a single session, so there is no second connection to probe from.
 */
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { expireHoldBatch } from '../../src/charges/hold-jobs';
import type { Database } from '../../src/db/schema';
import { KessaiError } from '../../src/domain/errors';
import { runOperation } from '../../src/api/operations';
import { recoverLapsedClaims } from '../../src/engine/network-claims';
import { NETWORK_CLAIM_LEASE_MS } from '../../src/domain/network-claims';
import { simulatedCardNetwork, type AuthorizationRequest, type AuthorizationResult, type CardNetwork } from '../../src/processor/card-network';
import { recordingNetwork } from '../support/recording-network';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { createTestDatabase, isPostgres, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { probeRowLock, whileLocked, type ProbedRow } from '../support/row-locks';

const caller: Caller = { accountId: 'acct_netlocks', livemode: false, kind: 'secret' };
const publicCaller: Caller = { ...caller, kind: 'public' };
const SLOW_MS = 150;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Ctx = ReturnType<typeof testContext>;
type Table = 'charges' | 'customers' | 'cards' | 'tokens';
const COLUMN = { charges: 'charge_id', customers: 'customer_id', cards: 'card_id', tokens: 'token_id' } as const;
const rowOf = (table: Table, id: string): ProbedRow => ({ table, key: { account_id: caller.accountId, [COLUMN[table]]: id } });

/** One network call as the wrapper saw it: which method, and what the probes found meanwhile. */
interface Call {
  readonly method: keyof CardNetwork;
  readonly kinds: readonly string[];
  /** Per probed row: 'free' when FOR UPDATE NOWAIT got it, 'locked' when another transaction held it. */
  readonly probes: readonly string[];
}

let database: TestDatabase;
let prober: Kysely<Database>;
let ctx: Ctx;
let other: Ctx;
let probes: ProbedRow[] = [];
let calls: Call[] = [];
let inFlight = 0;
let maxInFlight = 0;

/** Locks each probed row FOR UPDATE NOWAIT from another connection (its own transaction, rolled back). */
async function probeRows(): Promise<string[]> {
  const found: string[] = [];
  for (const row of probes) found.push((await probeRowLock(prober, row)).lock);
  return found;
}

/** The simulator, answering SLOW_MS late; while each call is in flight the probes run from another connection. */
function probingNetwork(): CardNetwork {
  const network = simulatedCardNetwork();
  const wrap =
    <R extends object, T>(method: keyof CardNetwork, call: (requests: readonly R[]) => Promise<T>) =>
    async (requests: readonly R[]): Promise<T> => {
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        const found = await probeRows();
        calls.push({ method, kinds: requests.map((r) => ('kind' in r ? String(r.kind) : method)), probes: found });
        await sleep(SLOW_MS);
        return await call(requests);
      } finally {
        inFlight -= 1;
      }
    };
  return {
    authorize: wrap('authorize', (r) => network.authorize(r)),
    authenticate: wrap('authenticate', (r) => network.authenticate(r)),
    capture: wrap('capture', (r) => network.capture(r)),
    release: wrap('release', (r) => network.release(r)),
    refund: wrap('refund', (r) => network.refund(r)),
  };
}

function op<T = { id: string; [key: string]: unknown }>(on: Ctx, name: string, params?: unknown, who: Caller = caller): Promise<T> {
  return runOperation(on, who, name, params) as Promise<T>;
}

function codeOf(result: PromiseSettledResult<unknown>): string {
  if (result.status === 'fulfilled') return 'ok';
  if (result.reason instanceof KessaiError) return result.reason.code;
  throw result.reason;
}

async function token(number: string = TEST_CARDS.visa.number): Promise<string> {
  return (await op(ctx, 'tokens.create', { card: { number, exp_month: '12', exp_year: '2035', cvc: '123' } })).id;
}

async function customer(): Promise<{ id: string; card: string }> {
  const created = await op<{ id: string; default_card: string }>(ctx, 'customers.create', { card: await token() });
  return { id: created.id, card: created.default_card };
}

/** Runs `work` with the given rows probed during every network call; returns the calls seen. */
async function during(rows: ProbedRow[], work: () => Promise<unknown>): Promise<Call[]> {
  probes = rows;
  calls = [];
  try {
    await work();
    return calls;
  } finally {
    probes = [];
  }
}

const chargeRow = (id: string): ProbedRow => rowOf('charges', id);

describe.runIf(isPostgres())('no row lock is held while the card network answers (PostgreSQL)', () => {
  beforeAll(async () => {
    database = await createTestDatabase();
    const second = await database.openAnother();
    prober = (await database.openAnother()).db;
    ctx = { ...testContext(database.store, { seed: 161 }), processor: probingNetwork() };
    other = { ...testContext(second, { seed: 162 }), processor: probingNetwork() };
    await createAccount(ctx, { name: 'Network Locks Shop', id: caller.accountId });
  });
  afterAll(async () => database?.drop());

  it('the probe says "locked" for each table it probes while another connection holds the row (so its "free" below means something)', async () => {
    const cus = await customer();
    const held = await op(ctx, 'charges.create', { amount: '1000', currency: 'jpy', customer: cus.id, capture: 'false' });
    const rows = [rowOf('charges', held.id), rowOf('customers', cus.id), rowOf('cards', cus.card), rowOf('tokens', await token())];
    for (const row of rows) {
      expect([row.table, (await whileLocked(ctx.db, row, () => probeRowLock(prober, row))).lock]).toEqual([row.table, 'locked']);
      expect([row.table, (await probeRowLock(prober, row)).lock]).toEqual([row.table, 'free']);
    }
    await expect(probeRowLock(prober, rowOf('charges', 'ch_none'))).rejects.toThrow(/the probe needs exactly one/);
  });

  it('charges.create by customer: the customer and its card are free while the network authorizes', async () => {
    const cus = await customer();
    const seen = await during(
      [rowOf('customers', cus.id), rowOf('cards', cus.card)],
      () => op(ctx, 'charges.create', { amount: '1000', currency: 'jpy', customer: cus.id }),
    );
    expect(seen).toEqual([{ method: 'authorize', kinds: ['charge'], probes: ['free', 'free'] }]);
  });

  it('charges.create with a token: the token is free while the network authorizes, and is used once', async () => {
    const tok = await token();
    const seen = await during([rowOf('tokens', tok)], () => op(ctx, 'charges.create', { amount: '1000', currency: 'jpy', card: tok, capture: 'false' }));
    expect(seen).toEqual([{ method: 'authorize', kinds: ['hold'], probes: ['free'] }]);
    await expect(op(ctx, 'charges.create', { amount: '1000', currency: 'jpy', card: tok })).rejects.toMatchObject({ code: 'token_already_used' });
  });

  it('reauth, capture and the cancel of a hold: the charge row is free during each network call', async () => {
    const cus = await customer();
    const held = await op(ctx, 'charges.create', { amount: '1000', currency: 'jpy', customer: cus.id, capture: 'false' });
    expect(await during([chargeRow(held.id)], () => op(ctx, 'charges.reauth', { id: held.id }))).toEqual([{ method: 'authorize', kinds: ['reauth'], probes: ['free'] }]);
    expect(await during([chargeRow(held.id)], () => op(ctx, 'charges.capture', { id: held.id, amount: '800' }))).toEqual([{ method: 'capture', kinds: ['capture'], probes: ['free'] }]);
    const other = await op(ctx, 'charges.create', { amount: '1000', currency: 'jpy', customer: cus.id, capture: 'false' });
    expect(await during([chargeRow(other.id)], () => op(ctx, 'charges.refund', { id: other.id }))).toEqual([{ method: 'release', kinds: ['release'], probes: ['free'] }]);
    expect(await op(ctx, 'charges.retrieve', { id: other.id })).toMatchObject({ refunded: true, amount_refunded: 1000, captured: false });
  });

  it('3-D Secure: the charge row is free while the issuer authenticates and while tds_finish authorizes', async () => {
    const pending = await op(ctx, 'charges.create', { amount: '1000', currency: 'jpy', card: await token(TEST_CARDS.threeDSecureRequired.number), three_d_secure: 'true' });
    expect(await during([chargeRow(pending.id)], () => op(ctx, 'charges.tds_authenticate', { id: pending.id }, publicCaller))).toEqual([{ method: 'authenticate', kinds: ['authenticate'], probes: ['free'] }]);
    expect(await during([chargeRow(pending.id)], () => op(ctx, 'charges.tds_finish', { id: pending.id }))).toEqual([{ method: 'authorize', kinds: ['charge'], probes: ['free'] }]);
    expect(await op(ctx, 'charges.retrieve', { id: pending.id })).toMatchObject({ paid: true, captured: true, three_d_secure_status: 'verified' });
  });

  it('two captures of one charge from two pools at once: one network capture, one outcome, the other already_captured', async () => {
    const cus = await customer();
    const held = await op(ctx, 'charges.create', { amount: '1000', currency: 'jpy', customer: cus.id, capture: 'false' });
    calls = [];
    maxInFlight = 0;
    const results = await Promise.allSettled([op(ctx, 'charges.capture', { id: held.id }), op(other, 'charges.capture', { id: held.id, amount: '900' })]);
    expect(results.map(codeOf).sort()).toEqual(['already_captured', 'ok']);
    expect(calls.map((c) => c.method)).toEqual(['capture']);
    const events = await ctx.db.selectFrom('events').select('type').where('account_id', '=', caller.accountId).where('resource_id', '=', held.id).where('type', '=', 'charge.captured').execute();
    expect(events).toHaveLength(1);
  });

  it('two reauths of one charge from two pools at once: the network is asked one after the other, never twice at once, and each attempt recorded once', async () => {
    const cus = await customer();
    const held = await op(ctx, 'charges.create', { amount: '1000', currency: 'jpy', customer: cus.id, capture: 'false' });
    calls = [];
    maxInFlight = 0;
    const results = await Promise.allSettled([op(ctx, 'charges.reauth', { id: held.id }), op(other, 'charges.reauth', { id: held.id })]);
    expect(results.map(codeOf)).toEqual(['ok', 'ok']);
    expect(calls.map((c) => c.kinds)).toEqual([['reauth'], ['reauth']]);
    expect(maxInFlight).toBe(1);
    const attempts = await ctx.db.selectFrom('reauthorizations').select(['reauth_id', 'authorization_code']).where('account_id', '=', caller.accountId).where('charge_id', '=', held.id).execute();
    expect(attempts).toHaveLength(2);
    expect(new Set(attempts.map((a) => a.reauth_id)).size).toBe(2);
    // No claim is left behind.
    const claims = await ctx.db.selectFrom('network_claims').select('resource_id').where('account_id', '=', caller.accountId).execute();
    expect(claims).toEqual([]);
  });

  it.each(['the next operation on the charge', 'the recovery of lapsed claims'] as const)('a reauth that died after the network approved: once its claim lapses, %s releases the new authorization, once, and nothing is recorded', async (taker) => {
    const cus = await customer();
    const held = await op(ctx, 'charges.create', { amount: '1000', currency: 'jpy', customer: cus.id, capture: 'false' });
    const network = simulatedCardNetwork();
    let asked: { request: AuthorizationRequest; result: AuthorizationResult } | undefined;
    const dying: Ctx = {
      ...testContext(database.store, { seed: 170, at: ctx.clock.now() }),
      processor: {
        ...network,
        authorize: async (requests) => {
          const [result] = await network.authorize(requests);
          asked = { request: requests[0]!, result: result! };
          return new Promise<never>(() => {});
        },
      },
    };
    void op(dying, 'charges.reauth', { id: held.id });
    for (let i = 0; asked === undefined; i += 1) {
      if (i > 500) throw new Error('the network was never asked');
      await sleep(10);
    }
    expect(asked.request.kind).toBe('reauth');
    expect(asked.result.approved).toBe(true);
    const lapsedAt = new Date(ctx.clock.now().getTime() + NETWORK_CLAIM_LEASE_MS);
    const recording = recordingNetwork();
    const later: Ctx = { ...testContext(database.store, { seed: taker === 'the next operation on the charge' ? 171 : 172, at: lapsedAt }), processor: recording.processor };
    if (taker === 'the next operation on the charge') expect(await op(later, 'charges.capture', { id: held.id })).toMatchObject({ captured: true });
    else expect(await recoverLapsedClaims(later, [caller.accountId])).toBe(1);
    expect(recording.released).toEqual([{ reference: asked.request.reference, authorizationCode: (asked.result as { authorizationCode: string }).authorizationCode, amount: 1000, at: lapsedAt }]);
    expect(await ctx.db.selectFrom('reauthorizations').select('reauth_id').where('account_id', '=', caller.accountId).where('charge_id', '=', held.id).execute()).toEqual([]);
    expect(await ctx.db.selectFrom('network_claims').select('resource_id').where('account_id', '=', caller.accountId).execute()).toEqual([]);
    // Nothing twice: a second pass finds nothing to release.
    const again = recordingNetwork();
    expect(await recoverLapsedClaims({ ...later, processor: again.processor }, [caller.accountId])).toBe(0);
    expect(again.released).toEqual([]);
  });

  it('the hold-expiry job leaves a charge alone while a capture of it is at the network, and takes it once the claim lapses', async () => {
    const cus = await customer();
    const held = await op<{ id: string; expired_at: number }>(ctx, 'charges.create', { amount: '1000', currency: 'jpy', customer: cus.id, capture: 'false' });
    const expiredAt = new Date(held.expired_at * 1000);
    // A claim as a capture that crashed at the network left it, at the last instant the hold is good.
    await ctx.db
      .insertInto('network_claims')
      .values({ account_id: caller.accountId, livemode: false, resource: 'charge', resource_id: held.id, operation: 'charges.capture', claimed_at: expiredAt, lease_until: new Date(expiredAt.getTime() + 60_000), recovery: JSON.stringify({ authorizations: [] }) })
      .execute();
    const slot = new Date(expiredAt.getTime() + 60_000);
    const releasedAt = async () => (await ctx.db.selectFrom('charges').select('released_at').where('account_id', '=', caller.accountId).where('charge_id', '=', held.id).executeTakeFirstOrThrow()).released_at;
    other.clock.set(expiredAt);
    calls = [];
    await other.db.transaction().execute((trx) => expireHoldBatch(trx, other, [caller.accountId], slot, 100));
    expect(await releasedAt()).toBeNull();
    // The lease is read on the worker's clock: once it has passed, the job releases the hold.
    other.clock.set(new Date(expiredAt.getTime() + 60_000));
    await other.db.transaction().execute((trx) => expireHoldBatch(trx, other, [caller.accountId], slot, 100));
    expect(await releasedAt()).toEqual(expiredAt);
    other.clock.set(REFERENCE_INSTANT);
  });
});

describe('a fault after charges.create took its token (PGlite and PostgreSQL)', () => {
  it('the network failing: the call writes no charge and gives the token back, which then pays', async () => {
    const db = await createTestDatabase();
    try {
      const working = testContext(db.store, { seed: 163 });
      const failing: Ctx = { ...testContext(db.store, { seed: 164 }), processor: { ...simulatedCardNetwork(), authorize: () => Promise.reject(new Error('the card network is down')) } };
      await createAccount(working, { name: 'Faulty Network Shop', id: caller.accountId });
      const tok = (await op(working, 'tokens.create', { card: { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2035', cvc: '123' } })).id;
      await expect(op(failing, 'charges.create', { amount: '1000', currency: 'jpy', card: tok })).rejects.toThrow('the card network is down');
      expect(await working.db.selectFrom('charges').select('charge_id').where('account_id', '=', caller.accountId).execute()).toEqual([]);
      expect(await op(working, 'charges.create', { amount: '1000', currency: 'jpy', card: tok })).toMatchObject({ paid: true, captured: true });
    } finally {
      await db.drop();
    }
  });
});
