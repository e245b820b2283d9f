/**
 * Claims on a v1 charge while a card-network call for it is in flight (STYLE.md: no network calls
 * while rows are locked; docs/decisions/idempotency-and-network-claims.md,
 * "Charges: the card network outside the row lock").
 *
 * An operation that must ask the network about an existing charge (capture, cancelling a hold,
 * reauth, tds_finish, the 3-D Secure step) runs in three steps, as setup flows do:
 * 1. a short transaction locks the charge row, checks its state and takes the claim (committed);
 * 2. the network is called with no transaction open;
 * 3. a second short transaction locks the row again and records the outcome only if the claim
 *    still holds, dropping the claim in the same commit.
 *
 * Any other operation that changes what the network call depends on (the same ones, and a refund)
 * finds the claim under the row lock and waits for it to go, polling with no transaction open,
 * then decides on the recorded outcome, as it would have after waiting for the row lock before. The
 * hold jobs skip claimed charges (LIVE_CLAIM_SQL). So one charge has one network call in flight at
 * a time and one outcome.
 *
 * Where: a claim is a `pending` row of `idempotency_keys` under the reserved key `charge:<id>` (a
 * key the HTTP plugin can never accept: its keys have no `:`), `request_hash` naming the operation,
 * `created_at` the claim's instant (its fencing token) and `expires_at` its lease. A claim left by
 * a crashed process lapses after CHARGE_CLAIM_LEASE_MS and is then taken over like no claim; the
 * network answers a repeated request under the same reference with the same authorization, and
 * expired keys are purged with the others.
 */
import { sql, type Kysely, type RawBuilder, type SqlBool } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { inAccounts } from '../db/account-scope';
import { prepared } from '../db/prepared';
import type { Database } from '../db/schema';
import { reject } from '../domain/errors';
import type { Context } from '../engine/context';
import { findCharge } from './charge-record';
import { CLAIM_PREFIX, claimRowDeletion, claimRowOf, type ChargeClaim } from './claim-rows';
import type { ChargeRow } from './charges';

/** How long a claim holds before another operation (or a hold job) may take the charge over. */
export const CHARGE_CLAIM_LEASE_MS = 60_000;
/** A waiting operation looks at the claim every CLAIM_POLL_MS, CLAIM_POLLS times at most (about 10 s), then answers over_capacity. */
const CLAIM_POLL_MS = 20;
const CLAIM_POLLS = 500;

/**
 * `<alias>` (a `charges` row of one of `accountIds`, the batch's) has a claim whose lease has not
 * lapsed at `at`: for the jobs' SQL. The subquery names the batch's accounts itself: Citus routes a
 * locking statement over several accounts only when every table in it does.
 */
export function liveClaimSql(alias: string, accountIds: readonly string[], at: Date): RawBuilder<SqlBool> {
  return sql<SqlBool>`EXISTS (SELECT 1 FROM idempotency_keys k WHERE ${inAccounts('k.account_id', accountIds)} AND k.account_id = ${sql.ref(`${alias}.account_id`)} AND k.livemode = ${sql.ref(`${alias}.livemode`)}
    AND k.idempotency_key = ${CLAIM_PREFIX} || ${sql.ref(`${alias}.charge_id`)} AND k.expires_at > ${at})`;
}

function claimRows(executor: Kysely<Database>, key: Pick<ChargeClaim, 'accountId' | 'livemode' | 'chargeId'>) {
  return executor.selectFrom('idempotency_keys').where('account_id', '=', key.accountId).where('livemode', '=', key.livemode).where('idempotency_key', '=', CLAIM_PREFIX + key.chargeId);
}

async function liveClaimOn(trx: Kysely<Database>, row: ChargeRow, at: Date): Promise<boolean> {
  const live = await claimRows(trx, { accountId: row.account_id, livemode: row.livemode, chargeId: row.charge_id }).select('expires_at').where('expires_at', '>', at).executeTakeFirst();
  return live !== undefined;
}

/**
 * With the charge row locked (and no live claim on it: chargeTurn checked), claims it for
 * `operation` at `at`; a lapsed claim is overwritten.
 */
export async function takeClaim(trx: Kysely<Database>, row: ChargeRow, operation: string, at: Date): Promise<ChargeClaim> {
  return writeClaim(trx, { accountId: row.account_id, livemode: row.livemode, chargeId: row.charge_id }, operation, at);
}

/**
 * Writes the claim row of charge `key.chargeId` for `operation` at `at` (lease from `at`), with
 * `body` (what the claim's recovery needs, create-intents.ts) when given; a lapsed claim is
 * overwritten.
 */
export async function writeClaim(trx: Kysely<Database>, key: Pick<ChargeClaim, 'accountId' | 'livemode' | 'chargeId'>, operation: string, at: Date, body: string | null = null): Promise<ChargeClaim> {
  const expiresAt = new Date(at.getTime() + CHARGE_CLAIM_LEASE_MS);
  await trx
    .insertInto('idempotency_keys')
    .values({ account_id: key.accountId, livemode: key.livemode, idempotency_key: CLAIM_PREFIX + key.chargeId, request_hash: operation, state: 'pending', response_body: body, created_at: at, expires_at: expiresAt })
    .onConflict((oc) =>
      oc
        .columns(['account_id', 'livemode', 'idempotency_key'])
        .doUpdateSet({ request_hash: operation, state: 'pending', status_code: null, response_headers: null, response_body: body, created_at: at, expires_at: expiresAt }),
    )
    .modifyEnd(prepared('charges.claim.write'))
    .execute();
  return { accountId: key.accountId, livemode: key.livemode, chargeId: key.chargeId, operation, claimedAt: at };
}

/**
 * Drops the claim if it is still this one (a taken-over claim belongs to its taker); in the
 * caller's transaction or on its own. True when it was this one's to drop.
 */
export async function dropClaim(executor: Kysely<Database>, claim: ChargeClaim): Promise<boolean> {
  const dropped = await claimRowDeletion(executor, claimRowOf(claim)).modifyEnd(prepared('charges.claim.drop')).executeTakeFirst();
  return dropped.numDeletedRows > 0n;
}

const BUSY = Symbol('busy');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `decide` in a transaction on the charge locked FOR UPDATE, with the clock read after the
 * lock, once no other operation holds a live claim on it. While one does, the transaction ends at
 * once (nothing written) and the turn is tried again a moment later; after about 10 s the answer is
 * `over_capacity` (429: retry later). `decide` may take the claim (takeClaim) before it returns.
 */
export async function chargeTurn<T>(ctx: Pick<Context, 'db' | 'clock'>, caller: Caller, chargeId: string, decide: (trx: Kysely<Database>, current: ChargeRow, now: Date) => Promise<T>): Promise<T> {
  for (let polls = CLAIM_POLLS; ; polls -= 1) {
    const result = await ctx.db.transaction().execute(async (trx): Promise<T | typeof BUSY> => {
      const current = await findCharge(trx, caller, chargeId, true);
      const now = ctx.clock.now();
      if (await liveClaimOn(trx, current, now)) return BUSY;
      return decide(trx, current, now);
    });
    if (result !== BUSY) return result;
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
    const current = await findCharge(trx, caller, claim.chargeId, true);
    const held = await claimRows(trx, claim).select('idempotency_key').where('request_hash', '=', claim.operation).where('created_at', '=', claim.claimedAt).executeTakeFirst();
    if (held === undefined) return lost(trx, current);
    const result = await record(trx, current);
    await dropClaim(trx, claim);
    return result;
  });
}

/** The network step between the claim and the record: a thrown fault drops the claim (nothing was recorded) and is rethrown. */
export async function callNetwork<T>(ctx: Pick<Context, 'db'>, claim: ChargeClaim, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    await dropClaim(ctx.db, claim);
    throw error;
  }
}
