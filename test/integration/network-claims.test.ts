/**
 * The network-claim mechanism (src/engine/network-claims.ts) on its own, on the test database and
 * on an embedded PGlite one: the claim is committed while the network answers, a second operation
 * on the object waits for the first's record, a claim whose process died at the network is taken
 * over and undone exactly once (the network asked again under the same reference, one release),
 * and a network fault leaves no claim and nothing approved.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/engine/clock';
import { holdExpiryJob } from '../../jobs/hold-expiry';
import { Scheduler } from '../../src/engine/scheduler';
import { openStore, type Store } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import {
  NETWORK_CLAIM_LEASE_MS,
  NetworkClaimLost,
  STALE,
  recoverLapsedClaims,
  runClaimed,
  takeNetworkClaim,
  type ClaimedObject,
  type ClaimedOperation,
} from '../../src/engine/network-claims';
import type { AuthorizationRequest, CardNetwork } from '../../src/processor/card-network';
import { TEST_CARD_LIST } from '../../src/processor/test-cards';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';
import { gatedNetwork, recordingNetwork } from '../support/recording-network';

const visa = TEST_CARD_LIST.find((card) => card.name === 'visa')!;

function authorization(reference: string, at: Date): AuthorizationRequest {
  return { reference, fingerprint: visa.fingerprint, expMonth: 12, expYear: 2099, amount: 1_000, currency: 'jpy', livemode: false, at, kind: 'charge' };
}

const object = (accountId: string, id: string): ClaimedObject => ({ accountId, livemode: false, resource: 'subscription', resourceId: id });

/** An operation that claims `target`, authorizes one charge under `reference` and records the answer as a row of `recorded`. */
function chargeOnce(clock: Clock, target: ClaimedObject, reference: string, recorded: string[]): ClaimedOperation<string, string> {
  return {
    claim: async (trx) => {
      const now = clock.now();
      return { claim: await takeNetworkClaim(trx, target, 'test.charge', now, { authorizations: [authorization(reference, now)] }), authorizations: [authorization(reference, now)], plan: reference };
    },
    record: async (_trx, plan, answers) => {
      recorded.push(`${plan}:${answers[0]!.approved ? 'approved' : 'declined'}`);
      return plan;
    },
  };
}

type Ctx = ReturnType<typeof testContext>;
const claimsOf = async (ctx: Ctx, accountId: string) =>
  (await sql<{ resource_id: string; operation: string }>`SELECT resource_id, operation FROM network_claims WHERE account_id = ${accountId}`.execute(ctx.db)).rows;

let database: TestDatabase;
let embedded: Store;
beforeAll(async () => {
  database = await createTestDatabase();
  embedded = await openStore({ dataDir: 'memory://' });
  await migrate(embedded);
});
afterAll(async () => {
  await database?.drop();
  await embedded?.close();
});

describe.each([
  ['the test database', () => database.store],
  ['embedded PGlite', () => embedded],
])('network claims on %s', (_name, store) => {
  const account = `acct_claims_${_name.includes('PGlite') ? 'pglite' : 'db'}`;

  it('commits the claim before the network is asked, drops it with the record, and makes a second operation wait for the first', async () => {
    const network = gatedNetwork();
    const ctx = { ...testContext(store()), processor: network.processor };
    const recorded: string[] = [];
    const target = object(account, 'sub_wait');
    const first = runClaimed(ctx, chargeOnce(ctx.clock, target, 'ref_first', recorded));
    await network.atNetwork();
    // Committed and visible to another reader while the network answers.
    expect(await claimsOf(ctx, account)).toEqual([{ resource_id: 'sub_wait', operation: 'test.charge' }]);
    const second = runClaimed(ctx, chargeOnce(ctx.clock, target, 'ref_second', recorded));
    // The second waits on the claim: nothing of it reaches the network while the first is there.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(network.asked.map((a) => a.request.reference)).toEqual([]);
    network.open();
    await first;
    await network.atNetwork();
    expect(recorded).toEqual(['ref_first:approved']);
    network.open();
    await second;
    expect(recorded).toEqual(['ref_first:approved', 'ref_second:approved']);
    expect(network.asked.map((a) => a.request.reference)).toEqual(['ref_first', 'ref_second']);
    expect(await claimsOf(ctx, account)).toEqual([]);
  });

  it('takes over a claim whose process died after the network answered: asked again under the same reference, released once, then the new operation', async () => {
    const network = recordingNetwork();
    const ctx = { ...testContext(store()), processor: network.processor };
    const target = object(account, 'sub_crash');
    // A process claimed, was answered by the network, and died before recording.
    const dead = await ctx.db.transaction().execute((trx) => takeNetworkClaim(trx, target, 'test.charge', ctx.clock.now(), { authorizations: [authorization('ref_dead', ctx.clock.now())] }));
    const [first] = await network.processor.authorize([authorization('ref_dead', dead.claimedAt)]);
    expect(first!.approved).toBe(true);
    const recorded: string[] = [];
    // Once its lease has lapsed, the next operation on the object takes the claim over.
    ctx.clock.advance(NETWORK_CLAIM_LEASE_MS);
    await runClaimed(ctx, chargeOnce(ctx.clock, target, 'ref_next', recorded));
    expect(network.asked.map((a) => a.request.reference)).toEqual(['ref_dead', 'ref_dead', 'ref_next']);
    expect(network.asked[1]!.result).toEqual(network.asked[0]!.result);
    expect(network.released.map((r) => r.reference)).toEqual(['ref_dead']);
    expect(recorded).toEqual(['ref_next:approved']);
    expect(await claimsOf(ctx, account)).toEqual([]);
  });

  it('undoes lapsed claims exactly once when two recoverers race, and leaves live ones', async () => {
    const network = recordingNetwork();
    const ctx = { ...testContext(store()), processor: network.processor };
    const accountId = `${account}_race`;
    const at = ctx.clock.now();
    await ctx.db.transaction().execute(async (trx) => {
      for (const id of ['a', 'b', 'c']) await takeNetworkClaim(trx, object(accountId, id), 'test.charge', at, { authorizations: [authorization(`ref_${id}`, at)] });
    });
    ctx.clock.advance(NETWORK_CLAIM_LEASE_MS - 1);
    expect(await recoverLapsedClaims(ctx, [accountId])).toBe(0);
    ctx.clock.advance(1);
    const counts = await Promise.all([recoverLapsedClaims(ctx, [accountId], 2), recoverLapsedClaims(ctx, [accountId], 2)]);
    expect(counts[0]! + counts[1]!).toBe(3);
    expect(network.released.map((r) => r.reference).sort()).toEqual(['ref_a', 'ref_b', 'ref_c']);
    expect(await claimsOf(ctx, accountId)).toEqual([]);
  });

  it('the hold-expiry job undoes a lapsed claim nobody came back for, once, and counts it', async () => {
    const network = recordingNetwork();
    const ctx = { ...testContext(store()), processor: network.processor };
    const accountId = `${account}_job`;
    const at = ctx.clock.now();
    await ctx.db.transaction().execute((trx) => takeNetworkClaim(trx, object(accountId, 'sub_job'), 'test.charge', at, { authorizations: [authorization('ref_job', at)] }));
    await network.processor.authorize([authorization('ref_job', at)]);
    const runAt = async (ms: number) => {
      const slot = new Date(at.getTime() + ms);
      ctx.clock.set(slot);
      const outcome = await new Scheduler(ctx, [holdExpiryJob], { owner: `claims-${ms}` }).runSlot(holdExpiryJob.name, slot);
      return outcome.status === 'succeeded' ? outcome.counts : outcome;
    };
    expect(await runAt(0)).not.toHaveProperty('claims_recovered');
    expect(await runAt(NETWORK_CLAIM_LEASE_MS)).toMatchObject({ claims_recovered: 1 });
    expect(await runAt(2 * NETWORK_CLAIM_LEASE_MS)).not.toHaveProperty('claims_recovered');
    expect(network.released.map((r) => r.reference)).toEqual(['ref_job']);
    expect(await claimsOf(ctx, accountId)).toEqual([]);
  });

  it('a network fault drops the claim and releases what the network may have approved', async () => {
    const recording = recordingNetwork();
    let failOnce = true;
    const failing: CardNetwork = {
      ...recording.processor,
      authorize: async (requests) => {
        const results = await recording.processor.authorize(requests);
        if (failOnce) {
          failOnce = false;
          throw new Error('the network timed out after approving');
        }
        return results;
      },
    };
    const ctx = { ...testContext(store()), processor: failing };
    await expect(runClaimed(ctx, chargeOnce(ctx.clock, object(account, 'sub_fault'), 'ref_fault', []))).rejects.toThrow('timed out');
    expect(recording.released.map((r) => r.reference)).toEqual(['ref_fault']);
    expect(await claimsOf(ctx, account)).toEqual([]);
  });

  it('a record step whose claim was taken over writes nothing; a stale answer is released and the operation runs again', async () => {
    const network = gatedNetwork();
    const ctx = { ...testContext(store()), processor: network.processor };
    const recorded: string[] = [];
    const target = object(account, 'sub_lost');
    const slow = runClaimed(ctx, chargeOnce(ctx.clock, target, 'ref_slow', recorded));
    await network.atNetwork();
    ctx.clock.advance(NETWORK_CLAIM_LEASE_MS);
    const recovering = recoverLapsedClaims({ ...ctx, processor: recordingNetwork().processor }, [account]);
    expect(await recovering).toBe(1);
    network.open();
    await expect(slow).rejects.toBeInstanceOf(NetworkClaimLost);
    expect(recorded).toEqual([]);

    let rounds = 0;
    const stale: ClaimedOperation<string, string> = {
      ...chargeOnce(ctx.clock, object(account, 'sub_stale'), 'ref_stale', recorded),
      record: async (_trx, plan) => (++rounds === 1 ? STALE : plan),
    };
    const done = runClaimed(ctx, stale);
    await network.atNetwork();
    network.open();
    await network.atNetwork();
    network.open();
    expect(await done).toBe('ref_stale');
    expect(rounds).toBe(2);
    expect(network.released.map((r) => r.reference)).toEqual(['ref_stale']);
  });
});

