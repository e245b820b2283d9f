/**
 * A `kessai serve` killed (SIGKILL) right after the card network answered a `charges.create`
 * (KESSAI_FAULT=after-authorization, src/processor/network-faults.ts): the authorization is at the
 * network, the token consumed, no charge written. The create intent it committed before the call
 * lets the recovery (src/charges/create-intents.ts, run by the hold-expiry job) release the
 * authorization and give the token back once the intent's lease lapses — once, even with two
 * recoveries at once — and an unkeyed retry with the same token then pays.
 *
 * PostgreSQL only, like idempotency-crash.test.ts: the embedded database is one process's files;
 * test/integration/create-intents.test.ts covers the same path in-process on both stores. The
 * lease (60 s of the server's real clock) is not waited for: the recoveries run on a test clock
 * set past it.
 */
import Payjp from 'payjp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHARGE_CLAIM_LEASE_MS } from '../../src/charges/charge-claims';
import { recoverCreateIntents } from '../../src/charges/create-intents';
import { simulatedCardNetwork, type AuthorizationResult, type CardNetwork, type SettlementRequest } from '../../src/processor/card-network';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { createTestDatabase, isPostgres, testContext, type TestDatabase } from '../support/database';
import { call } from '../support/plugin-app';
import { spawnKessai, startServe, type SpawnedWorker } from '../support/spawn-worker';

let database: TestDatabase;
let env: Record<string, string>;
let secret: string;
let publicKey: string;
let accountId: string;
const running: SpawnedWorker[] = [];

beforeAll(async () => {
  if (!isPostgres()) return;
  database = await createTestDatabase();
  env = { DATABASE_URL: database.url!, KESSAI_LOG_LEVEL: 'warn', KESSAI_FAULT: '' };
  const created = spawnKessai(['accounts', 'create', '--name', 'Network Crash Shop', '--json'], env);
  expect((await created.exited).code).toBe(0);
  const parsed = JSON.parse(created.output()) as { account: { id: string }; keys: { test: { secret: string; public: string } } };
  accountId = parsed.account.id;
  secret = parsed.keys.test.secret;
  publicKey = parsed.keys.test.public;
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

async function tokenOn(apibase: string): Promise<string> {
  return (await call(apibase, publicKey, 'POST', '/tokens', { 'card[number]': TEST_CARDS.visa.number, 'card[exp_month]': '12', 'card[exp_year]': '2035', 'card[cvc]': '123' })).body.id!;
}

/** The simulator, with what it was asked written down. */
function recording() {
  const network = simulatedCardNetwork();
  const answers: AuthorizationResult[] = [];
  const released: SettlementRequest[] = [];
  const processor: CardNetwork = {
    ...network,
    authorize: async (requests) => {
      const results = await network.authorize(requests);
      answers.push(...results);
      return results;
    },
    release: async (requests) => {
      released.push(...requests);
      return network.release(requests);
    },
  };
  return { processor, answers, released };
}

const charges = () => database.store.db.selectFrom('charges').select(['charge_id', 'amount', 'paid']).where('account_id', '=', accountId).execute();
const intents = () => database.store.db.selectFrom('idempotency_keys').select(['idempotency_key', 'request_hash', 'state', 'expires_at']).where('account_id', '=', accountId).where('request_hash', '=', 'charges.create').execute();
const tokenUsedAt = async (id: string) => (await database.store.db.selectFrom('tokens').select('used_at').where('account_id', '=', accountId).where('token_id', '=', id).executeTakeFirstOrThrow()).used_at;

describe.skipIf(!isPostgres())('kessai serve killed after the card network authorized a charges.create', () => {
  it('the recovery releases the authorization and gives the token back once; an unkeyed retry then pays', async () => {
    const first = await serve('after-authorization');
    const tok = await tokenOn(first.apibase);
    const payjp = Payjp(secret, { apibase: first.apibase });
    await expect(payjp.charges.create({ amount: 4200, currency: 'jpy', card: tok, capture: false })).rejects.toThrow();
    expect(await first.server.exited).toMatchObject({ signal: 'SIGKILL' });

    // Money held at the network, nothing recorded but the intent, the token used.
    expect(await charges()).toEqual([]);
    const [intent, ...more] = await intents();
    expect(more).toEqual([]);
    expect(intent).toMatchObject({ idempotency_key: expect.stringMatching(/^charge:ch_/), state: 'pending' });
    expect(await tokenUsedAt(tok)).not.toBeNull();
    const chargeId = intent!.idempotency_key.slice('charge:'.length);

    // Two recoveries at once (two pools, as two workers), on a clock past the intent's lease.
    const lapsedAt = new Date(intent!.expires_at.getTime() + 1);
    const other = await database.openAnother();
    const a = recording();
    const b = recording();
    const undone = await Promise.all([
      recoverCreateIntents({ ...testContext(database.store, { at: lapsedAt, seed: 91 }), processor: a.processor }, [accountId], 100),
      recoverCreateIntents({ ...testContext(other, { at: lapsedAt, seed: 92 }), processor: b.processor }, [accountId], 100),
    ]);
    await other.close();
    expect(undone.sort()).toEqual([0, 1]);
    const released = [...a.released, ...b.released];
    const approval = [...a.answers, ...b.answers];
    expect(approval).toEqual([{ reference: chargeId, approved: true, authorizationCode: expect.stringMatching(/^\d{6}$/) }]);
    expect(released).toEqual([{ reference: chargeId, authorizationCode: (approval[0] as { authorizationCode: string }).authorizationCode, amount: 4200, at: lapsedAt }]);
    expect(await intents()).toEqual([]);
    expect(await tokenUsedAt(tok)).toBeNull();
    expect(await charges()).toEqual([]);
    // Nothing left for a later pass.
    const later = recording();
    expect(await recoverCreateIntents({ ...testContext(database.store, { at: new Date(lapsedAt.getTime() + CHARGE_CLAIM_LEASE_MS), seed: 93 }), processor: later.processor }, [accountId], 100)).toBe(0);
    expect(later.released).toEqual([]);

    // The same request again, without a key, on a server that does not crash: the token pays.
    const second = await serve('');
    const charge = await Payjp(secret, { apibase: second.apibase }).charges.create({ amount: 4200, currency: 'jpy', card: tok, capture: false });
    expect(charge).toMatchObject({ object: 'charge', amount: 4200, paid: true, captured: false });
    expect(await charges()).toEqual([{ charge_id: charge.id, amount: 4200, paid: true }]);
    expect(await intents()).toEqual([]);
  }, 90_000);
});
