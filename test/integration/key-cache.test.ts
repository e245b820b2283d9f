/**
 * The server's memory of the keys it authenticated (KeyCache): a key's account is kept; the caller
 * it authenticated as is reused for `freshMs`, so a revocation or a withdrawn live permission
 * refuses within that time (the clock here is the test's); a key not found or refused is never
 * remembered.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { authenticate, createAccount, digestKey, KEY_ANSWER_FRESH_MS, KeyCache, type AccountKeys } from '../../src/accounts/accounts';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';
import { rejection } from '../support/rejections';

let database: TestDatabase;
let ctx: ReturnType<typeof testContext>;
let keys: AccountKeys;

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 71 });
  keys = (await createAccount(ctx, { name: 'Key Cache Shop', id: 'acct_keycache', liveEnabled: true })).keys;
});
afterAll(async () => database?.drop());

it('reuses an answer for one second by default: a revocation and a withdrawn live permission refuse once it is stale', async () => {
  expect(KEY_ANSWER_FRESH_MS).toBe(1_000);
  let now = 0;
  const cache = new KeyCache({ now: () => now });
  const live = { accountId: 'acct_keycache', livemode: true, kind: 'secret' };
  expect(await authenticate(ctx, keys.live.secret, cache)).toEqual(live);
  expect(cache.account(digestKey(keys.live.secret))).toBe('acct_keycache');
  expect(cache.caller(digestKey(keys.live.secret))).toEqual(live);

  await ctx.db.updateTable('accounts').set({ live_enabled: false }).where('account_id', '=', 'acct_keycache').execute();
  now = 999;
  expect(await authenticate(ctx, keys.live.secret, cache)).toEqual(live); // the answer of 999 ms ago
  now = 1_000;
  expect((await rejection(authenticate(ctx, keys.live.secret, cache))).code).toBe('not_activated_account');
  expect((await rejection(authenticate(ctx, keys.live.secret, cache))).code).toBe('not_activated_account'); // a refusal is not remembered as fresh

  const test = { accountId: 'acct_keycache', livemode: false, kind: 'secret' };
  expect(await authenticate(ctx, keys.test.secret, cache)).toEqual(test);
  await ctx.db.updateTable('api_keys').set({ revoked_at: new Date(0) }).where('account_id', '=', 'acct_keycache').where('key_digest', '=', digestKey(keys.test.secret)).execute();
  now = 1_500;
  expect(await authenticate(ctx, keys.test.secret, cache)).toEqual(test);
  now = 2_000;
  expect((await rejection(authenticate(ctx, keys.test.secret, cache))).code).toBe('invalid_api_key');
  expect(cache.caller(digestKey(keys.test.secret))).toBeUndefined();
  expect(cache.account(digestKey(keys.test.secret))).toBe('acct_keycache'); // the directory's answer stays

  // Permission given back: the next look-up sees it (refusals were never remembered).
  await ctx.db.updateTable('accounts').set({ live_enabled: true }).where('account_id', '=', 'acct_keycache').execute();
  expect(await authenticate(ctx, keys.live.secret, cache)).toEqual(live);
});

it('without a cache every request reads the key: a revocation refuses the next one', async () => {
  const { keys: own } = await createAccount(ctx, { name: 'No Cache Shop', id: 'acct_nocache' });
  expect((await authenticate(ctx, own.test.secret)).accountId).toBe('acct_nocache');
  await ctx.db.updateTable('api_keys').set({ revoked_at: new Date(0) }).where('account_id', '=', 'acct_nocache').where('key_digest', '=', digestKey(own.test.secret)).execute();
  expect((await rejection(authenticate(ctx, own.test.secret))).code).toBe('invalid_api_key');
});

it('does not remember a key it did not find, and empties itself at its limit', async () => {
  const cache = new KeyCache({ limit: 1 });
  expect((await rejection(authenticate(ctx, 'sk_test_unknown', cache))).code).toBe('invalid_api_key');
  expect(cache.account(digestKey('sk_test_unknown'))).toBeUndefined();
  expect((await authenticate(ctx, keys.test.public, cache)).kind).toBe('public');
  expect(cache.account(digestKey(keys.test.public))).toBe('acct_keycache');
  cache.remember('other-digest', 'acct_other');
  expect(cache.account(digestKey(keys.test.public))).toBeUndefined();
  expect(cache.account('other-digest')).toBe('acct_other');
});
