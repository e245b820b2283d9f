/**
 * Card tokens (tok_, service rules §2): the only way card data enters the engine. Token creation
 * runs the card through the simulated network; what comes back (fingerprint, brand, last4, expiry)
 * is stored, the number and CVC never are. A token is used once: to create a customer's card.
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database, TokensTable } from '../db/schema';
import { CARD_CAUSED_ERRORS } from '../domain/card-flags';
import { KessaiError, reject } from '../domain/errors';
import { toUnixSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { readParams } from '../operations/params';
import { findTestCard, tokenizeTestCard, type CardDataInput, type TokenizedCard } from '../processor/test-cards';
import { assertCardNotFlagged, recordCardError } from './card-flags';
import { renderCard, type CardObject } from './card-object';
import { assertTokenUsable, startTokenThreeDSecure, withTokenThreeDSecure } from './token-three-d-secure';

export type TokenRow = Selectable<TokensTable>;

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type TokenObject = {
  readonly id: string;
  readonly object: 'token';
  readonly livemode: boolean;
  readonly created: number;
  readonly used: boolean;
  readonly card: CardObject;
};

export function renderToken(row: TokenRow): TokenObject {
  return {
    id: row.token_id,
    object: 'token',
    livemode: row.livemode,
    created: toUnixSeconds(row.created_at),
    used: row.used_at !== null,
    card: renderCard({ ...row, customer_id: null }),
  };
}

const CARD_KEYS = ['number', 'exp_month', 'exp_year', 'cvc', 'name'] as const;

/** The `card` object of a `tokens.create` input, its keys checked; the card itself is checked when tokenized. */
export function readTokenCard(input: unknown): CardDataInput {
  const params = readParams(input, ['card']);
  return readParams(params.card, CARD_KEYS, 'card');
}

/** The card `tokens.create` would tokenize for `input`, or its refusal (checks only; no id is drawn). */
export function tokenizedCardOf(caller: Caller, input: unknown, now: Date): TokenizedCard {
  return tokenizeTestCard(readTokenCard(input), { livemode: caller.livemode, now });
}

/**
 * The token `tokens.create` stores for `input` (checked, tokenized, ids drawn), not yet written:
 * the operation and the simulator's bulk sign-ups build it alike.
 */
export function tokenRowOf(ctx: Pick<Context, 'ids'>, caller: Caller, input: unknown, now: Date): TokenRow {
  return tokenRowOfCard(ctx, caller, readTokenCard(input), now);
}

function tokenRowOfCard(ctx: Pick<Context, 'ids'>, caller: Caller, card: CardDataInput, now: Date): TokenRow {
  const tokenized = tokenizeTestCard(card, { livemode: caller.livemode, now });
  return {
    account_id: caller.accountId,
    livemode: caller.livemode,
    token_id: ctx.ids.next('token'),
    card_id: ctx.ids.next('card'),
    fingerprint: tokenized.fingerprint,
    brand: tokenized.brand,
    last4: tokenized.last4,
    exp_month: tokenized.expMonth,
    exp_year: tokenized.expYear,
    funding: tokenized.funding,
    country: tokenized.country,
    issuer: tokenized.issuer,
    name: tokenized.name,
    cvc_check: tokenized.cvcCheck,
    created_at: now,
    used_at: null,
  };
}

/** `tokens.create`, its keys checked by the codec: the card data (checked when tokenized, against the clock), and whether 3-D Secure starts. */
export interface CreateTokenCommand {
  readonly card: CardDataInput;
  readonly threeDSecure: boolean;
}

/**
 * `tokens.create`: the card tokenized and stored; `three_d_secure` true starts token-level 3-D
 * Secure (token-three-d-secure.ts). Returns the token object, shaped as v1's (as the other token
 * operations do, token-operations.ts).
 */
export async function createToken(ctx: Context, caller: Caller, command: CreateTokenCommand): Promise<TokenObject> {
  const now = ctx.clock.now();
  const { threeDSecure } = command;
  // card_flagged: a card locked out after repeated refusals is not sent to the network again.
  const fingerprint = typeof command.card.number === 'string' ? findTestCard(command.card.number)?.fingerprint : undefined;
  if (fingerprint !== undefined) await assertCardNotFlagged(ctx.db, caller, fingerprint, now);
  let row: TokenRow;
  try {
    row = tokenRowOfCard(ctx, caller, command.card, now);
  } catch (error) {
    if (fingerprint !== undefined && error instanceof KessaiError && CARD_CAUSED_ERRORS.has(error.code)) await recordCardError(ctx.db, caller, fingerprint, now);
    throw error;
  }
  const token = withTokenThreeDSecure(renderToken(row), threeDSecure ? { status: 'unverified' } : undefined);
  await ctx.db.transaction().execute(async (trx) => {
    await trx.insertInto('tokens').values(row).execute();
    if (threeDSecure) await startTokenThreeDSecure(trx, caller, row.token_id, now);
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'token.created', data: token, at: now });
  });
  return token;
}

/**
 * Marks a token used and returns it, inside the caller's transaction (so a later rejection in the
 * same operation rolls the use back). The conditional UPDATE makes two concurrent uses impossible:
 * exactly one of them finds `used_at IS NULL`.
 * Unknown token (in this account and mode): `invalid_id`; used before: `token_already_used`.
 */
export async function consumeToken(trx: Kysely<Database>, caller: Caller, tokenId: string, param: string, at: Date): Promise<TokenRow> {
  const used = await updateToken(trx, caller, tokenId)
    .set({ used_at: at })
    .where('used_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
  if (used) {
    await assertTokenUsable(trx, caller, tokenId, param);
    return used;
  }
  const exists = await trx
    .selectFrom('tokens')
    .select('token_id')
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('token_id', '=', tokenId)
    .executeTakeFirst();
  if (exists) return reject('token_already_used', param, `Token ${tokenId} has already been used.`);
  return reject('invalid_id', param, `No such token: ${tokenId}`);
}

/** An UPDATE of the caller's token `tokenId` (account and mode named), for consumeToken. */
function updateToken(executor: Kysely<Database>, caller: Caller, tokenId: string) {
  return executor.updateTable('tokens').where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('token_id', '=', tokenId);
}
