/**
 * The server's memory of the key directory (KeyDirectoryCache, api-perf): it only saves the
 * directory lookup; revocation and the account's live permission still take effect on the next
 * request, and a key not found is never remembered.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { authenticate, createAccount, digestKey, KeyDirectoryCache, type AccountKeys } from '../../src/accounts/accounts';
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

it('remembers the account of a found key; a revocation and a withdrawn live permission still refuse at once', async () => {
  const directory = new KeyDirectoryCache();
  expect(await authenticate(ctx, keys.live.secret, directory)).toEqual({ accountId: 'acct_keycache', livemode: true, kind: 'secret' });
  expect(directory.get(digestKey(keys.live.secret))).toBe('acct_keycache');
  await ctx.db.updateTable('accounts').set({ live_enabled: false }).where('account_id', '=', 'acct_keycache').execute();
  expect((await rejection(authenticate(ctx, keys.live.secret, directory))).code).toBe('not_activated_account');
  expect(await authenticate(ctx, keys.test.secret, directory)).toEqual({ accountId: 'acct_keycache', livemode: false, kind: 'secret' });
  await ctx.db.updateTable('api_keys').set({ revoked_at: new Date(0) }).where('account_id', '=', 'acct_keycache').where('key_digest', '=', digestKey(keys.test.secret)).execute();
  expect((await rejection(authenticate(ctx, keys.test.secret, directory))).code).toBe('invalid_api_key');
  expect(directory.get(digestKey(keys.test.secret))).toBe('acct_keycache');
});

it('does not remember a key it did not find, and empties itself at its limit', async () => {
  const directory = new KeyDirectoryCache(1);
  expect((await rejection(authenticate(ctx, 'sk_test_unknown', directory))).code).toBe('invalid_api_key');
  expect(directory.get(digestKey('sk_test_unknown'))).toBeUndefined();
  expect((await authenticate(ctx, keys.test.public, directory)).kind).toBe('public');
  expect(directory.get(digestKey(keys.test.public))).toBe('acct_keycache');
  directory.set('other-digest', 'acct_other');
  expect(directory.get(digestKey(keys.test.public))).toBeUndefined();
  expect(directory.get('other-digest')).toBe('acct_other');
});
