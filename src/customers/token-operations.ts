/**
 * The token operations beyond creation (the `payjp` SDK's `tokens.retrieve` and
 * `tokens.tds_finish`, official-sdks.md §4), and the buyer's 3-D Secure step of a token, which the
 * client library runs against the issuer (run here by the simulated card network, as
 * `charges.tds_authenticate` does for charges). States and refusals: token-three-d-secure.ts.
 */
import type { Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database } from '../db/schema';
import { reject } from '../domain/errors';
import type { Context } from '../engine/context';
import { refuseOutsideWindow, tokenThreeDSecureOf, updateTokenThreeDSecure, withTokenThreeDSecure, type TokenThreeDSecureRow } from './token-three-d-secure';
import { renderToken, type TokenObject, type TokenRow } from './tokens';

export interface TokenCommand {
  readonly id: string;
}

/** A token of the caller with its 3-D Secure state, or `invalid_id` on `id`. */
async function findToken(executor: Kysely<Database>, caller: Caller, tokenId: string): Promise<TokenRow> {
  const row = await executor
    .selectFrom('tokens')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('token_id', '=', tokenId)
    .executeTakeFirst();
  if (!row) return reject('invalid_id', 'id', `No such token: ${tokenId}`);
  return row;
}

function tokenObject(row: TokenRow, state: TokenThreeDSecureRow | undefined): TokenObject {
  return withTokenThreeDSecure(renderToken(row), state);
}

/** `tokens.retrieve`: the token, `used` and its card's `three_d_secure_status` as they are now. */
export async function retrieveToken(ctx: Context, caller: Caller, command: TokenCommand): Promise<TokenObject> {
  const row = await findToken(ctx.db, caller, command.id);
  return tokenObject(row, await tokenThreeDSecureOf(ctx.db, caller, command.id));
}

/**
 * The buyer's authentication of a token (v1 §4.3 step 2 for tokens): the issuer's answer becomes
 * the status. Once, within the window.
 */
export async function authenticateToken(ctx: Context, caller: Caller, command: TokenCommand): Promise<TokenObject> {
  const now = ctx.clock.now();
  const check = (state: TokenThreeDSecureRow | undefined): TokenThreeDSecureRow => {
    refuseOutsideWindow(state, command.id, now);
    if (state.status !== 'unverified') reject('invalid_three_d_secure_state', 'id', `Token ${command.id} has already been authenticated (${state.status}).`);
    return state;
  };
  const row = await findToken(ctx.db, caller, command.id);
  check(await tokenThreeDSecureOf(ctx.db, caller, command.id));
  // The network is asked with no row locked; the state is checked again under the lock below.
  const [outcome] = await ctx.processor.authenticate([{ reference: command.id, fingerprint: row.fingerprint, livemode: caller.livemode, at: now }]);
  return ctx.db.transaction().execute(async (trx) => {
    check(await tokenThreeDSecureOf(trx, caller, command.id, true));
    const updated = await updateTokenThreeDSecure(trx, caller, command.id, { status: outcome!.status });
    return tokenObject(row, updated);
  });
}

/**
 * `tokens.tds_finish`: from `verified` or `attempted`, within the window, the token becomes usable;
 * `unverified` is `three_d_secure_incompleted`, `failed` and `error` are `three_d_secure_failed`
 * (the buyer must start again with a new token), a second call `invalid_three_d_secure_state`.
 */
export async function finishTokenThreeDSecure(ctx: Context, caller: Caller, command: TokenCommand): Promise<TokenObject> {
  return ctx.db.transaction().execute(async (trx) => {
    const row = await findToken(trx, caller, command.id);
    const state = await tokenThreeDSecureOf(trx, caller, command.id, true);
    const now = ctx.clock.now();
    refuseOutsideWindow(state, command.id, now);
    if (state.status === 'unverified') reject('three_d_secure_incompleted', 'id', `The buyer has not authenticated token ${command.id} yet.`);
    if (state.status === 'failed' || state.status === 'error') reject('three_d_secure_failed', 'id', `3-D Secure of token ${command.id} ended ${state.status}; create the token again.`);
    const updated = await updateTokenThreeDSecure(trx, caller, command.id, { finished_at: now });
    return tokenObject(row, updated);
  });
}
