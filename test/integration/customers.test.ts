import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { KessaiError } from '../../src/domain/errors';
import { toUnixSeconds } from '../../src/domain/time';
import { listEvents } from '../../src/events/outbox';
import { operationNames, runOperation } from '../../src/api/operations';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { createTestDatabase, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { expectRefused } from '../support/rejections';

type Json = Record<string, unknown> & { id: string };
type List = { object: string; count: number; data: Json[]; has_more: boolean; url: string };

let database: TestDatabase;
let ctx: ReturnType<typeof testContext>;
let test: Caller;
let live: Caller;
let publicKey: Caller;

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 7 });
  const { account } = await createAccount(ctx, { name: 'Customers Shop', id: 'acct_customers', liveEnabled: true });
  test = { accountId: account.id, livemode: false, kind: 'secret' };
  live = { accountId: account.id, livemode: true, kind: 'secret' };
  publicKey = { accountId: account.id, livemode: false, kind: 'public' };
});
afterAll(async () => database?.drop());

async function run<T = Json>(name: string, params?: unknown, caller: Caller = test): Promise<T> {
  return (await runOperation(ctx, caller, name, params)) as T;
}

/** Asserts the call is refused with the code and param, and that no row or event was written. */
async function refused(name: string, params: unknown, code: string, param: string | undefined, caller: Caller = test): Promise<KessaiError> {
  return expectRefused(`${name} ${JSON.stringify(params)}`, () => runOperation(ctx, caller, name, params), code, param, snapshot);
}

/** Every row this file's account owns, so "a rejected call changes nothing" compares whole tables. */
async function snapshot(): Promise<unknown> {
  const [tokens, customers, cards, events] = await Promise.all([
    ctx.db.selectFrom('tokens').selectAll().where('account_id', '=', test.accountId).orderBy('token_id').execute(),
    ctx.db.selectFrom('customers').selectAll().where('account_id', '=', test.accountId).orderBy('customer_id').execute(),
    ctx.db.selectFrom('cards').selectAll().where('account_id', '=', test.accountId).orderBy('card_id').execute(),
    ctx.db.selectFrom('events').select(({ fn }) => fn.countAll<number>().as('n')).where('account_id', '=', test.accountId).executeTakeFirstOrThrow(),
  ]);
  return { tokens, customers, cards, events: events.n };
}

async function token(number: string = TEST_CARDS.visa.number, expMonth = '12', expYear = '2030', caller: Caller = test): Promise<string> {
  return (await run('tokens.create', { card: { number, exp_month: expMonth, exp_year: expYear, cvc: '123' } }, caller)).id;
}

describe('operation registry and parameter checks', () => {
  it('lists the customer, card and token operations', () => {
    expect(operationNames()).toEqual(
      expect.arrayContaining(['tokens.create', 'customers.create', 'customers.retrieve', 'customers.update', 'customers.delete', 'customers.list', 'cards.create', 'cards.retrieve', 'cards.update', 'cards.delete', 'cards.list']),
    );
  });

  it('an unknown operation is not_found naming op', async () => {
    const error = await refused('customers.explode', {}, 'not_found', 'op');
    expect(error.status).toBe(404);
  });

  it('"Public key: … used only for creating card tokens"', async () => {
    const made = await run('tokens.create', { card: { number: TEST_CARDS.visa.number, exp_month: '1', exp_year: '2031' } }, publicKey);
    expect(made.object).toBe('token');
    const error = await refused('customers.create', {}, 'invalid_api_key', undefined, publicKey);
    expect(error.status).toBe(401);
  });

  it('"an unknown parameter gives 400 invalid_param_key with param naming it", at the top level and nested', async () => {
    await refused('customers.create', { nickname: 'x' }, 'invalid_param_key', 'nickname');
    await refused('tokens.create', { card: { number: TEST_CARDS.visa.number, exp_month: '1', exp_year: '2031', colour: 'red' } }, 'invalid_param_key', 'card[colour]');
    await refused('customers.list', { page: '2' }, 'invalid_param_key', 'page');
  });

  it('parameters that are not an object are invalid_querystring', async () => {
    await refused('customers.list', 'limit=5', 'invalid_querystring', undefined);
  });

  it('"Booleans in form bodies are accepted case-insensitively (true, True, false, False)"; anything else is invalid_boolean', async () => {
    const customer = await run('customers.create', { card: await token(TEST_CARDS.mastercard.number) });
    const flags = [['True', true], ['false', false], ['False', false], ['true', true], [true, true], ['TRUE', true], ['fAlSe', false]] as const;
    for (const [index, [flag, becomesDefault]] of flags.entries()) {
      const card = await run('cards.create', { customer: customer.id, card: await token(TEST_CARDS.mastercard.number, String(index + 1), '2031'), default: flag });
      const after = await run('customers.retrieve', { id: customer.id });
      expect(after.default_card === card.id, `default=${String(flag)}`).toBe(becomesDefault);
    }
    await refused('cards.create', { customer: customer.id, card: await token(TEST_CARDS.jcb.number), default: 'yes' }, 'invalid_boolean', 'default');
  });
});

describe('tokens', () => {
  it('creates a token with an embedded card and a token.created event, and never stores the number', async () => {
    const made = await run('tokens.create', { card: { number: TEST_CARDS.jcb.number, exp_month: '3', exp_year: '2029', cvc: '999', name: 'TARO YAMADA' } });
    expect(made).toMatchObject({ object: 'token', livemode: false, created: toUnixSeconds(REFERENCE_INSTANT), used: false });
    expect(made.id).toMatch(/^tok_/);
    expect(made.card).toMatchObject({ object: 'card', customer: null, brand: 'JCB', last4: '0000', exp_month: 3, exp_year: 2029, name: 'TARO YAMADA', cvc_check: 'passed', metadata: {} });
    expect((made.card as Json).id).toMatch(/^car_/);
    const rows = await ctx.db.selectFrom('tokens').selectAll().execute();
    expect(JSON.stringify(rows)).not.toContain(TEST_CARDS.jcb.number);
    // Neither the number nor the CVC has a column to live in.
    expect(Object.keys(rows[0]!)).not.toEqual(expect.arrayContaining(['number']));
    expect(Object.keys(rows[0]!).filter((column) => /number|cvc$/.test(column))).toEqual([]);
    const events = await listEvents(ctx.db, test.accountId, { resourceId: made.id });
    expect(events.map((e) => e.type)).toEqual(['token.created']);
    expect(events[0]!.data).toEqual(made);
  });

  it('refuses bad card data with the card[...] param and writes nothing', async () => {
    const card = (overrides: Record<string, string>) => ({ card: { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2030', ...overrides } });
    await refused('tokens.create', {}, 'missing_param', 'card[number]');
    await refused('tokens.create', { card: { exp_month: '12', exp_year: '2030' } }, 'missing_param', 'card[number]');
    await refused('tokens.create', card({ number: '4242424242424241' }), 'invalid_number', 'card[number]');
    await refused('tokens.create', card({ exp_month: '13' }), 'invalid_expiry_month', 'card[exp_month]');
    await refused('tokens.create', card({ exp_year: '2020' }), 'invalid_expiry_year', 'card[exp_year]');
    await refused('tokens.create', card({ cvc: '12' }), 'invalid_cvc', 'card[cvc]');
    await refused('tokens.create', card({ name: 'ヤマダ' }), 'invalid_card_name', 'card[name]');
    await refused('tokens.create', card({ number: '4111111111111111' }), 'invalid_card', 'card[number]');
    await refused('tokens.create', card({ number: TEST_CARDS.declined.number }), 'card_declined', undefined);
    await refused('tokens.create', { card: 'tok_x' }, 'invalid_param_key', 'card');
  });

  it('"A test card in a live request gives test_card_on_livemode"', async () => {
    await refused('tokens.create', { card: { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2030' } }, 'test_card_on_livemode', 'card[number]', live);
  });

  it('a token is single use: the second use is token_already_used and changes nothing', async () => {
    const tok = await token(TEST_CARDS.discover.number);
    const first = await run('customers.create', { card: tok });
    expect(first.default_card).toMatch(/^car_/);
    const other = await run('customers.create', {});
    await refused('cards.create', { customer: other.id, card: tok }, 'token_already_used', 'card');
    await refused('customers.create', { card: tok }, 'token_already_used', 'card');
    await refused('customers.update', { id: other.id, card: tok }, 'token_already_used', 'card');
  });

  it('an unknown token is invalid_id naming card', async () => {
    const other = await run('customers.create', {});
    await refused('cards.create', { customer: other.id, card: 'tok_nothere' }, 'invalid_id', 'card');
  });
});

describe('customers', () => {
  it('creates a customer with a chosen id, contact, metadata and a card that becomes the default card', async () => {
    const tok = await token(TEST_CARDS.visa.number, '5', '2032');
    const customer = await run('customers.create', { id: 'shop-user_001', email: 'taro@example.jp', description: 'regular', card: tok, metadata: { plan: 'gold' } });
    expect(customer).toMatchObject({
      id: 'shop-user_001',
      object: 'customer',
      livemode: false,
      created: toUnixSeconds(REFERENCE_INSTANT),
      email: 'taro@example.jp',
      description: 'regular',
      metadata: { plan: 'gold' },
    });
    const cards = customer.cards as List;
    expect(cards).toMatchObject({ object: 'list', count: 1, has_more: false, url: '/v1/customers/shop-user_001/cards' });
    expect(customer.default_card).toBe(cards.data[0]!.id);
    expect(cards.data[0]).toMatchObject({ customer: 'shop-user_001', brand: 'Visa', last4: '4242', exp_month: 5, exp_year: 2032, fingerprint: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect(await run('customers.retrieve', { id: 'shop-user_001' })).toEqual(customer);
    const events = await listEvents(ctx.db, test.accountId, { resourceId: 'shop-user_001' });
    expect(events.map((e) => e.type)).toEqual(['customer.created']);
    expect(events[0]!.data).toEqual(customer);
    expect((await listEvents(ctx.db, test.accountId, { resourceId: cards.data[0]!.id })).map((e) => e.type)).toEqual(['customer.card.created']);
  });

  it('a customer without anything has metadata {}, no default card and an empty card list', async () => {
    const customer = await run('customers.create');
    expect(customer.id).toMatch(/^cus_[0-9a-f]{30}$/);
    expect(customer).toMatchObject({ default_card: null, email: null, description: null, metadata: {}, cards: { object: 'list', count: 0, data: [], has_more: false, url: `/v1/customers/${customer.id}/cards` } });
  });

  it('refuses bad creation parameters with code and param, and a refused creation consumes no token', async () => {
    await run('customers.create', { id: 'taken' });
    const tok = await token(TEST_CARDS.americanExpress.number);
    await refused('customers.create', { id: 'has space' }, 'invalid_flexible_id', 'id');
    await refused('customers.create', { id: '' }, 'invalid_flexible_id', 'id');
    await refused('customers.create', { id: 'x'.repeat(101) }, 'invalid_flexible_id', 'id');
    await refused('customers.create', { id: 'taken', card: tok }, 'already_exist_id', 'id');
    await refused('customers.create', { email: 'not-an-address' }, 'invalid_email', 'email');
    await refused('customers.create', { description: 'd'.repeat(256) }, 'invalid_string_length', 'description');
    await refused('customers.create', { metadata: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v'])) }, 'too_many_metadata_keys', 'metadata');
    await refused('customers.create', { metadata: { ['k'.repeat(41)]: 'v' } }, 'invalid_metadata_key', `metadata[${'k'.repeat(41)}]`);
    await refused('customers.create', { metadata: { k: 'v'.repeat(501) } }, 'invalid_metadata_value', 'metadata[k]');
    // The token survived the refused creation and still works.
    expect((await run('customers.create', { card: tok })).default_card).toMatch(/^car_/);
  });

  it('"an unknown id gives 404 with param = id" and a message naming it', async () => {
    const error = await refused('customers.retrieve', { id: 'cus_x' }, 'invalid_id', 'id');
    expect([error.status, error.message]).toEqual([404, 'No such customer: cus_x']);
    await refused('customers.update', { id: 'cus_x', email: 'a@b.jp' }, 'invalid_id', 'id');
    await refused('customers.delete', { id: 'cus_x' }, 'invalid_id', 'id');
    await refused('customers.retrieve', {}, 'missing_param', 'id');
  });

  it('updates contact and merges metadata; the empty string clears a field or a metadata key', async () => {
    const customer = await run('customers.create', { email: 'a@example.jp', description: 'first', metadata: { a: '1', b: '2' } });
    ctx.clock.advance(5_000);
    const updated = await run('customers.update', { id: customer.id, email: '', description: 'second', metadata: { a: '', c: '3' } });
    expect(updated).toMatchObject({ email: null, description: 'second', metadata: { b: '2', c: '3' }, created: customer.created });
    expect(await run('customers.retrieve', { id: customer.id })).toEqual(updated);
    const events = await listEvents(ctx.db, test.accountId, { resourceId: customer.id });
    expect(events.map((e) => e.type)).toEqual(['customer.created', 'customer.updated']);
    expect(events[1]!.data).toEqual(updated);
  });

  it('customers.update with card adds the card as the default; default_card must be a card the customer holds', async () => {
    const customer = await run('customers.create', { card: await token(TEST_CARDS.visa.number, '1', '2033') });
    const firstCard = customer.default_card as string;
    const updated = await run('customers.update', { id: customer.id, card: await token(TEST_CARDS.mastercard.number, '1', '2033') });
    expect(updated.default_card).not.toBe(firstCard);
    expect((updated.cards as List).count).toBe(2);
    const back = await run('customers.update', { id: customer.id, default_card: firstCard });
    expect(back.default_card).toBe(firstCard);
    const stranger = await run('customers.create', { card: await token(TEST_CARDS.jcb.number, '1', '2033') });
    await refused('customers.update', { id: customer.id, default_card: stranger.default_card }, 'dont_has_this_card', 'default_card');
    await refused('customers.update', { id: customer.id, default_card: 'car_nothere' }, 'dont_has_this_card', 'default_card');
  });

  it('deletes a customer and its cards softly: deleted response, 404 afterwards, events, id not reused', async () => {
    const customer = await run('customers.create', { id: 'leaving', card: await token(TEST_CARDS.visa.number, '2', '2034') });
    const cardId = customer.default_card as string;
    expect(await run('customers.delete', { id: 'leaving' })).toEqual({ deleted: true, id: 'leaving', livemode: false });
    await refused('customers.retrieve', { id: 'leaving' }, 'invalid_id', 'id');
    await refused('cards.retrieve', { customer: 'leaving', id: cardId }, 'invalid_id', 'customer');
    await refused('customers.create', { id: 'leaving' }, 'already_exist_id', 'id');
    const stored = await ctx.db.selectFrom('cards').select('deleted_at').where('account_id', '=', test.accountId).where('card_id', '=', cardId).executeTakeFirstOrThrow();
    expect(stored.deleted_at).not.toBeNull();
    expect((await listEvents(ctx.db, test.accountId, { resourceId: 'leaving' })).map((e) => e.type)).toEqual(['customer.created', 'customer.deleted']);
    expect((await listEvents(ctx.db, test.accountId, { resourceId: cardId })).map((e) => e.type)).toEqual(['customer.card.created', 'customer.card.deleted']);
    const ids = (await run<List>('customers.list', { limit: 100 })).data.map((c) => c.id);
    expect(ids).not.toContain('leaving');
  });
});

describe('cards', () => {
  it("a customer's first card becomes the default; a later one only with default=true", async () => {
    const customer = await run('customers.create');
    const first = await run('cards.create', { customer: customer.id, card: await token(TEST_CARDS.visa.number, '3', '2035') });
    expect((await run('customers.retrieve', { id: customer.id })).default_card).toBe(first.id);
    const second = await run('cards.create', { customer: customer.id, card: await token(TEST_CARDS.mastercard.number, '3', '2035') });
    expect((await run('customers.retrieve', { id: customer.id })).default_card).toBe(first.id);
    const third = await run('cards.create', { customer: customer.id, card: await token(TEST_CARDS.jcb.number, '3', '2035'), default: 'true', metadata: { source: 'app' } });
    expect(third).toMatchObject({ customer: customer.id, brand: 'JCB', metadata: { source: 'app' } });
    expect((await run('customers.retrieve', { id: customer.id })).default_card).toBe(third.id);
    expect(second.id).not.toBe(first.id);
    expect(await run('cards.retrieve', { customer: customer.id, id: third.id })).toEqual(third);
    expect((await listEvents(ctx.db, test.accountId, { resourceId: third.id })).map((e) => e.type)).toEqual(['customer.card.created']);
  });

  it('"already_have_the_same_card: same card number and expiry already held"; another expiry is another card', async () => {
    const customer = await run('customers.create', { card: await token(TEST_CARDS.visa.number, '4', '2035') });
    const tok = await token(TEST_CARDS.visa.number, '4', '2035');
    await refused('cards.create', { customer: customer.id, card: tok }, 'already_have_the_same_card', 'card');
    // The refusal rolled back the token's use.
    const unused = await ctx.db.selectFrom('tokens').select('used_at').where('account_id', '=', test.accountId).where('token_id', '=', tok).executeTakeFirstOrThrow();
    expect(unused.used_at).toBeNull();
    const renewed = await run('cards.create', { customer: customer.id, card: await token(TEST_CARDS.visa.number, '5', '2035') });
    expect(renewed.exp_month).toBe(5);
    // The same card on another customer is fine.
    const other = await run('customers.create');
    expect((await run('cards.create', { customer: other.id, card: tok })).fingerprint).toBe(renewed.fingerprint);
  });

  it('refuses card creation for an unknown customer or missing parameters', async () => {
    const tok = await token(TEST_CARDS.visa.number, '6', '2035');
    const error = await refused('cards.create', { customer: 'cus_nobody', card: tok }, 'invalid_id', 'customer');
    expect(error.message).toBe('No such customer: cus_nobody');
    await refused('cards.create', { card: tok }, 'missing_param', 'customer');
    await refused('cards.create', { customer: 'cus_nobody' }, 'missing_param', 'card');
  });

  it('updates billing details and metadata, with a customer.card.updated event', async () => {
    const customer = await run('customers.create', { card: await token(TEST_CARDS.visa.number, '7', '2035') });
    const cardId = customer.default_card as string;
    const updated = await run('cards.update', {
      customer: customer.id,
      id: cardId,
      name: 'HANAKO SATO',
      country: 'JP',
      address_zip: '100-0001',
      address_state: 'Tokyo',
      address_city: 'Chiyoda',
      address_line1: '1-1',
      address_line2: 'Room 2',
      email: 'hanako@example.jp',
      phone: '+819012345678',
      metadata: { k: 'v' },
    });
    expect(updated).toMatchObject({ id: cardId, name: 'HANAKO SATO', country: 'JP', address_zip: '100-0001', address_city: 'Chiyoda', email: 'hanako@example.jp', phone: '+819012345678', metadata: { k: 'v' }, exp_month: 7 });
    expect(await run('cards.retrieve', { customer: customer.id, id: cardId })).toEqual(updated);
    const cleared = await run('cards.update', { customer: customer.id, id: cardId, address_line2: '', metadata: { k: '' } });
    expect(cleared).toMatchObject({ address_line2: null, metadata: {} });
    expect((await listEvents(ctx.db, test.accountId, { resourceId: cardId })).map((e) => e.type)).toEqual(['customer.card.created', 'customer.card.updated', 'customer.card.updated']);
  });

  it('"exp_month, exp_year and cvc are no longer accepted"; bad billing details are refused with their codes', async () => {
    const customer = await run('customers.create', { card: await token(TEST_CARDS.visa.number, '8', '2035') });
    const at = { customer: customer.id, id: customer.default_card };
    await refused('cards.update', { ...at, exp_month: '1' }, 'invalid_param_key', 'exp_month');
    await refused('cards.update', { ...at, exp_year: '2036' }, 'invalid_param_key', 'exp_year');
    await refused('cards.update', { ...at, cvc: '123' }, 'invalid_param_key', 'cvc');
    await refused('cards.update', { ...at, name: 'A' }, 'invalid_card_name', 'name');
    await refused('cards.update', { ...at, name: 'x'.repeat(46) }, 'invalid_card_name', 'name');
    await refused('cards.update', { ...at, name: '山田太郎' }, 'invalid_card_name', 'name');
    await refused('cards.update', { ...at, country: 'JPN' }, 'invalid_card_country', 'country');
    await refused('cards.update', { ...at, address_zip: '〒100' }, 'invalid_card_address_zip', 'address_zip');
    await refused('cards.update', { ...at, address_line1: 'l'.repeat(201) }, 'invalid_card_address_line', 'address_line1');
    await refused('cards.update', { ...at, address_city: 'c'.repeat(101) }, 'invalid_card_address_city', 'address_city');
    await refused('cards.update', { ...at, address_state: 's'.repeat(101) }, 'invalid_card_address_state', 'address_state');
    await refused('cards.update', { ...at, email: 'nope' }, 'invalid_email', 'email');
    await refused('cards.update', { ...at, phone: '090-1234-5678' }, 'invalid_param_key', 'phone');
    await refused('cards.update', { ...at, id: 'car_nothere', name: 'OK NAME' }, 'invalid_id', 'id');
  });

  it('deleting the default card leaves the customer without a default card; the card can be added again', async () => {
    const customer = await run('customers.create', { card: await token(TEST_CARDS.visa.number, '9', '2035') });
    const cardId = customer.default_card as string;
    const other = await run('cards.create', { customer: customer.id, card: await token(TEST_CARDS.mastercard.number, '9', '2035') });
    expect(await run('cards.delete', { customer: customer.id, id: cardId })).toEqual({ deleted: true, id: cardId, livemode: false });
    const after = await run('customers.retrieve', { id: customer.id });
    expect(after.default_card).toBeNull();
    expect((after.cards as List).data.map((c) => c.id)).toEqual([other.id]);
    await refused('cards.retrieve', { customer: customer.id, id: cardId }, 'invalid_id', 'id');
    await refused('cards.delete', { customer: customer.id, id: cardId }, 'invalid_id', 'id');
    expect((await listEvents(ctx.db, test.accountId, { resourceId: cardId })).map((e) => e.type)).toEqual(['customer.card.created', 'customer.card.deleted']);
    const again = await run('cards.create', { customer: customer.id, card: await token(TEST_CARDS.visa.number, '9', '2035') });
    expect(again.id).not.toBe(cardId);
    // Deleting a card that is not the default leaves the default alone.
    await run('customers.update', { id: customer.id, default_card: again.id });
    await run('cards.delete', { customer: customer.id, id: other.id });
    expect((await run('customers.retrieve', { id: customer.id })).default_card).toBe(again.id);
  });

  it('a card of one customer is not found under another', async () => {
    const a = await run('customers.create', { card: await token(TEST_CARDS.visa.number, '10', '2035') });
    const b = await run('customers.create');
    await refused('cards.retrieve', { customer: b.id, id: a.default_card }, 'invalid_id', 'id');
  });
});

describe('pagination', () => {
  /** A fresh account, so its lists hold only what the test puts there. */
  async function freshAccount(id: string): Promise<Caller> {
    const { account } = await createAccount(ctx, { name: id, id });
    return { accountId: account.id, livemode: false, kind: 'secret' };
  }

  it('lists are newest first (ties by id, descending), 10 by default, with has_more, offset, since and until', async () => {
    const caller = await freshAccount('acct_pages');
    const start = new Date('2027-06-01T00:00:00Z');
    const made: Json[] = [];
    for (let i = 0; i < 12; i += 1) {
      ctx.clock.set(new Date(start.getTime() + i * 1000));
      made.push(await run('customers.create', {}, caller));
    }
    // Two more in the same second as the last one (different milliseconds are the same `created`).
    ctx.clock.set(new Date(start.getTime() + 11 * 1000 + 500));
    made.push(await run('customers.create', { id: 'zz-same-second' }, caller));
    made.push(await run('customers.create', { id: 'aa-same-second' }, caller));
    ctx.clock.set(REFERENCE_INSTANT);

    const all = await run<List>('customers.list', { limit: '100' }, caller);
    expect(all.count).toBe(14);
    const expected = [...made].sort((x, y) => (y.created as number) - (x.created as number) || (x.id < y.id ? 1 : x.id > y.id ? -1 : 0));
    // The same instant: the id breaks the tie, descending.
    expect(all.data.slice(0, 2).map((c) => c.id)).toEqual(['zz-same-second', 'aa-same-second']);
    expect(all.data.slice(3).map((c) => c.id)).toEqual(expected.slice(3).map((c) => c.id));

    const first = await run<List>('customers.list', {}, caller);
    expect(first).toMatchObject({ object: 'list', count: 10, has_more: true, url: '/v1/customers' });
    expect(first.data.map((c) => c.id)).toEqual(all.data.slice(0, 10).map((c) => c.id));
    const second = await run<List>('customers.list', { offset: 10 }, caller);
    expect(second).toMatchObject({ count: 4, has_more: false });
    expect(second.data.map((c) => c.id)).toEqual(all.data.slice(10).map((c) => c.id));
    const exact = await run<List>('customers.list', { limit: 4, offset: 10 }, caller);
    expect(exact.has_more).toBe(false);

    // "since: only objects created at or after this timestamp; until: … at or before" (v1 §4.1).
    const t = toUnixSeconds(start);
    const window = await run<List>('customers.list', { since: String(t + 2), until: String(t + 4) }, caller);
    expect(window.data.map((c) => c.created)).toEqual([t + 4, t + 3, t + 2]);
    const lastSecond = await run<List>('customers.list', { since: t + 11 }, caller);
    expect(lastSecond.count).toBe(3);
  });

  it('refuses bad pagination values with their param', async () => {
    await refused('customers.list', { limit: '0' }, 'invalid_querystring', 'limit');
    await refused('customers.list', { limit: '101' }, 'invalid_querystring', 'limit');
    await refused('customers.list', { limit: 'ten' }, 'invalid_querystring', 'limit');
    await refused('customers.list', { offset: '-1' }, 'invalid_querystring', 'offset');
    await refused('customers.list', { since: 'yesterday' }, 'invalid_timestamp', 'since');
    await refused('customers.list', { until: '-5' }, 'invalid_timestamp', 'until');
  });

  it('"A child list inside a parent object … is returned with default paging (limit=10, offset=0)"; cards.list pages further', async () => {
    const customer = await run('customers.create');
    const cardIds: string[] = [];
    for (let month = 1; month <= 12; month += 1) {
      ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + month * 1000));
      cardIds.push((await run('cards.create', { customer: customer.id, card: await token(TEST_CARDS.visa.number, String(month), '2036') })).id);
    }
    ctx.clock.set(REFERENCE_INSTANT);
    const newestFirst = [...cardIds].reverse();
    const child = (await run('customers.retrieve', { id: customer.id })).cards as List;
    expect(child).toMatchObject({ object: 'list', count: 10, has_more: true, url: `/v1/customers/${customer.id}/cards` });
    expect(child.data.map((c) => c.id)).toEqual(newestFirst.slice(0, 10));
    const rest = await run<List>('cards.list', { customer: customer.id, offset: '10' });
    expect(rest).toMatchObject({ count: 2, has_more: false });
    expect(rest.data.map((c) => c.id)).toEqual(newestFirst.slice(10));
    const two = await run<List>('cards.list', { customer: customer.id, limit: 2 });
    expect(two.data.map((c) => c.id)).toEqual(newestFirst.slice(0, 2));
    expect(two.has_more).toBe(true);
    await refused('cards.list', { customer: 'cus_nobody' }, 'invalid_id', 'customer');
    await refused('cards.list', { customer: customer.id, limit: 101 }, 'invalid_querystring', 'limit');
  });

  it('a customer list carries each customer’s own cards', async () => {
    const caller = await freshAccount('acct_children');
    const liveCaller: Caller = { ...caller };
    const a = await run('customers.create', {}, liveCaller);
    ctx.clock.advance(1000);
    const b = await run('customers.create', {}, liveCaller);
    ctx.clock.set(REFERENCE_INSTANT);
    const tokenFor = async () => (await run('tokens.create', { card: { number: TEST_CARDS.visa.number, exp_month: '1', exp_year: '2037' } }, caller)).id;
    const cardA = await run('cards.create', { customer: a.id, card: await tokenFor() }, caller);
    const list = await run<List>('customers.list', {}, caller);
    expect(list.data.map((c) => c.id)).toEqual([b.id, a.id]);
    expect((list.data[1]!.cards as List).data.map((c) => c.id)).toEqual([cardA.id]);
    expect((list.data[0]!.cards as List).count).toBe(0);
  });
});

describe('test and live mode', () => {
  it('test and live data are separate: a test customer is unknown in live mode and its chosen id is free there', async () => {
    const testCustomer = await run('customers.create', { id: 'both-modes', email: 'test@example.jp' });
    await refused('customers.retrieve', { id: 'both-modes' }, 'invalid_id', 'id', live);
    const liveCustomer = await run('customers.create', { id: 'both-modes', email: 'live@example.jp' }, live);
    expect(liveCustomer).toMatchObject({ id: 'both-modes', livemode: true, email: 'live@example.jp' });
    expect(await run('customers.retrieve', { id: 'both-modes' })).toEqual(testCustomer);
    const liveList = await run<List>('customers.list', { limit: 100 }, live);
    expect(liveList.data.map((c) => c.id)).toEqual(['both-modes']);
    // A test token cannot be used in live mode.
    const tok = await token(TEST_CARDS.visa.number, '11', '2035');
    await refused('cards.create', { customer: 'both-modes', card: tok }, 'invalid_id', 'card', live);
    const events = await listEvents(ctx.db, test.accountId, { resourceId: 'both-modes' });
    expect(events.map((e) => [e.type, e.livemode])).toEqual([
      ['customer.created', false],
      ['customer.created', true],
    ]);
  });
});
