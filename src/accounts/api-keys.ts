/**
 * An account's API keys after it was made: list them (by id and hint, never the key), make a new
 * one (shown once), revoke one. A key's id is the start of its digest: it names the key without
 * being it. A revoked key is refused by every server within KEY_ANSWER_FRESH_MS (accounts.ts).
 */
import { sql } from 'kysely';
import type { Context } from '../engine/context';
import { KessaiError } from '../domain/errors';
import { digestKey, insertKeys, newApiKey } from './accounts';

export interface ApiKeySummary {
  /** The first 16 hex digits of the key's SHA-256 digest. */
  readonly id: string;
  readonly kind: 'secret' | 'public';
  readonly livemode: boolean;
  /** The key's first 12 characters (`sk_test_1a2b`). */
  readonly hint: string;
  readonly createdAt: Date;
  readonly revokedAt: Date | null;
}

const KEY_ID = /^[0-9a-f]{16}$/;

type KeyRow = { key_digest: string; kind: 'secret' | 'public'; livemode: boolean; key_hint: string; created_at: Date; revoked_at: Date | null };
const summary = (row: KeyRow): ApiKeySummary => ({ id: row.key_digest.slice(0, 16), kind: row.kind, livemode: row.livemode, hint: row.key_hint, createdAt: row.created_at, revokedAt: row.revoked_at });

async function assertAccount(ctx: Pick<Context, 'db'>, accountId: string): Promise<{ live_enabled: boolean }> {
  const account = await ctx.db.selectFrom('accounts').select('live_enabled').where('account_id', '=', accountId).executeTakeFirst();
  if (!account) throw new KessaiError('invalid_id', { param: 'account', message: `No such account: ${accountId}` });
  return account;
}

/** The account's keys, newest first, revoked ones included. */
export async function listApiKeys(ctx: Pick<Context, 'db'>, accountId: string): Promise<ApiKeySummary[]> {
  await assertAccount(ctx, accountId);
  const rows = await ctx.db
    .selectFrom('api_keys')
    .select(['key_digest', 'kind', 'livemode', 'key_hint', 'created_at', 'revoked_at'])
    .where('account_id', '=', accountId)
    .orderBy('created_at', 'desc')
    .orderBy('key_digest')
    .execute();
  return rows.map(summary);
}

/** A new key of a kind and mode; returned with the key itself, which is shown this once. */
export async function createApiKey(ctx: Pick<Context, 'db' | 'clock'>, accountId: string, input: { readonly kind: 'secret' | 'public'; readonly livemode: boolean }): Promise<{ key: ApiKeySummary; secret: string }> {
  if (input.kind !== 'secret' && input.kind !== 'public') throw new KessaiError('invalid_param_key', { param: 'kind', message: 'kind must be secret or public' });
  const account = await assertAccount(ctx, accountId);
  if (input.livemode && !account.live_enabled) throw new KessaiError('not_activated_account', { param: 'livemode', message: `account ${accountId} has no live mode` });
  const key = newApiKey(input.kind, input.livemode);
  const now = ctx.clock.now();
  await ctx.db.transaction().execute((trx) => insertKeys(trx, accountId, [{ key, kind: input.kind, livemode: input.livemode }], now));
  return { key: summary({ key_digest: digestKey(key), kind: input.kind, livemode: input.livemode, key_hint: key.slice(0, 12), created_at: now, revoked_at: null }), secret: key };
}

/** Revokes a key by its id; revoking a revoked key changes nothing and answers it as it is. */
export async function revokeApiKey(ctx: Pick<Context, 'db' | 'clock'>, accountId: string, keyId: string): Promise<ApiKeySummary> {
  if (!KEY_ID.test(keyId)) throw new KessaiError('invalid_id', { param: 'key', message: `a key id is 16 hex digits (see the key list), got ${JSON.stringify(keyId)}` });
  await assertAccount(ctx, accountId);
  const now = ctx.clock.now();
  const match = sql<boolean>`left(key_digest, 16) = ${keyId}`;
  await ctx.db.updateTable('api_keys').set({ revoked_at: now }).where('account_id', '=', accountId).where(match).where('revoked_at', 'is', null).execute();
  const row = await ctx.db.selectFrom('api_keys').select(['key_digest', 'kind', 'livemode', 'key_hint', 'created_at', 'revoked_at']).where('account_id', '=', accountId).where(match).executeTakeFirst();
  if (!row) throw new KessaiError('invalid_id', { param: 'key', message: `No such key: ${keyId} (account ${accountId})` });
  return summary(row);
}
