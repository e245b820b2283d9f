/**
 * Create intents of v1 charges (docs/network-claims.md; docs/decisions/idempotency-and-network-claims.md):
 * what `charges.create` leaves behind while its authorization is at the card network, so that a
 * process dying between the network's answer and the charge's write loses nothing and leaves no
 * money held.
 *
 * v1 has no pending state for a charge, so the intent is a network claim (src/engine/network-claims.ts)
 * on the charge about to be written: resource `charge`, the charge id, operation `charges.create`,
 * `claimed_at` its instant (the fencing token), `lease_until` its lease, and as its recovery point
 * the authorization request as sent (reference = the charge id) and the token the charge consumed,
 * if any, with the instant it was consumed (null when none, or given back already).
 *
 * - The prepare step of createCharge writes it (writeCreateIntent), with the token's use; on a
 *   customer's card the statement that reads the card writes it (createIntentFrom).
 * - The record step drops it in the statement that writes the charge (insertCreatedCharge, in
 *   charge-record.ts, with networkClaimDeletion); if it is no longer this request's (it lapsed and
 *   a recovery took it over), the charge is not written: CreateIntentLost, and the taker undoes.
 * - A failure after the prepare transaction undoes it at once (undoCreateIntent).
 * - A lapsed intent (its process died) is undone by recoverCreateIntents, which the hold-expiry job
 *   runs every minute (jobs/hold-expiry.ts: the worker, and `kessai serve` on the embedded database).
 *   The engine's own recovery of lapsed claims leaves intents alone (their recovery point names a
 *   token: given back here, with the drop).
 *
 * An undo is claim → commit → network → drop, never a row lock across the network: the intent is
 * claimed again under a new instant (fenced by the old one), committed; the authorization is found
 * by its reference (the network answers a repeated request under one reference with the same
 * authorization) and released if approved; then, in one statement, the intent is dropped if still
 * the undoer's and the token it consumed is given back with it. So two undoers (two workers, a
 * worker and a failing request) release once and give the token back once.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { accountsOf, inAccounts } from '../db/account-scope';
import { ROW_KEYS_AT } from '../db/bulk-rows';
import type { Database } from '../db/schema';
import type { Context } from '../engine/context';
import { accountsWithLapsedClaims, moveRecoveryPoint, NETWORK_CLAIM_LEASE_MS, NetworkClaimLost, recoveryOf, recoveryText, takeNetworkClaim, takeOverClaim, takeOverLapsedClaims, type RecoveryPoint } from '../engine/network-claims';
import type { AuthorizationRequest, AuthorizationResult } from '../processor/card-network';
import { CHARGE_RESOURCE, claimedCharge, type ChargeClaim } from './charge-claims';

/** The network claim's `operation` of a create intent. */
export const CREATE_INTENT_OPERATION = 'charges.create';

/** An intent as written: the claim, and what undoing it needs. */
export interface CreateIntent extends ChargeClaim {
  readonly request: AuthorizationRequest;
  readonly tokenId: string | null;
  /** When the token was consumed (the condition of giving it back): the prepare transaction's instant. */
  readonly tokenUsedAt: Date;
}

/** The request's fields that name the card (what createIntentFrom takes from the card it reads). */
type CardFields = 'fingerprint' | 'expMonth' | 'expYear';

/** The intent's recovery point: its authorization request and the token it consumed (null: none, or given back). */
const recoveryPointOf = (request: AuthorizationRequest, tokenId: string | null, tokenUsedAt: Date): RecoveryPoint => ({
  authorizations: [request],
  token: tokenId === null ? null : { tokenId, usedAt: tokenUsedAt },
});

/** Thrown by the record step when the intent lapsed and was taken over: the charge is not written, the taker undoes. */
export class CreateIntentLost extends Error {
  constructor(readonly chargeId: string) {
    super(`charge ${chargeId}: its create intent lapsed and was undone by another process before the charge was written`);
    this.name = 'CreateIntentLost';
  }
}

/** In the prepare transaction: the intent of the charge `request.reference` at `at`. */
export async function writeCreateIntent(trx: Kysely<Database>, caller: Caller, request: AuthorizationRequest, tokenId: string | null, at: Date): Promise<CreateIntent> {
  await takeNetworkClaim(trx, claimedCharge(caller.accountId, caller.livemode, request.reference), CREATE_INTENT_OPERATION, at, recoveryPointOf(request, tokenId, at));
  return createIntentWritten(caller, request, at, tokenId);
}

/** What createIntentFrom binds: the intent's row but for the card fields its read completes (createIntentValues). */
export interface CreateIntentValues {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly intentChargeId: string;
  readonly intentRecovery: string;
  readonly intentAt: Date;
  readonly intentLeaseUntil: Date;
}

/** createIntentFrom's values of the intent of `request` at `at`, the row otherwise as writeCreateIntent writes it. */
export function createIntentValues(caller: Pick<Caller, 'accountId' | 'livemode'>, request: Omit<AuthorizationRequest, CardFields>, at: Date): CreateIntentValues {
  // The card fields are filled in by the statement's read; the request is stored without them until then.
  const partial = request as AuthorizationRequest;
  return {
    accountId: caller.accountId,
    livemode: caller.livemode,
    intentChargeId: request.reference,
    intentRecovery: recoveryText(recoveryPointOf(partial, null, at)),
    intentAt: at,
    intentLeaseUntil: new Date(at.getTime() + NETWORK_CLAIM_LEASE_MS),
  };
}

/**
 * The INSERT of the intent of a charge on a stored card (no token) that the same statement reads:
 * `read` names a common table expression of the card's columns (`card_id` null when there is no
 * card to charge: then nothing is written) whose fingerprint and expiry complete the request of the
 * recovery point (`v`: createIntentValues). For the first step of a create on a customer's card,
 * one statement where a read and an INSERT were two; the caller must have nothing left that can
 * refuse after the read. createIntentWritten is the intent it wrote. The values are only bound
 * (they may be fixedStatement's slots).
 */
export function createIntentFrom(read: string, v: CreateIntentValues): RawBuilder<unknown> {
  return sql`INSERT INTO network_claims (account_id, livemode, resource, resource_id, operation, claimed_at, lease_until, recovery)
    SELECT ${v.accountId}, ${v.livemode}, ${CHARGE_RESOURCE}, ${v.intentChargeId}, ${CREATE_INTENT_OPERATION}, ${v.intentAt}, ${v.intentLeaseUntil},
      jsonb_set(j.b, '{authorizations,0}', (j.b -> 'authorizations' -> 0) || jsonb_build_object('fingerprint', r.fingerprint, 'expMonth', r.exp_month, 'expYear', r.exp_year))
    FROM ${sql.table(read)} r CROSS JOIN (SELECT ${v.intentRecovery}::jsonb AS b) j
    WHERE r.card_id IS NOT NULL`;
}

/** The intent written at `at` (by writeCreateIntent, or by createIntentFrom with the request completed by the card read). */
export function createIntentWritten(caller: Pick<Caller, 'accountId' | 'livemode'>, request: AuthorizationRequest, at: Date, tokenId: string | null = null): CreateIntent {
  return { ...claimedCharge(caller.accountId, caller.livemode, request.reference), operation: CREATE_INTENT_OPERATION, claimedAt: at, request, tokenId, tokenUsedAt: at };
}

/**
 * The failure path of createCharge (the network or the record step failed): the intent undone
 * now, unless another process took it over. `authorization`: the network's answer if it gave one.
 * When the network cannot be asked (it failed, and fails again), the token is given back at once,
 * so the buyer can pay, and the intent stays, without its token, for the recovery to release what
 * the network may have authorized once its lease lapses. Never throws for the network: the
 * caller rethrows its own fault.
 */
export async function undoCreateIntent(ctx: Pick<Context, 'db' | 'processor' | 'clock'> & { readonly log?: Context['log'] }, intent: CreateIntent, authorization: AuthorizationResult | undefined): Promise<void> {
  const now = ctx.clock.now();
  const reclaimed = await takeOverClaim(ctx.db, intent, now);
  if (reclaimed === undefined) return;
  const claimed: CreateIntent = { ...intent, claimedAt: now };
  try {
    await undoClaimed(ctx, [claimed], authorization === undefined ? new Map() : new Map([[intent.resourceId, authorization]]), now);
  } catch (error) {
    await ctx.db.transaction().execute(async (trx) => {
      try {
        await moveRecoveryPoint(trx, claimed, recoveryPointOf(intent.request, null, intent.tokenUsedAt));
      } catch (lost) {
        if (lost instanceof NetworkClaimLost) return;
        throw lost;
      }
      if (intent.tokenId !== null) {
        await trx.updateTable('tokens').set({ used_at: null }).where('account_id', '=', intent.accountId).where('livemode', '=', intent.livemode).where('token_id', '=', intent.tokenId).where('used_at', '=', intent.tokenUsedAt).execute();
      }
    });
    ctx.log?.warn({ err: error, charge: intent.resourceId }, 'charges.create: the card network failed twice; the token is given back, the create intent left for the recovery');
  }
}

/**
 * The network and the drop of intents this process has claimed (at `now`): authorizations not
 * known are asked for again under their reference, approved ones released, then each intent is
 * dropped if still this claim's and its token given back in the same statement. Returns how many
 * were dropped; `recorded` runs in the drop's transaction with that count.
 */
async function undoClaimed(
  ctx: Pick<Context, 'db' | 'processor'>,
  intents: readonly CreateIntent[],
  known: ReadonlyMap<string, AuthorizationResult>,
  now: Date,
  recorded?: (trx: Kysely<Database>, undone: number) => Promise<void>,
): Promise<number> {
  const unknown = intents.filter((intent) => !known.has(intent.resourceId));
  const asked = unknown.length === 0 ? [] : await ctx.processor.authorize(unknown.map((intent) => intent.request));
  const answers = new Map(known);
  unknown.forEach((intent, i) => answers.set(intent.resourceId, asked[i]!));
  const approved = intents.flatMap((intent) => {
    const answer = answers.get(intent.resourceId)!;
    return answer.approved ? [{ reference: intent.request.reference, authorizationCode: answer.authorizationCode, amount: intent.request.amount, at: now }] : [];
  });
  if (approved.length > 0) await ctx.processor.release(approved);
  const k = ROW_KEYS_AT.table('k', intents.map((intent) => ({ accountId: intent.accountId, livemode: intent.livemode, id: intent.resourceId, at: intent.claimedAt })));
  const accounts = accountsOf(intents, (intent) => intent.accountId);
  const drop = sql<{ n: number }>`
    WITH gone AS (
      DELETE FROM network_claims n USING ${k.from}
      WHERE ${inAccounts('n.account_id', accounts)} AND n.account_id = ${k.col('a')} AND n.livemode = ${k.col('l')} AND n.resource = ${CHARGE_RESOURCE}
        AND n.resource_id = ${k.col('id')} AND n.operation = ${CREATE_INTENT_OPERATION} AND n.claimed_at = ${k.col('t')}
      RETURNING n.account_id, n.livemode, n.recovery -> 'token' AS token),
    restored AS (
      UPDATE tokens t SET used_at = NULL FROM gone
      WHERE ${inAccounts('t.account_id', accounts)} AND t.account_id = gone.account_id AND t.livemode = gone.livemode
        AND t.token_id = gone.token ->> 'tokenId' AND t.used_at = (gone.token ->> 'usedAt')::timestamptz
      RETURNING 1)
    SELECT count(*)::int AS n FROM gone`;
  return ctx.db.transaction().execute(async (trx) => {
    const undone = (await drop.execute(trx)).rows[0]?.n ?? 0;
    await recorded?.(trx, undone);
    return undone;
  });
}

/** The intents of `accountIds` lapsed at `now`, claimed at `now` (takeOverLapsedClaims: SKIP LOCKED), at most `limit`. */
async function claimLapsed(trx: Kysely<Database>, accountIds: readonly string[], now: Date, limit: number): Promise<CreateIntent[]> {
  const claimed = await takeOverLapsedClaims(trx, accountIds, now, limit, sql`c.resource = ${CHARGE_RESOURCE} AND c.operation = ${CREATE_INTENT_OPERATION}`);
  return claimed.map((claim) => intentOf(claim.accountId, claim.livemode, claim.resourceId, now, claim.recovery));
}

/** The intent of charge `chargeId` stamped `claimedAt`, from its claim's recovery point. */
function intentOf(accountId: string, livemode: boolean, chargeId: string, claimedAt: Date, point: RecoveryPoint): CreateIntent {
  const request = point.authorizations[0]!;
  return { ...claimedCharge(accountId, livemode, chargeId), operation: CREATE_INTENT_OPERATION, claimedAt, request, tokenId: point.token?.tokenId ?? null, tokenUsedAt: point.token?.usedAt ?? request.at };
}

/** The accounts having create intents lapsed at `now` (lock-free, through the lease index). */
export const accountsWithLapsedIntents = (db: Kysely<Database>, now: Date, among?: readonly string[]): Promise<string[]> => accountsWithLapsedClaims(db, now, CREATE_INTENT_OPERATION, among);

/**
 * Undoes the lapsed create intents of one account (or a group of one shard's accounts), `limit` at
 * a time, until none is left: each batch claimed in its own short transaction (`inClaim` runs in it
 * first: the job's slot check), then its network calls with no transaction open, then the drop
 * (`recorded` runs in its transaction: the job's counts). Returns how many intents were undone
 * (dropped by this call).
 */
export async function recoverCreateIntents(
  ctx: Pick<Context, 'db' | 'processor' | 'clock'>,
  accountIds: readonly string[],
  limit: number,
  hooks: { readonly inClaim?: (trx: Kysely<Database>) => Promise<void>; readonly recorded?: (trx: Kysely<Database>, undone: number) => Promise<void> } = {},
): Promise<number> {
  let undone = 0;
  for (;;) {
    const now = ctx.clock.now();
    const claimed = await ctx.db.transaction().execute(async (trx) => {
      await hooks.inClaim?.(trx);
      return claimLapsed(trx, accountIds, now, limit);
    });
    if (claimed.length === 0) return undone;
    undone += await undoClaimed(ctx, claimed, new Map(), now, hooks.recorded);
    if (claimed.length < limit) return undone;
  }
}

/** A create intent named by its charge and its stamp: a keyed request's recovery point (src/api/idempotency.ts). */
export interface IntentStamp {
  readonly chargeId: string;
  readonly at: string;
}

/** The create intents among `chargeIds` of the caller's account and mode, with their stamps. */
export async function createIntentStamps(executor: Kysely<Database>, caller: Caller, chargeIds: readonly string[]): Promise<IntentStamp[]> {
  if (chargeIds.length === 0) return [];
  const rows = await executor
    .selectFrom('network_claims')
    .select(['resource_id', 'claimed_at'])
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('resource', '=', CHARGE_RESOURCE)
    .where('resource_id', 'in', chargeIds)
    .where('operation', '=', CREATE_INTENT_OPERATION)
    .execute();
  return rows.map((row) => ({ chargeId: row.resource_id, at: row.claimed_at.toISOString() }));
}

/**
 * Undoes the create intents `stamps` names, each only if it still has that stamp (another undoer
 * may have taken it): a keyed request taking over a crashed one's recovery point, or ending in a
 * fault after its checkpoint. Runs on `ctx` as given (a keyed request's: its db and network).
 */
export async function undoCreateIntentsAt(ctx: Pick<Context, 'db' | 'processor' | 'clock'> & { readonly log?: Context['log'] }, caller: Caller, stamps: readonly IntentStamp[]): Promise<void> {
  for (const stamp of stamps) {
    const at = new Date(stamp.at);
    const row = await ctx.db
      .selectFrom('network_claims')
      .select('recovery')
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('resource', '=', CHARGE_RESOURCE)
      .where('resource_id', '=', stamp.chargeId)
      .where('operation', '=', CREATE_INTENT_OPERATION)
      .where('claimed_at', '=', at)
      .executeTakeFirst();
    if (row === undefined) continue;
    await undoCreateIntent(ctx, intentOf(caller.accountId, caller.livemode, stamp.chargeId, at, recoveryOf(row.recovery)), undefined);
  }
}
