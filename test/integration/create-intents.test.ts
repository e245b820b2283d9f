/**
 * Create intents (src/charges/create-intents.ts): a `charges.create` whose process stops after the
 * card network answered (here: the network's promise never settles, so the operation never goes
 * on, as if its process died) leaves its intent; once the lease lapses, the hold-expiry job (which
 * the worker and `kessai serve` on the embedded database run) releases the authorization found by
 * its reference and gives the token back, once, and the buyer can pay with the token again. A
 * create that outlives its lease writes no charge. The real-kill version is
 * test/http/create-intent-crash.test.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { holdExpiryJob } from '../../jobs/hold-expiry';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { purgeExpiredIdempotencyKeys } from '../../src/api/idempotency';
import { NETWORK_CLAIM_LEASE_MS } from '../../src/engine/network-claims';
import { recoverCreateIntents } from '../../src/charges/create-intents';
import { expireHoldBatch } from '../../src/charges/hold-jobs';
import { SQL_DIR } from '../../src/db/migrate';
import { KessaiError } from '../../src/domain/errors';
import { listEvents } from '../../src/events/outbox';
import { Scheduler } from '../../src/engine/scheduler';
import { runOperation } from '../../src/api/operations';
import { simulatedCardNetwork, type AuthorizationRequest, type AuthorizationResult, type CardNetwork } from '../../src/processor/card-network';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { recordingNetwork } from '../support/recording-network';
import { createTestDatabase, isPostgres, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';

const caller: Caller = { accountId: 'acct_intents', livemode: false, kind: 'secret' };
const publicCaller: Caller = { ...caller, kind: 'public' };
type Ctx = ReturnType<typeof testContext>;

let database: TestDatabase;
let ctx: Ctx;
let seed = 300;

const recording = () => recordingNetwork();

/** A context on `store` (default: the file's) with its own ids, at the file clock's instant. */
function contextWith(processor: CardNetwork, at: Date = ctx.clock.now(), store = database.store): Ctx {
  seed += 1;
  return { ...testContext(store, { seed, at }), processor };
}

async function customerWithCard(): Promise<string> {
  return ((await runOperation(ctx, caller, 'customers.create', { card: await token() })) as { id: string }).id;
}

async function token(): Promise<string> {
  return ((await runOperation(ctx, publicCaller, 'tokens.create', { card: { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2035', cvc: '123' } })) as { id: string }).id;
}

/**
 * `charges.create` that dies after the network answered: the network authorizes (for real, at the
 * simulator) and then never answers the engine. Returns the authorization the network gave.
 */
async function createDyingAtTheNetwork(params: Record<string, string>): Promise<{ request: AuthorizationRequest; result: AuthorizationResult }> {
  const network = simulatedCardNetwork();
  let answered: { request: AuthorizationRequest; result: AuthorizationResult } | undefined;
  const dying = contextWith({
    ...network,
    authorize: async (requests) => {
      const [result] = await network.authorize(requests);
      answered = { request: requests[0]!, result: result! };
      return new Promise<never>(() => {});
    },
  });
  void runOperation(dying, caller, 'charges.create', params);
  for (let i = 0; answered === undefined; i += 1) {
    if (i > 500) throw new Error('the network was never asked');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return answered;
}

const intents = () => ctx.db.selectFrom('network_claims').select(['resource', 'resource_id', 'operation', 'lease_until']).where('account_id', '=', caller.accountId).where('operation', '=', 'charges.create').execute();
const charges = () => ctx.db.selectFrom('charges').select(['charge_id', 'paid']).where('account_id', '=', caller.accountId).execute();
const tokenUsedAt = async (id: string) => (await ctx.db.selectFrom('tokens').select('used_at').where('account_id', '=', caller.accountId).where('token_id', '=', id).executeTakeFirstOrThrow()).used_at;

let runs = 0;
async function runHoldExpiry(at: Date, processor: CardNetwork) {
  runs += 1;
  const outcome = await new Scheduler(contextWith(processor, at), [holdExpiryJob], { owner: `intents-${runs}` }).runSlot(holdExpiryJob.name, new Date(Math.floor(at.getTime() / 60_000) * 60_000));
  expect(outcome.status, outcome.status === 'failed' ? outcome.error : '').toBe('succeeded');
  return outcome.status === 'succeeded' ? outcome.counts : {};
}

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 299 });
  await createAccount(ctx, { name: 'Intent Shop', id: caller.accountId });
});
afterAll(async () => database?.drop());

describe('a charges.create that dies at the card network (create intents)', () => {
  it('leaves its intent; once lapsed, the hold-expiry job releases the authorization and gives the token back, once', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const tok = await token();
    const { request, result } = await createDyingAtTheNetwork({ amount: '1800', currency: 'jpy', card: tok, capture: 'false' });
    expect(result.approved).toBe(true);
    expect(await charges()).toEqual([]);
    expect(await intents()).toEqual([{ resource: 'charge', resource_id: request.reference, operation: 'charges.create', lease_until: new Date(REFERENCE_INSTANT.getTime() + NETWORK_CLAIM_LEASE_MS) }]);
    expect(await tokenUsedAt(tok)).toEqual(REFERENCE_INSTANT);

    // Within the lease the request may still be alive: nothing is touched.
    const early = recording();
    expect(await runHoldExpiry(new Date(REFERENCE_INSTANT.getTime() + NETWORK_CLAIM_LEASE_MS - 1), early.processor)).not.toHaveProperty('intents_recovered');
    expect(early.released).toEqual([]);
    // The purge of expired keys leaves a lapsed intent to its recovery.
    const lapsedAt = new Date(REFERENCE_INSTANT.getTime() + NETWORK_CLAIM_LEASE_MS);
    await purgeExpiredIdempotencyKeys(ctx.db, lapsedAt);
    expect(await intents()).toHaveLength(1);

    const job = recording();
    expect(await runHoldExpiry(lapsedAt, job.processor)).toMatchObject({ intents_recovered: 1 });
    // Found by its reference: asked again, the network answers with the same authorization, which is released.
    expect(job.authorized).toEqual([result]);
    expect(job.released).toEqual([{ reference: request.reference, authorizationCode: (result as { authorizationCode: string }).authorizationCode, amount: 1800, at: lapsedAt }]);
    expect(await intents()).toEqual([]);
    expect(await tokenUsedAt(tok)).toBeNull();
    expect(await charges()).toEqual([]);

    // Nothing twice: the next slot finds nothing.
    const again = recording();
    expect(await runHoldExpiry(new Date(lapsedAt.getTime() + 60_000), again.processor)).not.toHaveProperty('intents_recovered');
    expect(again.asked).toEqual([]);
    expect(again.released).toEqual([]);

    // The token pays again (an unkeyed retry of the same request works).
    const paid = (await runOperation(contextWith(simulatedCardNetwork()), caller, 'charges.create', { amount: '1800', currency: 'jpy', card: tok, capture: 'false' })) as { id: string; paid: boolean };
    expect(paid.paid).toBe(true);
    expect(await charges()).toEqual([{ charge_id: paid.id, paid: true }]);
    expect(await intents()).toEqual([]);
  });

  it.runIf(isPostgres())('a recovery whose database node cannot be reached is skipped: the hold-expiry slot still succeeds, and the next slot recovers it, once', async () => {
    const start = new Date(REFERENCE_INSTANT.getTime() + 2 * 3_600_000);
    ctx.clock.set(start);
    const tok = await token();
    const { request } = await createDyingAtTheNetwork({ amount: '1500', currency: 'jpy', card: tok, capture: 'false' });
    const lapsedAt = new Date(start.getTime() + NETWORK_CLAIM_LEASE_MS);
    await purgeExpiredIdempotencyKeys(ctx.db, lapsedAt);
    // The account's claims answer as a worker node that is down would (SQLSTATE 08006).
    await sql`CREATE FUNCTION refuse_intents() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'node down (test)' USING ERRCODE = '08006'; END $$`.execute(ctx.db);
    await sql`CREATE TRIGGER refuse_intents BEFORE UPDATE OR DELETE ON network_claims FOR EACH ROW WHEN (OLD.account_id = 'acct_intents') EXECUTE FUNCTION refuse_intents()`.execute(ctx.db);
    try {
      const down = recording();
      expect(await runHoldExpiry(lapsedAt, down.processor)).not.toHaveProperty('intents_recovered');
      expect(down.released).toEqual([]);
      expect((await intents()).map((intent) => intent.resource_id)).toEqual([request.reference]);
    } finally {
      await sql`DROP TRIGGER refuse_intents ON network_claims`.execute(ctx.db);
      await sql`DROP FUNCTION refuse_intents()`.execute(ctx.db);
    }
    const back = recording();
    expect(await runHoldExpiry(new Date(lapsedAt.getTime() + 60_000), back.processor)).toMatchObject({ intents_recovered: 1 });
    expect(back.released.map((release) => release.reference)).toEqual([request.reference]);
    expect(await intents()).toEqual([]);
    expect(await tokenUsedAt(tok)).toBeNull();
  });

  it('a charge by customer that dies at the network: its captured authorization is released, no token to give back', async () => {
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 3_600_000));
    const customer = (await runOperation(ctx, caller, 'customers.create', { card: await token() })) as { id: string };
    const before = await charges();
    const { request } = await createDyingAtTheNetwork({ amount: '2600', currency: 'jpy', customer: customer.id });
    expect(request.kind).toBe('charge');
    // Written by the card's read (createIntentFrom): its recovery point is the request the network was sent, card fields and all.
    const [stored] = await ctx.db.selectFrom('network_claims').select('recovery').where('account_id', '=', caller.accountId).where('resource', '=', 'charge').where('resource_id', '=', request.reference).execute();
    expect(stored!.recovery).toEqual({ authorizations: [{ ...request, at: request.at.toISOString() }], token: null });
    // A refused create (a card the customer does not have) writes no intent.
    const refused = await runOperation(ctx, caller, 'charges.create', { amount: '2600', currency: 'jpy', customer: customer.id, card: 'car_not_hers' }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'dont_has_this_card', param: 'card' });
    expect(await intents()).toHaveLength(1);
    const job = recording();
    const lapsedAt = new Date(ctx.clock.now().getTime() + NETWORK_CLAIM_LEASE_MS);
    expect(await runHoldExpiry(lapsedAt, job.processor)).toMatchObject({ intents_recovered: 1 });
    expect(job.released.map((r) => [r.reference, r.amount])).toEqual([[request.reference, 2600]]);
    expect(await charges()).toEqual(before);
    expect(await intents()).toEqual([]);
  });

  // The three ways the record step meets a taken-over intent: a token's charge (its term looked up
  // in a transaction), a customer's captured charge (one statement with its term, then the
  // transaction to tell why nothing was written), a customer's hold (one statement, no term).
  it.each([
    ['by token', 0, async () => ({ card: await token() })],
    ['by customer, captured', 1, async () => ({ customer: await customerWithCard() })],
    ['by customer, held', 2, async () => ({ customer: await customerWithCard(), capture: 'false' })],
  ] as const)('a create (%s) that outlives its lease writes no charge and no event: the recovery undid it, once', async (_, hour, params) => {
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + (20 + hour) * 3_600_000));
    const input = await params();
    let resume: () => void = () => {};
    let atNetwork = false;
    const slow = recording();
    const slowCtx = contextWith({
      ...slow.processor,
      authorize: async (requests) => {
        const results = await slow.processor.authorize(requests);
        atNetwork = true;
        await new Promise<void>((resolve) => {
          resume = resolve;
        });
        return results;
      },
    });
    const created = runOperation(slowCtx, caller, 'charges.create', { amount: '900', currency: 'jpy', ...input }).then(
      () => 'ok',
      (error: unknown) => (error instanceof KessaiError ? error.code : String(error)),
    );
    while (!atNetwork) await new Promise((resolve) => setTimeout(resolve, 10));
    const recoverer = recording();
    const lapsedAt = new Date(ctx.clock.now().getTime() + NETWORK_CLAIM_LEASE_MS);
    expect(await recoverCreateIntents(contextWith(recoverer.processor, lapsedAt), [caller.accountId], 100)).toBe(1);
    resume();
    expect(await created).toBe('payjp_wrong');
    expect(recoverer.released).toHaveLength(1);
    // The slow request released nothing itself: the recovery's release is the only one.
    expect(slow.released).toEqual([]);
    const chargeId = slow.asked[0]!.request.reference;
    expect(await charges()).not.toContainEqual(expect.objectContaining({ charge_id: chargeId }));
    expect(await listEvents(ctx.db, caller.accountId, { resourceId: chargeId })).toEqual([]);
    if ('card' in input) expect(await tokenUsedAt(input.card)).toBeNull();
    expect(await intents()).toEqual([]);
  });

  it.runIf(isPostgres())('two recoveries at once (two pools) undo each lapsed intent once (SKIP LOCKED)', async () => {
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 3 * 3_600_000));
    const tokens = [await token(), await token(), await token()];
    const dead = [];
    for (const tok of tokens) dead.push(await createDyingAtTheNetwork({ amount: '1000', currency: 'jpy', card: tok }));
    const lapsedAt = new Date(ctx.clock.now().getTime() + NETWORK_CLAIM_LEASE_MS);
    const a = recording();
    const b = recording();
    const second = await database.openAnother();
    const undone = await Promise.all([
      recoverCreateIntents(contextWith(a.processor, lapsedAt), [caller.accountId], 1),
      recoverCreateIntents(contextWith(b.processor, lapsedAt, second), [caller.accountId], 1),
    ]);
    expect(undone[0] + undone[1]).toBe(3);
    expect([...a.released, ...b.released].map((r) => r.reference).sort()).toEqual(dead.map((d) => d.request.reference).sort());
    for (const tok of tokens) expect(await tokenUsedAt(tok)).toBeNull();
    expect(await intents()).toEqual([]);
    await second.close();
  });
});

describe('create intents and charge claims left in idempotency_keys before they moved to network_claims', () => {
  const migrate = () => sql.raw(readFileSync(join(SQL_DIR, '000280_charge_network_claims.sql'), 'utf8')).execute(ctx.db);
  const claimOf = (chargeId: string) =>
    ctx.db.selectFrom('network_claims').select(['operation', 'claimed_at', 'lease_until', 'recovery']).where('account_id', '=', caller.accountId).where('resource', '=', 'charge').where('resource_id', '=', chargeId).execute();
  const chargeKeys = () => ctx.db.selectFrom('idempotency_keys').select('idempotency_key').where('account_id', '=', caller.accountId).where('idempotency_key', 'like', 'charge:%').execute();

  it('sql/000280 moves a create intent with its authorization and token; once lapsed, the hold-expiry job releases it and gives the token back, once', async () => {
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 30 * 3_600_000));
    const tok = await token();
    const { request, result } = await createDyingAtTheNetwork({ amount: '1300', currency: 'jpy', card: tok });
    const [claimed] = await claimOf(request.reference);
    // The intent as the earlier code left it: a pending row of idempotency_keys under charge:<id>, no claim.
    await ctx.db.deleteFrom('network_claims').where('account_id', '=', caller.accountId).where('resource_id', '=', request.reference).execute();
    await ctx.db
      .insertInto('idempotency_keys')
      .values({
        account_id: caller.accountId,
        livemode: false,
        idempotency_key: `charge:${request.reference}`,
        request_hash: 'charges.create',
        state: 'pending',
        response_body: JSON.stringify({ request: { ...request, at: request.at.toISOString() }, tokenId: tok, tokenUsedAt: request.at.toISOString() }),
        created_at: claimed!.claimed_at,
        expires_at: claimed!.lease_until,
      })
      .execute();
    await migrate();
    expect(await claimOf(request.reference)).toEqual([claimed]);
    expect(await chargeKeys()).toEqual([]);
    const lapsedAt = claimed!.lease_until;
    const job = recording();
    expect(await runHoldExpiry(lapsedAt, job.processor)).toMatchObject({ intents_recovered: 1 });
    expect(job.released).toEqual([{ reference: request.reference, authorizationCode: (result as { authorizationCode: string }).authorizationCode, amount: 1300, at: lapsedAt }]);
    expect(await tokenUsedAt(tok)).toBeNull();
    expect(await claimOf(request.reference)).toEqual([]);
    expect(await charges()).not.toContainEqual(expect.objectContaining({ charge_id: request.reference }));
  });

  it('sql/000280 moves a capture\'s claim: the hold-expiry job leaves the charge alone until its lease lapses', async () => {
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 31 * 3_600_000));
    const held = (await runOperation(ctx, caller, 'charges.create', { amount: '1000', currency: 'jpy', customer: await customerWithCard(), capture: 'false' })) as { id: string; expired_at: number };
    const expiredAt = new Date(held.expired_at * 1000);
    const lease = new Date(expiredAt.getTime() + NETWORK_CLAIM_LEASE_MS);
    // A capture that died at the network left its claim, as the earlier code wrote it, at the last instant the hold is good.
    await ctx.db
      .insertInto('idempotency_keys')
      .values({ account_id: caller.accountId, livemode: false, idempotency_key: `charge:${held.id}`, request_hash: 'charges.capture', state: 'pending', created_at: expiredAt, expires_at: lease })
      .execute();
    await migrate();
    expect(await claimOf(held.id)).toEqual([{ operation: 'charges.capture', claimed_at: expiredAt, lease_until: lease, recovery: { authorizations: [] } }]);
    expect(await chargeKeys()).toEqual([]);
    const releasedAt = async () => (await ctx.db.selectFrom('charges').select('released_at').where('account_id', '=', caller.accountId).where('charge_id', '=', held.id).executeTakeFirstOrThrow()).released_at;
    const slot = new Date(expiredAt.getTime() + 60_000);
    await ctx.db.transaction().execute((trx) => expireHoldBatch(trx, contextWith(simulatedCardNetwork(), expiredAt), [caller.accountId], slot, 100));
    expect(await releasedAt()).toBeNull();
    await ctx.db.transaction().execute((trx) => expireHoldBatch(trx, contextWith(simulatedCardNetwork(), lease), [caller.accountId], slot, 100));
    expect(await releasedAt()).toEqual(expiredAt);
  });
});
