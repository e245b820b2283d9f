import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticate, createAccount, DEFAULT_FEE_RATES, getAccount, publicKeyOf } from '../../src/accounts/accounts';
import { toUnixSeconds } from '../../src/domain/time';
import { EVENT_TEXT_SQL, listEvents, recordEvent, recordEvents, renderEvent } from '../../src/events/outbox';
import { runOperation } from '../../src/api/operations';
import { createTestDatabase, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { rejection } from '../support/rejections';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => database?.drop());

describe('accounts', () => {
  it('provisions an account with test and live keys; a key authenticates to its account and mode', async () => {
    const ctx = testContext(database.store);
    const { account, keys } = await createAccount(ctx, { name: 'Tokyo Coffee', id: 'acct_tokyo', feeRates: { Visa: '2.59' }, liveEnabled: true });
    expect(account).toMatchObject({ id: 'acct_tokyo', termCycle: 'monthly', liveEnabled: true, createdAt: REFERENCE_INSTANT });
    expect(keys.test.secret).toMatch(/^sk_test_[0-9a-f]{30}$/);
    expect(keys.live.public).toMatch(/^pk_live_[0-9a-f]{30}$/);
    expect(await authenticate(ctx, keys.test.secret)).toEqual({ accountId: 'acct_tokyo', livemode: false, kind: 'secret' });
    expect(await authenticate(ctx, keys.live.secret)).toEqual({ accountId: 'acct_tokyo', livemode: true, kind: 'secret' });
    expect(await authenticate(ctx, keys.test.public)).toEqual({ accountId: 'acct_tokyo', livemode: false, kind: 'public' });
    const stored = await getAccount(ctx, 'acct_tokyo');
    expect(stored.feeRates).toEqual({ ...DEFAULT_FEE_RATES, Visa: '2.59' });
  });

  it('finds a key through the digest directory, then reads it by its account (one shard on Citus; sql/000042)', async () => {
    const ctx = testContext(database.store, { seed: 4 });
    const { keys } = await createAccount(ctx, { name: 'Directory', id: 'acct_directory' });
    const entries = await ctx.db.selectFrom('api_key_directory').selectAll().where('account', '=', 'acct_directory').execute();
    expect(entries).toHaveLength(4);
    expect(await authenticate(ctx, keys.test.secret)).toEqual({ accountId: 'acct_directory', livemode: false, kind: 'secret' });
    // A key row the directory does not name is not found: the lookup goes through the directory.
    await ctx.db.deleteFrom('api_key_directory').where('account', '=', 'acct_directory').execute();
    expect((await rejection(authenticate(ctx, keys.test.secret))).code).toBe('invalid_api_key');
  });

  it('keeps only digests of the secret keys; public keys, published in browser pages, also in clear for the hosted page (sql/000100)', async () => {
    const ctx = testContext(database.store, { seed: 2 });
    const { account, keys } = await createAccount(ctx, { name: 'Digest Check' });
    const rows = await ctx.db.selectFrom('api_keys').selectAll().execute();
    const stored = JSON.stringify(rows);
    for (const key of [keys.test.secret, keys.live.secret]) expect(stored).not.toContain(key);
    const inClear = rows.filter((row) => row.public_key !== null && row.account_id === account.id);
    expect(inClear.map((row) => [row.kind, row.livemode, row.public_key]).sort()).toEqual([
      ['public', false, keys.test.public],
      ['public', true, keys.live.public],
    ]);
    expect(await publicKeyOf(ctx.db, account.id, false)).toBe(keys.test.public);
    expect(await publicKeyOf(ctx.db, account.id, true)).toBe(keys.live.public);
  });

  it('"Missing key: no_api_key; wrong key: invalid_api_key; both give status 401 with type auth_error"', async () => {
    const ctx = testContext(database.store);
    const missing = await rejection(authenticate(ctx, undefined));
    expect([missing.code, missing.status, missing.type]).toEqual(['no_api_key', 401, 'auth_error']);
    const wrong = await rejection(authenticate(ctx, 'sk_test_000000000000000000000000000000'));
    expect([wrong.code, wrong.status, wrong.type]).toEqual(['invalid_api_key', 401, 'auth_error']);
  });

  it('"an account without live permission gives not_activated_account"', async () => {
    const ctx = testContext(database.store, { seed: 3 });
    const { keys } = await createAccount(ctx, { name: 'Test Only' });
    expect((await rejection(authenticate(ctx, keys.live.secret))).code).toBe('not_activated_account');
  });

  it('rejects bad input with the catalogue code and parameter, and creates nothing', async () => {
    const ctx = testContext(database.store);
    const before = await ctx.db.selectFrom('accounts').select(({ fn }) => fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    const cases: [Parameters<typeof createAccount>[1], string, string][] = [
      [{ name: '' }, 'invalid_string_length', 'name'],
      [{ name: 'x', id: 'shop_1' }, 'invalid_flexible_id', 'id'],
      [{ name: 'x', feeRates: { Visa: '3.001' } }, 'invalid_param_key', 'fee_rates[Visa]'],
      [{ name: 'x', feeRates: { Bitcoin: '1.00' } }, 'unacceptable_brand', 'fee_rates[Bitcoin]'],
      [{ name: 'x', id: 'acct_tokyo' }, 'already_exist_id', 'id'],
    ];
    for (const [input, code, param] of cases) {
      const error = await rejection(createAccount(ctx, input));
      expect([error.code, error.param], JSON.stringify(input)).toEqual([code, param]);
    }
    const after = await ctx.db.selectFrom('accounts').select(({ fn }) => fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    expect(after.n).toBe(before.n);
  });
});

describe('accounts.retrieve (GET /v1/accounts)', () => {
  it("answers the caller's own account in the key's mode, and takes no parameters", async () => {
    const ctx = testContext(database.store, { seed: 5 });
    await createAccount(ctx, { name: 'Retrieve Me', id: 'acct_retrieve', feeRates: { Visa: '2.59' }, liveEnabled: true });
    const caller = { accountId: 'acct_retrieve', livemode: false, kind: 'secret' } as const;
    expect(await runOperation(ctx, caller, 'accounts.retrieve', {})).toEqual({
      id: 'acct_retrieve',
      object: 'account',
      livemode: false,
      created: toUnixSeconds(REFERENCE_INSTANT),
      merchant: { object: 'merchant', name: 'Retrieve Me', livemode_enabled: true, term_cycle: 'monthly', fee_rates: { ...DEFAULT_FEE_RATES, Visa: '2.59' } },
    });
    expect(await runOperation(ctx, { ...caller, livemode: true }, 'accounts.retrieve')).toMatchObject({ id: 'acct_retrieve', livemode: true });
    const error = await rejection(runOperation(ctx, caller, 'accounts.retrieve', { expand: 'merchant' }));
    expect([error.code, error.param]).toEqual(['invalid_param_key', 'expand']);
  });
});

describe('event outbox', () => {
  const resource = { id: 'cus_1', object: 'customer', email: null } as const;

  it('an event written in a transaction that rolls back does not exist, like the change it reports', async () => {
    const ctx = testContext(database.store);
    const rolledBack = ctx.db.transaction().execute(async (trx) => {
      await recordEvent(trx, ctx.ids, { accountId: 'acct_ev', livemode: false, type: 'customer.created', data: resource, at: ctx.clock.now() });
      // Written inside the transaction: the rollback below is what takes it away.
      expect(await listEvents(trx, 'acct_ev')).toHaveLength(1);
      throw new Error('the state change failed');
    });
    await expect(rolledBack).rejects.toThrow('the state change failed');
    expect(await listEvents(ctx.db, 'acct_ev')).toEqual([]);
    await ctx.db.transaction().execute((trx) => recordEvent(trx, ctx.ids, { accountId: 'acct_ev', livemode: false, type: 'customer.created', data: resource, at: ctx.clock.now() }));
    expect(await listEvents(ctx.db, 'acct_ev')).toHaveLength(1);
  });

  it('writes a batch in one statement, in order, with ids from the seeded generator', async () => {
    const ctx = testContext(database.store, { seed: 42 });
    const at = new Date('2027-02-01T00:00:00Z');
    const batch = Array.from({ length: 300 }, (_, i) => ({ accountId: 'acct_batch', livemode: false, type: 'subscription.renewed', data: { id: `sub_${i}`, object: 'subscription' }, at }));
    const ids = await recordEvents(ctx.db, ctx.ids, batch);
    const stored = await listEvents(ctx.db, 'acct_batch');
    expect(stored.map((e) => e.id)).toEqual(ids);
    expect(stored.map((e) => e.data.id)).toEqual(batch.map((e) => e.data.id));
    expect(ids.every((id) => id.startsWith('evnt_'))).toBe(true);
    // The same seed draws the same ids, in the same order.
    const replay = testContext(database.store, { seed: 42 }).ids;
    expect(batch.map(() => replay.next('eventV1'))).toEqual(ids);
    expect(await recordEvents(ctx.db, ctx.ids, [])).toEqual([]);
  });

  it('renders v1 events with `created` in UNIX seconds and v2 events with ISO instants', async () => {
    const ctx = testContext(database.store);
    const at = new Date('2027-03-01T00:00:00Z');
    await recordEvent(ctx.db, ctx.ids, { accountId: 'acct_render', livemode: true, type: 'charge.succeeded', data: { id: 'ch_1', object: 'charge' }, at });
    await recordEvent(ctx.db, ctx.ids, { accountId: 'acct_render', livemode: false, type: 'payment_flow.succeeded', data: { id: 'pfw_1', object: 'payment_flow' }, at, apiVersion: 'v2' });
    const [v1, v2] = (await listEvents(ctx.db, 'acct_render')).map(renderEvent);
    expect(v1).toMatchObject({ object: 'event', livemode: true, created: 1_803_859_200, type: 'charge.succeeded', data: { id: 'ch_1' } });
    expect(String(v1!.id)).toMatch(/^evnt_/);
    expect(v2).toMatchObject({ object: 'event', created_at: '2027-03-01T00:00:00Z', updated_at: '2027-03-01T00:00:00Z', pending_webhooks: 0 });
    expect(String(v2!.id)).toMatch(/^evt_/);
  });

  it('prints events in SQL exactly as JSON.stringify prints renderEvent', async () => {
    const ctx = testContext(database.store);
    // Odd instants (milliseconds, before 1970, a leap day), characters JSON escapes, both versions.
    const cases: { at: string; type: string; apiVersion: 'v1' | 'v2'; livemode: boolean }[] = [
      { at: '2027-03-01T00:00:00.999Z', type: 'charge.succeeded', apiVersion: 'v1', livemode: true },
      { at: '1969-12-31T23:59:59.500Z', type: 'odd "quoted" \\ type\n', apiVersion: 'v1', livemode: false },
      { at: '2028-02-29T14:59:59.001Z', type: 'payment_flow.succeeded', apiVersion: 'v2', livemode: false },
      { at: '2027-12-31T15:00:00.000Z', type: 'checkout.session.completed', apiVersion: 'v2', livemode: true },
      { at: '1969-12-31T23:59:59.999Z', type: 'control \u0001 char', apiVersion: 'v2', livemode: false },
      { at: '2027-06-30T14:59:59.999Z', type: 'payment_flow.canceled', apiVersion: 'v2', livemode: true },
    ];
    for (const [i, c] of cases.entries()) {
      await recordEvent(ctx.db, ctx.ids, { accountId: 'acct_text', livemode: c.livemode, type: c.type, data: { id: `obj_${i}`, object: 'thing', note: 'a "b" \\ c' }, at: new Date(c.at), apiVersion: c.apiVersion });
    }
    // Documents PostgreSQL printed (json_build_object's spacing, jsonb's, line breaks and tabs),
    // with whitespace, quotes and backslashes inside strings that must stay as they are.
    const stored = [
      `{"id" : "obj_sql", "object" : "thing", "nested" : {"a" : [1, 2, {"b" : null}]}, "note" : "two  spaces, \\"q\\" : x"}`,
      `{\n\t"id": "obj_pretty",\r\n  "object": "thing",\n  "empty": {},\n  "list": [ ],\n  "slash": "ends with \\\\",\n  "t": true\n}`,
      // Each kind of whitespace alone.
      `{\n"id":"obj_nl","object":"thing"}`,
      `{"id":\t"obj_tab","object":"thing"}`,
      `{"id":"obj_cr",\r"object":"thing"}`,
    ];
    for (const [i, text] of stored.entries()) {
      await sql`INSERT INTO events (account_id, event_id, livemode, api_version, type, object_type, resource_id, data, created_at)
        VALUES ('acct_text', ${`evnt_sql${i}`}, false, ${i % 2 === 0 ? 'v1' : 'v2'}, 'thing.printed', 'thing', ${`obj_sql${i}`}, ${text}::json, '2029-01-01T00:00:00Z')`.execute(ctx.db);
    }
    const expected = (await listEvents(ctx.db, 'acct_text')).map((event) => JSON.stringify(renderEvent(event)));
    expect(expected.filter((text) => text.includes('"two  spaces, \\"q\\" : x"') || text.includes('"ends with \\\\"'))).toHaveLength(2);
    const printed = await sql<{ text: string }>`SELECT ${EVENT_TEXT_SQL} AS text FROM events e WHERE e.account_id = 'acct_text' ORDER BY e.created_at, e.seq`.execute(ctx.db);
    expect(printed.rows.map((row) => row.text)).toEqual(expected);
    expect(expected).toHaveLength(cases.length + stored.length);
  });
});
