/**
 * Create intents of v1 charges (docs/decisions/idempotency-and-network-claims.md,
 * "Keyed requests and the card network"): what `charges.create` leaves behind while its authorization is at the card
 * network, so that a process dying between the network's answer and the charge's write loses
 * nothing and leaves no money held.
 *
 * v1 has no pending state for a charge, so the intent lives in the claim store (charge-claims.ts):
 * a `pending` row of `idempotency_keys` under `charge:<id>`, `request_hash` `charges.create`,
 * `created_at` its instant (the fencing token) and `expires_at` its lease, its `response_body` the
 * JSON of what an undo needs: the authorization request as sent (reference = the charge id) and the
 * token the charge consumed, if any, with the instant it was consumed.
 *
 * - The prepare step of createCharge writes it (writeCreateIntent), with the token's use; on a
 *   customer's card the statement that reads the card writes it (createIntentFrom).
 * - The record step drops it in the statement that writes the charge (insertCreatedCharge, in
 *   charge-record.ts); if it is no longer this request's (it lapsed and a recovery took it over),
 *   the charge is not written: CreateIntentLost, and the taker undoes.
 * - A failure after the prepare transaction undoes it at once (undoCreateIntent).
 * - A lapsed intent (its process died) is undone by recoverCreateIntents, which the hold-expiry job
 *   runs every minute (jobs/hold-expiry.ts: the worker, and `kessai serve` on the embedded database).
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
import type { AuthorizationRequest, AuthorizationResult } from '../processor/card-network';
import { CHARGE_CLAIM_LEASE_MS, writeClaim } from './charge-claims';
import { CLAIM_PREFIX, claimRowIs, claimRowOf, type ChargeClaim } from './claim-rows';

/** The claim store's `request_hash` of a create intent. */
export const CREATE_INTENT_OPERATION = 'charges.create';

/** An intent as written: the claim, and what undoing it needs. */
export interface CreateIntent extends ChargeClaim {
  readonly request: AuthorizationRequest;
  readonly tokenId: string | null;
  /** When the token was consumed (the condition of giving it back): the prepare transaction's instant. */
  readonly tokenUsedAt: Date;
}

interface IntentBody {
  readonly request: Omit<AuthorizationRequest, 'at'> & { readonly at: string };
  readonly tokenId: string | null;
  readonly tokenUsedAt: string;
}

/** The request's fields that name the card (what createIntentFrom takes from the card it reads). */
type CardFields = 'fingerprint' | 'expMonth' | 'expYear';

/** The stored body; a request without its card fields is completed by the statement that writes it (createIntentFrom). */
function bodyOf(request: Omit<AuthorizationRequest, CardFields> & Partial<Pick<AuthorizationRequest, CardFields>>, tokenId: string | null, tokenUsedAt: Date): string {
  return JSON.stringify({ request: { ...request, at: request.at.toISOString() }, tokenId, tokenUsedAt: tokenUsedAt.toISOString() });
}

/** Thrown by the record step when the intent lapsed and was taken over: the charge is not written, the taker undoes. */
export class CreateIntentLost extends Error {
  constructor(readonly chargeId: string) {
    super(`charge ${chargeId}: its create intent lapsed and was undone by another process before the charge was written`);
    this.name = 'CreateIntentLost';
  }
}

/** In the prepare transaction: the intent of the charge `request.reference` at `at`. */
export async function writeCreateIntent(trx: Kysely<Database>, caller: Caller, request: AuthorizationRequest, tokenId: string | null, at: Date): Promise<CreateIntent> {
  await writeClaim(trx, { accountId: caller.accountId, livemode: caller.livemode, chargeId: request.reference }, CREATE_INTENT_OPERATION, at, bodyOf(request, tokenId, at));
  return createIntentWritten(caller, request, at, tokenId);
}

/** What createIntentFrom binds: the intent's row but for the card fields its read completes (createIntentValues). */
export interface CreateIntentValues {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly intentKey: string;
  readonly intentBody: string;
  readonly intentAt: Date;
  readonly intentExpiresAt: Date;
}

/** createIntentFrom's values of the intent of `request` at `at`, the row otherwise as writeCreateIntent writes it. */
export function createIntentValues(caller: Pick<Caller, 'accountId' | 'livemode'>, request: Omit<AuthorizationRequest, CardFields>, at: Date): CreateIntentValues {
  return {
    accountId: caller.accountId,
    livemode: caller.livemode,
    intentKey: CLAIM_PREFIX + request.reference,
    intentBody: bodyOf(request, null, at),
    intentAt: at,
    intentExpiresAt: new Date(at.getTime() + CHARGE_CLAIM_LEASE_MS),
  };
}

/**
 * The INSERT of the intent of a charge on a stored card (no token) that the same statement reads:
 * `read` names a common table expression of the card's columns (`card_id` null when there is no
 * card to charge: then nothing is written) whose fingerprint and expiry complete the request's
 * body (`v`: createIntentValues). For the first step of a create on a customer's card, one
 * statement where a read and an INSERT were two; the caller must have nothing left that can
 * refuse after the read. createIntentWritten is the intent it wrote. The values are only bound
 * (they may be fixedStatement's slots).
 */
export function createIntentFrom(read: string, v: CreateIntentValues): RawBuilder<unknown> {
  return sql`INSERT INTO idempotency_keys (account_id, livemode, idempotency_key, request_hash, state, response_body, created_at, expires_at)
    SELECT ${v.accountId}, ${v.livemode}, ${v.intentKey}, ${CREATE_INTENT_OPERATION}, 'pending',
      jsonb_set(j.b, '{request}', (j.b -> 'request') || jsonb_build_object('fingerprint', r.fingerprint, 'expMonth', r.exp_month, 'expYear', r.exp_year))::text,
      ${v.intentAt}, ${v.intentExpiresAt}
    FROM ${sql.table(read)} r CROSS JOIN (SELECT ${v.intentBody}::jsonb AS b) j
    WHERE r.card_id IS NOT NULL`;
}

/** The intent written at `at` (by writeCreateIntent, or by createIntentFrom with the request completed by the card read). */
export function createIntentWritten(caller: Pick<Caller, 'accountId' | 'livemode'>, request: AuthorizationRequest, at: Date, tokenId: string | null = null): CreateIntent {
  return { accountId: caller.accountId, livemode: caller.livemode, chargeId: request.reference, operation: CREATE_INTENT_OPERATION, claimedAt: at, request, tokenId, tokenUsedAt: at };
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
  const reclaimed = await claimRow(ctx.db, intent).set({ created_at: now, expires_at: new Date(now.getTime() + CHARGE_CLAIM_LEASE_MS) }).executeTakeFirst();
  if (reclaimed.numUpdatedRows === 0n) return;
  const claimed: CreateIntent = { ...intent, claimedAt: now };
  try {
    await undoClaimed(ctx, [claimed], authorization === undefined ? new Map() : new Map([[intent.chargeId, authorization]]), now);
  } catch (error) {
    await ctx.db.transaction().execute(async (trx) => {
      const kept = await claimRow(trx, claimed).set({ response_body: bodyOf(intent.request, null, intent.tokenUsedAt) }).executeTakeFirst();
      if (kept.numUpdatedRows > 0n && intent.tokenId !== null) {
        await trx.updateTable('tokens').set({ used_at: null }).where('account_id', '=', intent.accountId).where('livemode', '=', intent.livemode).where('token_id', '=', intent.tokenId).where('used_at', '=', intent.tokenUsedAt).execute();
      }
    });
    ctx.log?.warn({ err: error, charge: intent.chargeId }, 'charges.create: the card network failed twice; the token is given back, the create intent left for the recovery');
  }
}

/** An UPDATE of the intent row if it is still `intent`'s claim (its instant). */
function claimRow(executor: Kysely<Database>, intent: CreateIntent) {
  return executor.updateTable('idempotency_keys').where(claimRowIs(claimRowOf(intent)));
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
  const unknown = intents.filter((intent) => !known.has(intent.chargeId));
  const asked = unknown.length === 0 ? [] : await ctx.processor.authorize(unknown.map((intent) => intent.request));
  const answers = new Map(known);
  unknown.forEach((intent, i) => answers.set(intent.chargeId, asked[i]!));
  const approved = intents.flatMap((intent) => {
    const answer = answers.get(intent.chargeId)!;
    return answer.approved ? [{ reference: intent.request.reference, authorizationCode: answer.authorizationCode, amount: intent.request.amount, at: now }] : [];
  });
  if (approved.length > 0) await ctx.processor.release(approved);
  const k = ROW_KEYS_AT.table('k', intents.map((intent) => ({ accountId: intent.accountId, livemode: intent.livemode, id: CLAIM_PREFIX + intent.chargeId, at: intent.claimedAt })));
  const accounts = accountsOf(intents, (intent) => intent.accountId);
  const drop = sql<{ n: number }>`
    WITH gone AS (
      DELETE FROM idempotency_keys i USING ${k.from}
      WHERE ${inAccounts('i.account_id', accounts)} AND i.account_id = ${k.col('a')} AND i.livemode = ${k.col('l')} AND i.idempotency_key = ${k.col('id')}
        AND i.request_hash = ${CREATE_INTENT_OPERATION} AND i.created_at = ${k.col('t')}
      RETURNING i.account_id, i.livemode, i.response_body::json AS body),
    restored AS (
      UPDATE tokens t SET used_at = NULL FROM gone
      WHERE ${inAccounts('t.account_id', accounts)} AND t.account_id = gone.account_id AND t.livemode = gone.livemode
        AND t.token_id = gone.body->>'tokenId' AND t.used_at = (gone.body->>'tokenUsedAt')::timestamptz
      RETURNING 1)
    SELECT count(*)::int AS n FROM gone`;
  return ctx.db.transaction().execute(async (trx) => {
    const undone = (await drop.execute(trx)).rows[0]?.n ?? 0;
    await recorded?.(trx, undone);
    return undone;
  });
}

/** The intents of `accountIds` lapsed at `now` whose charge was never written, claimed at `now` (SKIP LOCKED), at most `limit`. */
async function claimLapsed(trx: Kysely<Database>, accountIds: readonly string[], now: Date, limit: number): Promise<CreateIntent[]> {
  const claimed = await sql<{ a: string; l: boolean; key: string; body: string }>`
    WITH due AS (
      SELECT i.account_id, i.livemode, i.idempotency_key FROM idempotency_keys i
      WHERE ${inAccounts('i.account_id', accountIds)} AND i.request_hash = ${CREATE_INTENT_OPERATION} AND i.state = 'pending'
        AND i.idempotency_key LIKE ${`${CLAIM_PREFIX}%`} AND i.expires_at <= ${now}
        AND NOT EXISTS (SELECT 1 FROM charges c WHERE ${inAccounts('c.account_id', accountIds)} AND c.account_id = i.account_id AND c.livemode = i.livemode
                        AND c.charge_id = substr(i.idempotency_key, ${CLAIM_PREFIX.length + 1}))
      ORDER BY i.expires_at, i.account_id, i.livemode, i.idempotency_key LIMIT ${limit}
      FOR UPDATE OF i SKIP LOCKED)
    UPDATE idempotency_keys k SET created_at = ${now}, expires_at = ${new Date(now.getTime() + CHARGE_CLAIM_LEASE_MS)}
    FROM due WHERE ${inAccounts('k.account_id', accountIds)} AND k.account_id = due.account_id AND k.livemode = due.livemode AND k.idempotency_key = due.idempotency_key
    RETURNING k.account_id AS a, k.livemode AS l, k.idempotency_key AS key, k.response_body AS body`.execute(trx);
  return claimed.rows.map((row) => intentOf({ accountId: row.a, livemode: row.l, chargeId: row.key.slice(CLAIM_PREFIX.length) }, now, row.body));
}

/** The intent of charge `key` stamped `claimedAt`, from its row's body. */
function intentOf(key: Pick<ChargeClaim, 'accountId' | 'livemode' | 'chargeId'>, claimedAt: Date, text: string): CreateIntent {
  const body = JSON.parse(text) as IntentBody;
  return { ...key, operation: CREATE_INTENT_OPERATION, claimedAt, request: { ...body.request, at: new Date(body.request.at) }, tokenId: body.tokenId, tokenUsedAt: new Date(body.tokenUsedAt) };
}

/**
 * The accounts having create intents lapsed at `now` (lock-free): read through the expiry index,
 * where only lapsed claims and expired keys not yet purged stand before `now`, not through each
 * account's live keys; every Citus shard answers for its own accounts.
 */
export async function accountsWithLapsedIntents(db: Kysely<Database>, now: Date): Promise<string[]> {
  const rows = await sql<{ account_id: string }>`
    SELECT DISTINCT i.account_id FROM idempotency_keys i
    WHERE i.expires_at <= ${now} AND i.request_hash = ${CREATE_INTENT_OPERATION} AND i.idempotency_key LIKE ${`${CLAIM_PREFIX}%`}
    ORDER BY i.account_id`.execute(db);
  return rows.rows.map((row) => row.account_id);
}

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
    .selectFrom('idempotency_keys')
    .select(['idempotency_key', 'created_at'])
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('request_hash', '=', CREATE_INTENT_OPERATION)
    .where('idempotency_key', 'in', chargeIds.map((id) => CLAIM_PREFIX + id))
    .execute();
  return rows.map((row) => ({ chargeId: row.idempotency_key.slice(CLAIM_PREFIX.length), at: row.created_at.toISOString() }));
}

/**
 * Undoes the create intents `stamps` names, each only if it still has that stamp (another undoer
 * may have taken it): a keyed request taking over a crashed one's recovery point, or ending in a
 * fault after its checkpoint. Runs on `ctx` as given (a keyed request's: its db and network).
 */
export async function undoCreateIntentsAt(ctx: Pick<Context, 'db' | 'processor' | 'clock'> & { readonly log?: Context['log'] }, caller: Caller, stamps: readonly IntentStamp[]): Promise<void> {
  for (const stamp of stamps) {
    const row = await ctx.db
      .selectFrom('idempotency_keys')
      .select('response_body')
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('idempotency_key', '=', CLAIM_PREFIX + stamp.chargeId)
      .where('request_hash', '=', CREATE_INTENT_OPERATION)
      .where('created_at', '=', new Date(stamp.at))
      .executeTakeFirst();
    if (row?.response_body == null) continue;
    await undoCreateIntent(ctx, intentOf({ accountId: caller.accountId, livemode: caller.livemode, chargeId: stamp.chargeId }, new Date(stamp.at), row.response_body), undefined);
  }
}
