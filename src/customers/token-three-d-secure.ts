/**
 * Token-level 3-D Secure: a token created with `three_d_secure=true` carries
 * `card.three_d_secure_status` = `unverified` and cannot be used (`unverified_token`, v1 §7) until
 * the buyer has authenticated (`verified`, `attempted`, `failed` or `error`, the card network's
 * answer) and the merchant has called `tokens.tds_finish` on a `verified` or `attempted` status,
 * within the 30-minute window of charges' 3-D Secure (service rules §2). The same refusals as the
 * charge flow (v1 §3.1, §7): `three_d_secure_incompleted` before authentication,
 * `three_d_secure_failed` after a failed one, `invalid_three_d_secure_state` twice,
 * `not_in_three_d_secure_flow` for a token without 3-D Secure, `three_d_secure_expired` late.
 *
 * This file holds the stored state only (no import of tokens.ts, which uses it when a token is
 * consumed); the operations are in token-operations.ts.
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database, TokenThreeDSecureTable } from '../db/schema';
import { reject } from '../domain/errors';
import { THREE_D_SECURE_WINDOW_MS } from '../domain/limits';

export type TokenThreeDSecureRow = Selectable<TokenThreeDSecureTable>;

type Scope = Pick<Caller, 'accountId' | 'livemode'>;

/** Starts 3-D Secure of a new token (in the transaction that writes the token). */
export async function startTokenThreeDSecure(trx: Kysely<Database>, caller: Scope, tokenId: string, now: Date): Promise<void> {
  await trx
    .insertInto('token_three_d_secure')
    .values({ account_id: caller.accountId, livemode: caller.livemode, token_id: tokenId, status: 'unverified', expires_at: new Date(now.getTime() + THREE_D_SECURE_WINDOW_MS), finished_at: null })
    .execute();
}

/** The token's 3-D Secure state, or undefined for a token created without it. */
export async function tokenThreeDSecureOf(executor: Kysely<Database>, caller: Scope, tokenId: string, lock = false): Promise<TokenThreeDSecureRow | undefined> {
  return executor
    .selectFrom('token_three_d_secure')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('token_id', '=', tokenId)
    .$if(lock, (q) => q.forUpdate())
    .executeTakeFirst();
}

/** Writes a change of a token's 3-D Secure state and returns the new state. */
export async function updateTokenThreeDSecure(trx: Kysely<Database>, caller: Scope, tokenId: string, change: Partial<Pick<TokenThreeDSecureRow, 'status' | 'finished_at'>>): Promise<TokenThreeDSecureRow> {
  return trx
    .updateTable('token_three_d_secure')
    .set(change)
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('token_id', '=', tokenId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** A token's object with its card's `three_d_secure_status` (null without 3-D Secure). */
export function withTokenThreeDSecure<T extends { readonly card: object }>(token: T, state: Pick<TokenThreeDSecureRow, 'status'> | undefined): T {
  return { ...token, card: { ...token.card, three_d_secure_status: state?.status ?? null } };
}

/** Refuses the use of a token whose 3-D Secure was started but not finished (`unverified_token` on `param`). */
export async function assertTokenUsable(trx: Kysely<Database>, caller: Scope, tokenId: string, param: string): Promise<void> {
  const state = await tokenThreeDSecureOf(trx, caller, tokenId);
  if (state !== undefined && state.finished_at === null) {
    reject('unverified_token', param, `3-D Secure of token ${tokenId} is ${state.status} and not finished; call tokens.tds_finish first.`);
  }
}

/**
 * The status a token's finished 3-D Secure ended with (`verified` or `attempted`), or undefined for
 * a token without 3-D Secure: a charge made with the token authorizes as authenticated with it.
 */
export async function finishedTokenThreeDSecure(executor: Kysely<Database>, caller: Scope, tokenId: string): Promise<'verified' | 'attempted' | undefined> {
  const state = await tokenThreeDSecureOf(executor, caller, tokenId);
  if (state?.finished_at == null) return undefined;
  return state.status === 'attempted' ? 'attempted' : 'verified';
}

/** Why an authentication or tds_finish cannot run on this token (or nothing when it can). */
export function refuseOutsideWindow(state: TokenThreeDSecureRow | undefined, tokenId: string, now: Date): asserts state is TokenThreeDSecureRow {
  if (state === undefined) reject('not_in_three_d_secure_flow', 'id', `Token ${tokenId} was not created with three_d_secure.`);
  if (state.finished_at !== null) reject('invalid_three_d_secure_state', 'id', `3-D Secure of token ${tokenId} has already been finished.`);
  if (now.getTime() > state.expires_at.getTime()) reject('three_d_secure_expired', 'id', `The 3-D Secure window of token ${tokenId} has passed; create the token again.`);
}
