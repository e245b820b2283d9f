/**
 * Claims around the card network (docs/network-claims.md): the one way an operation asks the
 * network about an object without holding a row lock across the call.
 *
 * 1. **Claim** — a short transaction decides (checks, refusals, locks it needs) and takes a claim on
 *    the object in `network_claims` (committed): the operation that holds it, its instant (the
 *    fencing token), a lease (NETWORK_CLAIM_LEASE_MS) and its recovery point: the authorization
 *    requests it is about to send, whose references are the network's idempotency.
 * 2. **Network** — the authorizations are asked with no transaction open.
 * 3. **Record** — a second short transaction locks the claim row again and, only while the claim is
 *    still this operation's, writes the outcome and drops the claim in the same commit.
 *
 * Another operation on a claimed object waits (polling with no transaction open) until the claim
 * is gone, then decides on what was recorded; after about 10 s it answers `over_capacity`. A claim
 * whose lease lapsed (its process died between the claim and the record) is taken over: the taker
 * restamps it (fenced by the old instant, so one taker wins), asks the network again under the same
 * references — the network answers a repeated request under one reference with the same
 * authorization, so nothing is authorized twice — releases what was approved, and drops it. So a
 * crash between the network's answer and the record is undone exactly once and nothing is charged.
 * The same recovery runs for every lapsed claim of a set of accounts (recoverLapsedClaims).
 *
 * With an Idempotency-Key, the steps' transactions are savepoints of the request transaction and
 * the network call is the keyed request's checkpoint (src/api/idempotency.ts), so the claim is
 * committed before the network is asked either way.
 */
import { sql, type ExpressionBuilder, type Kysely, type RawBuilder, type SqlBool } from 'kysely';
import { inAccounts } from '../db/account-scope';
import { prepared } from '../db/prepared';
import type { Database } from '../db/schema';
import { reject } from '../domain/errors';
import { NETWORK_CLAIM_LEASE_MS } from '../domain/network-claims';
import type { AuthorizationRequest, AuthorizationResult, CardNetwork, RefundRequest, SettlementResult } from '../processor/card-network';
import type { Context } from './context';

export { NETWORK_CLAIM_LEASE_MS };
/** A waiting operation looks at the claim every CLAIM_POLL_MS, CLAIM_POLLS times at most (about 10 s), then answers over_capacity. */
const CLAIM_POLL_MS = 20;
const CLAIM_POLLS = 500;
/** An operation whose recorded outcome no longer applies starts again at most this many times. */
const MAX_ROUNDS = 3;

/** The object a claim is on. */
export interface ClaimedObject {
  readonly accountId: string;
  readonly livemode: boolean;
  /** The kind of object (`subscription`, `customer`, …). */
  readonly resource: string;
  readonly resourceId: string;
}

/** A claim as taken: `claimedAt` is its fencing token and the operation's business instant. */
export interface NetworkClaim extends ClaimedObject {
  readonly operation: string;
  readonly claimedAt: Date;
}

/**
 * What a claim's network call may leave at the network, under references that are the network's
 * idempotency, so a taker asks them again and gets the same answers. `authorizations` are undone
 * by a taker (what was approved released). `refunds` cannot be undone: a claim that has the list
 * (even empty: a refund outside the card network) is finished by a taker, through the finisher of
 * its operation (ClaimFinishers), and left alone by one without it.
 */
export interface RecoveryPoint {
  readonly authorizations: readonly AuthorizationRequest[];
  readonly refunds?: readonly RefundRequest[];
  /**
   * A card token the operation consumed (v1 `charges.create`), null when none (or already given
   * back): given back by the operation's own recovery in the statement that drops the claim. A claim
   * that has the field (even null) is resolved through that recovery or its finisher, never undone
   * here, so the token is given back exactly once with the drop.
   */
  readonly token?: ConsumedToken | null;
  /**
   * What an operation that finishes its own lapsed claims claimed to do (a payment flow's
   * confirmation, capture or release), opaque here: a claim that has it is taken over by that
   * operation's next call on the object, never undone here.
   */
  readonly work?: unknown;
}

/** A token consumed under a claim: given back only if still consumed at `usedAt` (the claim's own use). */
export interface ConsumedToken {
  readonly tokenId: string;
  readonly usedAt: Date;
}

type Stored<T> = Omit<T, 'at'> & { readonly at: string };
interface StoredRecovery {
  readonly authorizations: readonly Stored<AuthorizationRequest>[];
  readonly refunds?: readonly Stored<RefundRequest>[];
  readonly token?: { readonly tokenId: string; readonly usedAt: string } | null;
  readonly work?: unknown;
}

/** A recovery point as stored (the `recovery` column's JSON text). */
export const recoveryText = (point: RecoveryPoint): string =>
  JSON.stringify({
    authorizations: point.authorizations.map((a) => ({ ...a, at: a.at.toISOString() })),
    ...(point.refunds === undefined ? {} : { refunds: point.refunds.map((r) => ({ ...r, at: r.at.toISOString() })) }),
    ...(point.token === undefined ? {} : { token: point.token === null ? null : { tokenId: point.token.tokenId, usedAt: point.token.usedAt.toISOString() } }),
    ...(point.work === undefined ? {} : { work: point.work }),
  });
/** A stored recovery point (the `recovery` column) read back. */
export const recoveryOf = (stored: unknown): RecoveryPoint => {
  const parsed = (typeof stored === 'string' ? JSON.parse(stored) : stored) as StoredRecovery;
  return {
    authorizations: parsed.authorizations.map((a) => ({ ...a, at: new Date(a.at) })),
    ...(parsed.refunds === undefined ? {} : { refunds: parsed.refunds.map((r) => ({ ...r, at: new Date(r.at) })) }),
    ...(parsed.token === undefined ? {} : { token: parsed.token === null ? null : { tokenId: parsed.token.tokenId, usedAt: new Date(parsed.token.usedAt) } }),
    ...(parsed.work === undefined ? {} : { work: parsed.work }),
  };
};

/** A claim with what was asked under it: what a taker of a lapsed claim works from. */
export type HeldClaim = NetworkClaim & { readonly recovery: RecoveryPoint };

/**
 * How a taker finishes a lapsed claim of an operation whose network work cannot be undone (a
 * refund), by operation name: called with no transaction open, the claim restamped to the taker
 * and the claim's refunds asked again (the same answers); it records them (recordUnderClaim).
 */
export type ClaimFinisher = (claim: HeldClaim, refunds: readonly SettlementResult[]) => Promise<void>;
export type ClaimFinishers = Readonly<Record<string, ClaimFinisher>>;

/** Thrown inside a claim step: the object is claimed by another operation (live), or by a dead one (lapsed: to recover first). */
class Claimed extends Error {
  constructor(readonly lapsed: HeldClaim | undefined) {
    super('the object is claimed');
  }
}

function claimRow(executor: Kysely<Database>, object: ClaimedObject) {
  return executor
    .selectFrom('network_claims')
    .where('account_id', '=', object.accountId)
    .where('livemode', '=', object.livemode)
    .where('resource', '=', object.resource)
    .where('resource_id', '=', object.resourceId);
}

/** The claim row is still `claim` (its object and instant): the guard of every write fenced by a claim. The values are only bound (they may be fixedStatement's slots). */
export const claimIs = (claim: NetworkClaim) => (eb: ExpressionBuilder<Database, 'network_claims'>) =>
  eb.and([
    eb('account_id', '=', claim.accountId),
    eb('livemode', '=', claim.livemode),
    eb('resource', '=', claim.resource),
    eb('resource_id', '=', claim.resourceId),
    eb('claimed_at', '=', claim.claimedAt),
  ]);

/**
 * In a claim step's transaction: claims `object` for `operation` at `at` with its recovery point.
 * If the object is claimed already, the step is abandoned (its transaction rolled back) and
 * runClaimed waits for the claim, or recovers it when it lapsed, then runs the step again.
 */
export async function takeNetworkClaim(trx: Kysely<Database>, object: ClaimedObject, operation: string, at: Date, recovery: RecoveryPoint): Promise<NetworkClaim> {
  const inserted = await trx
    .insertInto('network_claims')
    .values({
      account_id: object.accountId,
      livemode: object.livemode,
      resource: object.resource,
      resource_id: object.resourceId,
      operation,
      claimed_at: at,
      lease_until: new Date(at.getTime() + NETWORK_CLAIM_LEASE_MS),
      recovery: recoveryText(recovery),
    })
    .onConflict((oc) => oc.columns(['account_id', 'livemode', 'resource', 'resource_id']).doNothing())
    .returning('claimed_at')
    .modifyEnd(prepared('network_claims.take'))
    .executeTakeFirst();
  if (inserted !== undefined) return { ...object, operation, claimedAt: at };
  const held = await claimRow(trx, object).select(['operation', 'claimed_at', 'lease_until', 'recovery']).executeTakeFirst();
  if (held === undefined || held.lease_until.getTime() > at.getTime()) throw new Claimed(undefined);
  throw new Claimed({ ...object, operation: held.operation, claimedAt: held.claimed_at, recovery: recoveryOf(held.recovery) });
}

/**
 * In a claim step's transaction: claims `object` for `operation` at `at`, taking over a claim whose
 * lease lapsed (fenced: the row is locked and its lease read again, so of two takers one wins);
 * undefined while another claim is live. For an operation that, taking over, asks the network again
 * under the same references itself (a card verification asks and releases under the flow's id), so
 * what the lapsed holder left is settled by the taker's own calls.
 */
export async function takeNetworkClaimOver(trx: Kysely<Database>, object: ClaimedObject, operation: string, at: Date, recovery: RecoveryPoint): Promise<NetworkClaim | undefined> {
  const lease = new Date(at.getTime() + NETWORK_CLAIM_LEASE_MS);
  const taken = await trx
    .insertInto('network_claims')
    .values({ account_id: object.accountId, livemode: object.livemode, resource: object.resource, resource_id: object.resourceId, operation, claimed_at: at, lease_until: lease, recovery: recoveryText(recovery) })
    .onConflict((oc) =>
      oc
        .columns(['account_id', 'livemode', 'resource', 'resource_id'])
        .doUpdateSet({ operation, claimed_at: at, lease_until: lease, recovery: recoveryText(recovery) })
        .where('network_claims.lease_until', '<=', at),
    )
    .returning('claimed_at')
    .executeTakeFirst();
  return taken === undefined ? undefined : { ...object, operation, claimedAt: at };
}

/**
 * Moves a held claim's recovery point to `point` (fenced by the claim's instant), before the network
 * is asked what `point` names: for an operation that learns what it will authorize from an earlier
 * network call (3-D Secure). NetworkClaimLost when the claim was taken over meanwhile.
 */
export async function moveRecoveryPoint(executor: Kysely<Database>, claim: NetworkClaim, point: RecoveryPoint): Promise<void> {
  const moved = await executor.updateTable('network_claims').set({ recovery: recoveryText(point) }).where(claimIs(claim)).executeTakeFirst();
  if (moved.numUpdatedRows === 0n) throw new NetworkClaimLost(claim);
}

/**
 * The claim on `object`, if any, and whether it is live at `at`: for an operation that decides
 * under its own lock, waits for a live claim and recovers a lapsed one (recoverNetworkClaim) before
 * it claims.
 */
export async function networkClaimAt(executor: Kysely<Database>, object: ClaimedObject, at: Date): Promise<{ readonly live: boolean; readonly claim: HeldClaim } | undefined> {
  const held = await claimRow(executor, object).select(['operation', 'claimed_at', 'lease_until', 'recovery']).executeTakeFirst();
  if (held === undefined) return undefined;
  return { live: held.lease_until.getTime() > at.getTime(), claim: { ...object, operation: held.operation, claimedAt: held.claimed_at, recovery: recoveryOf(held.recovery) } };
}

/** Whether `object` has a claim live at `at` (for an operation that must not decide while the network answers for another). */
export async function liveNetworkClaim(executor: Kysely<Database>, object: ClaimedObject, at: Date): Promise<boolean> {
  const live = await claimRow(executor, object).select('lease_until').where('lease_until', '>', at).executeTakeFirst();
  return live !== undefined;
}

/**
 * The DELETE of the claim if it is still this one (fenced by its instant): dropNetworkClaim's, and
 * the guard of a write that drops its claim in its own statement (a v1 charge written with its
 * create intent dropped). The values are only bound (they may be fixedStatement's slots).
 */
export function networkClaimDeletion(executor: Kysely<Database>, claim: NetworkClaim) {
  return executor.deleteFrom('network_claims').where(claimIs(claim));
}

/** Drops the claim if it is still this one (fenced by its instant); true when it was. */
export async function dropNetworkClaim(executor: Kysely<Database>, claim: NetworkClaim): Promise<boolean> {
  const dropped = await networkClaimDeletion(executor, claim).modifyEnd(prepared('network_claims.drop')).executeTakeFirst();
  return dropped.numDeletedRows > 0n;
}

/** In a record step's transaction: whether `claim` still holds, its row locked until the commit (so no taker restamps it meanwhile). */
export async function lockHeldClaim(trx: Kysely<Database>, claim: NetworkClaim): Promise<boolean> {
  const held = await trx.selectFrom('network_claims').select('claimed_at').where(claimIs(claim)).forUpdate().executeTakeFirst();
  return held !== undefined;
}

/** Restamps a claim at `now` if it is still `claim` (fenced): the one taker of a lapsed claim. */
export async function takeOverClaim(executor: Kysely<Database>, claim: NetworkClaim, now: Date): Promise<NetworkClaim | undefined> {
  const taken = await executor
    .updateTable('network_claims')
    .set({ claimed_at: now, lease_until: new Date(now.getTime() + NETWORK_CLAIM_LEASE_MS) })
    .where(claimIs(claim))
    .executeTakeFirst();
  return taken.numUpdatedRows > 0n ? { ...claim, claimedAt: now } : undefined;
}

/**
 * The network side of an undo, with no transaction open: the authorizations not answered yet
 * (`known`) asked again under their references (the same answers), the approved ones released.
 */
async function releaseAuthorized(ctx: Pick<Context, 'processor'>, point: RecoveryPoint, known: readonly AuthorizationResult[] | undefined, at: Date): Promise<void> {
  if (point.authorizations.length === 0) return;
  const answers = known ?? (await ctx.processor.authorize(point.authorizations));
  const approved = point.authorizations.flatMap((request, i) => {
    const answer = answers[i]!;
    return answer.approved ? [{ reference: request.reference, authorizationCode: answer.authorizationCode, amount: request.amount, at }] : [];
  });
  if (approved.length > 0) await ctx.processor.release(approved);
}

/**
 * Undoes a claim this process holds: what its authorizations left at the network released, then
 * the claim dropped if still this one. `known`: the network's answers, when this process has them.
 */
async function undoHeld(ctx: Pick<Context, 'db' | 'processor'>, claim: NetworkClaim, point: RecoveryPoint, known: readonly AuthorizationResult[] | undefined, at: Date): Promise<void> {
  await releaseAuthorized(ctx, point, known, at);
  await dropNetworkClaim(ctx.db, claim);
}

/**
 * A claim this process has taken over (restamped), resolved with no transaction open: finished by
 * its operation's finisher when it has refunds (asked again under their references: the same
 * answers, nothing refunded twice), otherwise undone (authorizations asked again, approvals
 * released, the claim dropped).
 */
async function resolveTaken(ctx: Pick<Context, 'db' | 'processor'>, taken: HeldClaim, finishers: ClaimFinishers, at: Date): Promise<void> {
  const refunds = taken.recovery.refunds ?? [];
  const finisher = finishers[taken.operation];
  if (finisher === undefined) return undoHeld(ctx, taken, taken.recovery, undefined, at);
  return finisher(taken, refunds.length === 0 ? [] : await ctx.processor.refund(refunds));
}

/** A claim a taker may resolve: one that can be undone (no `refunds`, `token` nor `work`, not even empty), or whose operation has a finisher here. */
const resolvable = (claim: Pick<HeldClaim, 'operation' | 'recovery'>, finishers: ClaimFinishers): boolean =>
  finishers[claim.operation] !== undefined || (claim.recovery.refunds === undefined && claim.recovery.token === undefined && claim.recovery.work === undefined);

/**
 * Takes over and resolves one lapsed claim: restamped at now (committed, fenced by the lapsed
 * instant, so of two takers one goes on), then finished or undone (resolveTaken). True when this
 * call resolved it; false when another taker had it, or it cannot be undone and has no finisher here.
 */
export async function recoverNetworkClaim(ctx: Pick<Context, 'db' | 'processor' | 'clock'>, lapsed: HeldClaim, finishers: ClaimFinishers = {}): Promise<boolean> {
  if (!resolvable(lapsed, finishers)) return false;
  const now = ctx.clock.now();
  const taken = await takeOverClaim(ctx.db, lapsed, now);
  if (taken === undefined) return false;
  await resolveTaken(ctx, { ...taken, recovery: lapsed.recovery }, finishers, now);
  return true;
}

/**
 * Resolves every claim of `accountIds` lapsed at now, `limit` at a time: each batch restamped in
 * one short transaction (FOR UPDATE SKIP LOCKED, so two recoverers split the work), then each
 * finished or undone (resolveTaken) with no transaction open. A claim that cannot be undone here
 * (refunds, a consumed token) and has no finisher in `finishers` is left alone. Returns how many claims this call resolved.
 */
export async function recoverLapsedClaims(ctx: Pick<Context, 'db' | 'processor' | 'clock'>, accountIds: readonly string[], limit = 100, finishers: ClaimFinishers = {}): Promise<number> {
  let undone = 0;
  const finishing = Object.keys(finishers);
  const resolvableHere = sql<SqlBool>`((c.recovery -> 'refunds' IS NULL AND c.recovery -> 'token' IS NULL AND c.recovery -> 'work' IS NULL)
    ${finishing.length === 0 ? sql`` : sql`OR c.operation IN (${sql.join(finishing)})`})`;
  for (;;) {
    const now = ctx.clock.now();
    const claimed = await takeOverLapsedClaims(ctx.db, accountIds, now, limit, resolvableHere);
    for (const claim of claimed) {
      await resolveTaken(ctx, claim, finishers, now);
      undone += 1;
    }
    if (claimed.length < limit) return undone;
  }
}

/**
 * Restamps at `now` up to `limit` claims of `accountIds` lapsed at `now` that `which` (a condition
 * on the claim row `c`) selects, in one statement (FOR UPDATE SKIP LOCKED, so two takers split
 * them; fenced by the restamp): the claims this caller now holds, to resolve with no transaction
 * open. recoverLapsedClaims's step, and that of an operation resolving its own claims.
 */
export async function takeOverLapsedClaims(executor: Kysely<Database>, accountIds: readonly string[], now: Date, limit: number, which: RawBuilder<SqlBool>): Promise<HeldClaim[]> {
  const claimed = await sql<{ account_id: string; livemode: boolean; resource: string; resource_id: string; operation: string; recovery: unknown }>`
    WITH due AS (
      SELECT c.account_id, c.livemode, c.resource, c.resource_id FROM network_claims c
      WHERE ${inAccounts('c.account_id', accountIds)} AND c.lease_until <= ${now} AND ${which}
      ORDER BY c.lease_until, c.account_id, c.livemode, c.resource, c.resource_id LIMIT ${limit}
      FOR UPDATE OF c SKIP LOCKED)
    UPDATE network_claims n SET claimed_at = ${now}, lease_until = ${new Date(now.getTime() + NETWORK_CLAIM_LEASE_MS)}
    FROM due WHERE ${inAccounts('n.account_id', accountIds)} AND n.account_id = due.account_id AND n.livemode = due.livemode
      AND n.resource = due.resource AND n.resource_id = due.resource_id
    RETURNING n.account_id, n.livemode, n.resource, n.resource_id, n.operation, n.recovery`.execute(executor);
  return claimed.rows.map((row) => ({ accountId: row.account_id, livemode: row.livemode, resource: row.resource, resourceId: row.resource_id, operation: row.operation, claimedAt: now, recovery: recoveryOf(row.recovery) }));
}

/** The accounts having claims lapsed at `now` (lock-free, through the lease index), of operation `operation` when given. */
export async function accountsWithLapsedClaims(db: Kysely<Database>, now: Date, operation?: string, among?: readonly string[]): Promise<string[]> {
  const rows = await db
    .selectFrom('network_claims')
    .select('account_id')
    .distinct()
    .where('lease_until', '<=', now)
    .$if(operation !== undefined, (q) => q.where('operation', '=', operation!))
    .$if(among !== undefined, (q) => q.where('account_id', '=', sql<string>`ANY(${[...among!]}::text[])`))
    .orderBy('account_id')
    .execute();
  return rows.map((row) => row.account_id);
}

/** What a claim step decided: the operation's answer without the network, or a claim and what to ask. */
export type ClaimStep<P, R> =
  | { readonly done: R }
  | { readonly claim: NetworkClaim; readonly authorizations: readonly AuthorizationRequest[]; readonly plan: P };

/** The record step's answer: the result, or STALE when the answers no longer apply to the object (released, and the operation starts again). */
export const STALE = Symbol('stale');

export interface ClaimedOperation<P, R> {
  /**
   * The claim step, in its own transaction (run again after waiting for another claim): decides,
   * refuses, and either answers at once or takes the claim (takeNetworkClaim) at its instant with
   * the authorizations as its recovery point.
   */
  readonly claim: (trx: Kysely<Database>) => Promise<ClaimStep<P, R>>;
  /**
   * The record step, in its own transaction while the claim still holds (the claim row locked):
   * writes the outcome (or STALE). The claim is dropped in the same commit. If it throws (a
   * refusal found now), nothing is written, the approvals are released and the claim dropped.
   */
  readonly record: (trx: Kysely<Database>, plan: P, answers: readonly AuthorizationResult[], claim: NetworkClaim) => Promise<R | typeof STALE>;
}

/**
 * `network` answering the authorizations already asked (`requests`, `answers`) from those answers,
 * without asking again: what a record step charges through, so that the code that writes a charge
 * from its authorization runs as it does with the network, and no call is made twice.
 */
export function answeredNetwork(network: CardNetwork, requests: readonly AuthorizationRequest[], answers: readonly AuthorizationResult[]): CardNetwork {
  const known = new Map(requests.map((request, i) => [request.reference, answers[i]!]));
  return {
    ...network,
    authorize: async (asked) => {
      if (asked.every((request) => known.has(request.reference))) return asked.map((request) => known.get(request.reference)!);
      throw new Error(`an authorization outside the claim was asked for: ${asked.map((request) => request.reference).join(', ')}`);
    },
  };
}

/** Thrown when a claim lapsed and was undone by another process before this one recorded: nothing was charged. */
export class NetworkClaimLost extends Error {
  constructor(claim: NetworkClaim) {
    super(`${claim.resource} ${claim.resourceId}: the claim of ${claim.operation} lapsed and was undone by another process before its outcome was recorded`);
    this.name = 'NetworkClaimLost';
  }
}

/**
 * The record step of a claim, in its own short transaction: the claim row locked and checked to be
 * still `claim` (NetworkClaimLost when a taker has it), `record` run, and the claim dropped in the
 * same commit — unless `record` answers STALE (the claim then stays, for the caller to undo).
 * `lockFirst` runs before the claim row is locked and hands `record` what it locked: for an
 * operation whose claim step locks its object before the claim, so both steps lock in one order.
 */
export async function recordUnderClaim<R, L = undefined>(db: Kysely<Database>, claim: NetworkClaim, record: (trx: Kysely<Database>, locked: L) => Promise<R>, lockFirst?: (trx: Kysely<Database>) => Promise<L>): Promise<R> {
  return db.transaction().execute(async (trx) => {
    const locked = (lockFirst === undefined ? undefined : await lockFirst(trx)) as L;
    if (!(await lockHeldClaim(trx, claim))) throw new NetworkClaimLost(claim);
    const result = await record(trx, locked);
    if (result !== STALE) await dropNetworkClaim(trx, claim);
    return result;
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs the claim step until it answers or holds a claim: while the object is claimed by a live
 * operation it looks again every CLAIM_POLL_MS with no transaction open (`over_capacity` after
 * about 10 s); a lapsed claim is recovered first (recoverNetworkClaim).
 */
async function claimTurn<P, R>(ctx: Pick<Context, 'db' | 'processor' | 'clock'>, step: ClaimedOperation<P, R>['claim'], busyParam: string | undefined): Promise<ClaimStep<P, R>> {
  for (let polls = CLAIM_POLLS; ; polls -= 1) {
    try {
      return await ctx.db.transaction().execute((trx) => step(trx));
    } catch (error) {
      if (!(error instanceof Claimed)) throw error;
      // Resolved: decide again at once; taken by another taker (or not ours to resolve): wait as for a live claim.
      if (error.lapsed !== undefined && (await recoverNetworkClaim(ctx, error.lapsed))) continue;
    }
    if (polls <= 0) return reject('over_capacity', busyParam, 'The object is being processed by another request; retry later.');
    await sleep(CLAIM_POLL_MS);
  }
}

/**
 * Claim → network → record (this file's header). A network fault drops the claim (after releasing
 * what may have been approved) and is rethrown; a record step that finds its claim taken over
 * throws NetworkClaimLost (the taker undid the authorizations); STALE releases the approvals and
 * runs the operation again from its claim step.
 */
export async function runClaimed<P, R>(ctx: Pick<Context, 'db' | 'processor' | 'clock'>, operation: ClaimedOperation<P, R>, busyParam?: string): Promise<R> {
  for (let round = 1; ; round += 1) {
    const step = await claimTurn(ctx, operation.claim, busyParam);
    if ('done' in step) return step.done;
    const { claim, authorizations, plan } = step;
    const point: RecoveryPoint = { authorizations };
    let answers: readonly AuthorizationResult[];
    try {
      answers = authorizations.length === 0 ? [] : await ctx.processor.authorize(authorizations);
    } catch (error) {
      // The network may have approved before failing: asked again (same references) and released.
      await undoHeld(ctx, claim, point, undefined, claim.claimedAt).catch(() => undefined);
      throw error;
    }
    let recorded: R | typeof STALE;
    try {
      recorded = await recordUnderClaim(ctx.db, claim, (trx) => operation.record(trx, plan, answers, claim));
    } catch (error) {
      if (!(error instanceof NetworkClaimLost)) await undoHeld(ctx, claim, point, answers, claim.claimedAt);
      throw error;
    }
    if (recorded !== STALE) return recorded;
    await undoHeld(ctx, claim, point, answers, claim.claimedAt);
    if (round >= MAX_ROUNDS) return reject('over_capacity', busyParam, 'The object changed while the card network answered; retry later.');
  }
}
