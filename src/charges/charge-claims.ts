/**
 * Claims on a v1 charge while a card-network call for it is in flight (STYLE.md: no network calls
 * while rows are locked; docs/network-claims.md; docs/decisions/idempotency-and-network-claims.md).
 * They are network claims (src/engine/network-claims.ts) on the object (`charge`, its id).
 *
 * An operation that must ask the network about an existing charge (capture, cancelling a hold,
 * reauth, tds_finish, the 3-D Secure step) runs in three steps, as the other claimed operations do:
 * 1. a short transaction locks the charge row, checks its state and takes the claim (committed);
 * 2. the network is called with no transaction open;
 * 3. a second short transaction locks the row again and records the outcome only if the claim
 *    still holds, dropping the claim in the same commit.
 *
 * Any other operation that changes what the network call depends on (the same ones, and a refund)
 * finds the claim under the row lock and waits for it to go, polling with no transaction open,
 * then decides on the recorded outcome, as it would have after waiting for the row lock before. The
 * hold jobs skip claimed charges (liveClaimSql). So one charge has one network call in flight at a
 * time and one outcome.
 *
 * A claim left by a crashed process lapses after NETWORK_CLAIM_LEASE_MS. A reauth's claim names its
 * authorization request as its recovery point (the attempt's id is the reference, new for every
 * attempt): the next operation on the charge, or the hold-expiry job's recovery, asks it again
 * (the network answers a repeated request under one reference with the same authorization) and
 * releases what was approved, once, before anything else happens to the charge. The other
 * operations' claims name none and a lapsed one is taken over like no claim: a capture or a
 * release repeated under the charge's reference is the same call, and tds_finish asks again under
 * the charge's id, so releasing its authorization would leave the retry holding a released one.
 * The create intent of a new charge is a claim on it too, with its own recovery (create-intents.ts).
 */
import { sql, type Kysely, type RawBuilder, type SqlBool } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { inAccounts } from '../db/account-scope';
import type { Database } from '../db/schema';
import { reject } from '../domain/errors';
import type { Context } from '../engine/context';
import { dropNetworkClaim, lockHeldClaim, networkClaimAt, recoverNetworkClaim, takeNetworkClaimOver, type ClaimedObject, type HeldClaim, type NetworkClaim } from '../engine/network-claims';
import type { AuthorizationRequest } from '../processor/card-network';
import { findCharge } from './charge-record';
import type { ChargeRow } from './charges';

/** The `resource` of a charge's claims in network_claims. */
export const CHARGE_RESOURCE = 'charge';
/** A claim on a charge (`resource` CHARGE_RESOURCE, `resourceId` the charge id); `claimedAt` is also the operation's business instant. */
export type ChargeClaim = NetworkClaim;

/** A charge as the object of a claim. */
export const claimedCharge = (accountId: string, livemode: boolean, chargeId: string): ClaimedObject => ({ accountId, livemode, resource: CHARGE_RESOURCE, resourceId: chargeId });

/** A waiting operation looks at the claim every CLAIM_POLL_MS, CLAIM_POLLS times at most (about 10 s), then answers over_capacity. */
const CLAIM_POLL_MS = 20;
const CLAIM_POLLS = 500;

/**
 * `<alias>` (a `charges` row of one of `accountIds`, the batch's) has a claim whose lease has not
 * lapsed at `at`: for the jobs' SQL. The subquery names the batch's accounts itself: Citus routes a
 * locking statement over several accounts only when every table in it does.
 */
export function liveClaimSql(alias: string, accountIds: readonly string[], at: Date): RawBuilder<SqlBool> {
  return sql<SqlBool>`EXISTS (SELECT 1 FROM network_claims n WHERE ${inAccounts('n.account_id', accountIds)} AND n.account_id = ${sql.ref(`${alias}.account_id`)} AND n.livemode = ${sql.ref(`${alias}.livemode`)}
    AND n.resource = ${CHARGE_RESOURCE} AND n.resource_id = ${sql.ref(`${alias}.charge_id`)} AND n.lease_until > ${at})`;
}

const objectOf = (row: ChargeRow): ClaimedObject => claimedCharge(row.account_id, row.livemode, row.charge_id);

/**
 * With the charge row locked (and no live claim on it, nor a lapsed one to undo: chargeTurn
 * checked), claims it for `operation` at `at`, `authorizations` (the requests it is about to send
 * that a taker must release) as its recovery point; a lapsed claim is overwritten.
 */
export async function takeClaim(trx: Kysely<Database>, row: ChargeRow, operation: string, at: Date, authorizations: readonly AuthorizationRequest[] = []): Promise<ChargeClaim> {
  const claim = await takeNetworkClaimOver(trx, objectOf(row), operation, at, { authorizations });
  // Unreachable while every taker of a charge's claim holds its row lock first (chargeTurn).
  if (claim === undefined) throw new Error(`charge ${row.charge_id}: claimed by another operation under the row lock`);
  return claim;
}

const BUSY = Symbol('busy');
/** A lapsed claim whose authorizations must be released before the charge is decided on. */
class Lapsed {
  constructor(readonly claim: HeldClaim) {}
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `decide` in a transaction on the charge locked FOR UPDATE, with the clock read after the
 * lock, once no other operation holds a live claim on it. While one does, the transaction ends at
 * once (nothing written) and the turn is tried again a moment later; after about 10 s the answer is
 * `over_capacity` (429: retry later). A lapsed claim that names authorizations (a reauth's) is
 * recovered first, with no transaction open (recoverNetworkClaim: asked again, released once).
 * `decide` may take the claim (takeClaim) before it returns.
 */
export async function chargeTurn<T>(ctx: Pick<Context, 'db' | 'clock' | 'processor'>, caller: Caller, chargeId: string, decide: (trx: Kysely<Database>, current: ChargeRow, now: Date) => Promise<T>): Promise<T> {
  for (let polls = CLAIM_POLLS; ; polls -= 1) {
    const result = await ctx.db.transaction().execute(async (trx): Promise<T | typeof BUSY | Lapsed> => {
      const current = await findCharge(trx, caller, chargeId, true);
      const now = ctx.clock.now();
      const held = await networkClaimAt(trx, objectOf(current), now);
      if (held?.live === true) return BUSY;
      if (held !== undefined && held.claim.recovery.authorizations.length > 0) return new Lapsed(held.claim);
      return decide(trx, current, now);
    });
    // Resolved here: decide again at once; taken by another taker: wait as for a live claim.
    if (result instanceof Lapsed && (await recoverNetworkClaim(ctx, result.claim))) continue;
    if (result !== BUSY && !(result instanceof Lapsed)) return result;
    if (polls <= 0) return reject('over_capacity', 'id', `Charge ${chargeId} is being processed by another request; retry later.`);
    await sleep(CLAIM_POLL_MS);
  }
}

/**
 * The third step: in a transaction on the charge locked again, `record` writes the outcome of the
 * claimed network call and the claim is dropped in the same commit. If the claim lapsed and was
 * taken over meanwhile, the taker's outcome stands: `lost` answers instead, with the charge as it is.
 */
export async function recordClaimed<T>(
  ctx: Pick<Context, 'db'>,
  caller: Caller,
  claim: ChargeClaim,
  record: (trx: Kysely<Database>, current: ChargeRow) => Promise<T>,
  lost: (trx: Kysely<Database>, current: ChargeRow) => Promise<T>,
): Promise<T> {
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findCharge(trx, caller, claim.resourceId, true);
    if (!(await lockHeldClaim(trx, claim))) return lost(trx, current);
    const result = await record(trx, current);
    await dropNetworkClaim(trx, claim);
    return result;
  });
}

/** The network step between the claim and the record: a thrown fault drops the claim (nothing was recorded) and is rethrown. */
export async function callNetwork<T>(ctx: Pick<Context, 'db'>, claim: ChargeClaim, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    await dropNetworkClaim(ctx.db, claim);
    throw error;
  }
}
