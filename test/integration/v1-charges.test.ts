import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { listEvents } from '../../src/events/outbox';
import { settleCaptured } from '../../src/settlement/capture';
import { closeTermBatch } from '../../src/settlement/term-close';
import { runOperation } from '../../src/api/operations';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { MS_PER_DAY } from '../../src/domain/time';
import { createTestDatabase, REFERENCE_INSTANT, testContext, type TestDatabase } from '../support/database';
import { expectRefused, rejection } from '../support/rejections';

let database: TestDatabase;
let ctx: ReturnType<typeof testContext>;
const caller: Caller = { accountId: 'acct_v1charges', livemode: false, kind: 'secret' };
const publicCaller: Caller = { ...caller, kind: 'public' };

interface Charge {
  id: string;
  amount: number;
  paid: boolean;
  captured: boolean;
  captured_at: number | null;
  expired_at: number | null;
  created: number;
  refunded: boolean;
  amount_refunded: number;
  refund_reason: string | null;
  customer: string | null;
  description: string | null;
  failure_code: string | null;
  three_d_secure_status: string | null;
  metadata: Record<string, string>;
  card: { id: string; last4: string; customer: string | null };
}

const seconds = (at: Date): number => Math.floor(at.getTime() / 1000);

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 41 });
  await createAccount(ctx, { name: 'V1 Charges Shop', id: caller.accountId });
});
afterAll(async () => database?.drop());

function op<T = Charge>(name: string, params?: unknown, who: Caller = caller): Promise<T> {
  return runOperation(ctx, who, name, params) as Promise<T>;
}

async function token(number: string = TEST_CARDS.visa.number): Promise<string> {
  const created = await op<{ id: string }>('tokens.create', { card: { number, exp_month: '12', exp_year: '2035', cvc: '123' } });
  return created.id;
}

async function charge(params: Record<string, unknown> = {}, number?: string): Promise<Charge> {
  return op('charges.create', { amount: '1000', currency: 'jpy', card: await token(number), ...params });
}

/** Everything a refused charge operation must leave untouched. */
async function snapshot() {
  const [charges, refunds, reauths, tokens] = await Promise.all([
    ctx.db.selectFrom('charges').selectAll().where('account_id', '=', caller.accountId).orderBy('charge_id').execute(),
    ctx.db.selectFrom('refunds').selectAll().where('account_id', '=', caller.accountId).orderBy('refund_id').execute(),
    ctx.db.selectFrom('reauthorizations').selectAll().where('account_id', '=', caller.accountId).orderBy('reauth_id').execute(),
    ctx.db.selectFrom('tokens').select(['token_id', 'used_at']).where('account_id', '=', caller.accountId).orderBy('token_id').execute(),
  ]);
  return { charges, refunds, reauths, tokens, events: (await listEvents(ctx.db, caller.accountId)).length };
}

async function eventsOf(chargeId: string): Promise<string[]> {
  return (await listEvents(ctx.db, caller.accountId, { resourceId: chargeId })).map((e) => e.type);
}

describe('charges.create', () => {
  it('"create charge — default: paid=true, captured=true, captured_at set; event charge.succeeded" (v1 §3.1)', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const created = await charge({ description: 'order 1', metadata: { order: '1' } });
    expect(created).toMatchObject({ object: 'charge', amount: 1000, currency: 'jpy', paid: true, captured: true, captured_at: seconds(REFERENCE_INSTANT), expired_at: null, refunded: false, amount_refunded: 0, customer: null, description: 'order 1', metadata: { order: '1' }, three_d_secure_status: null, fee_rate: '3.00' });
    expect(created.card).toMatchObject({ last4: '4242', customer: null });
    expect(await eventsOf(created.id)).toEqual(['charge.succeeded']);
    const row = await ctx.db.selectFrom('charges').select(['amount_captured']).where('charge_id', '=', created.id).executeTakeFirstOrThrow();
    expect(row.amount_captured).toBe(1000);
    expect(await op('charges.retrieve', { id: created.id })).toEqual(created);
  });

  it('"customer: the default card is used when card is omitted"; with customer, card selects another of its cards', async () => {
    await op('customers.create', { id: 'cus_two_cards', card: await token(TEST_CARDS.visa.number) });
    const second = await op<{ id: string }>('cards.create', { customer: 'cus_two_cards', card: await token(TEST_CARDS.mastercard.number) });
    const byDefault = await op('charges.create', { amount: 500, currency: 'jpy', customer: 'cus_two_cards' });
    expect(byDefault.card).toMatchObject({ last4: '4242', customer: 'cus_two_cards' });
    expect(byDefault.customer).toBe('cus_two_cards');
    const chosen = await op('charges.create', { amount: 500, currency: 'jpy', customer: 'cus_two_cards', card: second.id });
    expect(chosen.card).toMatchObject({ id: second.id, last4: '4444' });
  });

  it('"capture=false: hold lasts expiry_days (default 7); expired_at set" (v1 §3.1, service rules §2)', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const held = await charge({ capture: 'false' });
    expect(held).toMatchObject({ paid: true, captured: false, captured_at: null, expired_at: seconds(REFERENCE_INSTANT) + 7 * 86_400 });
    const three = await charge({ capture: 'False', expiry_days: '3' });
    expect(three.expired_at).toBe(seconds(REFERENCE_INSTANT) + 3 * 86_400);
  });

  it('"expiry_days=60 → 23:59:59 JST of day 59" (service rules §2)', async () => {
    // 2027-01-01 09:00 JST + 59 days = 2027-03-01 → 23:59:59 JST = 14:59:59 UTC.
    ctx.clock.set(REFERENCE_INSTANT);
    const held = await charge({ capture: false, expiry_days: 60 });
    expect(held.expired_at).toBe(seconds(new Date('2027-03-01T14:59:59Z')));
  });

  it('"overseas issuer, from 2026-09-14: 5 days; not extendable" — v1 expiry_days is capped; a hold authorized on 2026-09-13 keeps the old rule', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const capped = await charge({ capture: false, expiry_days: 30 }, TEST_CARDS.overseas.number);
    expect(capped.expired_at).toBe(seconds(REFERENCE_INSTANT) + 5 * 86_400);
    const before = new Date('2026-09-13T03:00:00Z');
    ctx.clock.set(before);
    const old = await charge({ capture: false, expiry_days: 30 }, TEST_CARDS.overseas.number);
    expect(old.expired_at).toBe(seconds(before) + 30 * 86_400);
    ctx.clock.set(REFERENCE_INSTANT);
  });

  it('a declined card keeps the failed charge (charge.failed) and answers 402 naming it', async () => {
    const tok = await token(TEST_CARDS.declinesOnCharge.number);
    const error = await rejection(op('charges.create', { amount: 1000, currency: 'jpy', card: tok }));
    expect([error.code, error.status, error.type]).toEqual(['card_declined', 402, 'card_error']);
    expect(error.charge).toMatch(/^ch_/);
    const failed = await op('charges.retrieve', { id: error.charge });
    expect(failed).toMatchObject({ paid: false, captured: false, failure_code: 'card_declined' });
    expect(await eventsOf(error.charge!)).toEqual(['charge.failed']);
  });

  it('refuses bad input with the catalogue code and param, and changes nothing', async () => {
    const tok = await token();
    const base = { amount: 1000, currency: 'jpy', card: tok };
    const cases: [string, Record<string, unknown>, string, string | undefined, number][] = [
      ['amount missing', { currency: 'jpy', card: tok }, 'missing_param', 'amount', 400],
      ['amount below 50', { ...base, amount: 49 }, 'invalid_amount', 'amount', 400],
      ['amount above 9,999,999', { ...base, amount: 10_000_000 }, 'invalid_amount', 'amount', 400],
      ['currency missing', { amount: 1000, card: tok }, 'missing_param', 'currency', 400],
      ['currency usd', { ...base, currency: 'usd' }, 'invalid_currency', 'currency', 400],
      ['no card, no customer', { amount: 1000, currency: 'jpy' }, 'no_payment_method', 'card', 400],
      ['expiry_days 0', { ...base, capture: false, expiry_days: 0 }, 'invalid_expiry_days', 'expiry_days', 400],
      ['expiry_days 61', { ...base, capture: false, expiry_days: 61 }, 'invalid_expiry_days', 'expiry_days', 400],
      ['expiry_days with capture', { ...base, expiry_days: 7 }, 'unnecessary_expiry_days', 'expiry_days', 400],
      ['capture yes', { ...base, capture: 'yes' }, 'invalid_boolean', 'capture', 400],
      ['three_d_secure 1', { ...base, three_d_secure: '1' }, 'invalid_boolean', 'three_d_secure', 400],
      ['unknown parameter', { ...base, tip: 5 }, 'invalid_param_key', 'tip', 400],
      ['card number directly', { ...base, card: { number: '4242424242424242' } }, 'invalid_param_key', 'card', 400],
      ['unknown token', { ...base, card: 'tok_missing' }, 'invalid_id', 'card', 404],
      ['unknown customer', { amount: 1000, currency: 'jpy', customer: 'cus_missing' }, 'invalid_id', 'customer', 404],
      ['description too long', { ...base, description: 'x'.repeat(256) }, 'invalid_string_length', 'description', 400],
      ['21 metadata keys', { ...base, metadata: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v'])) }, 'too_many_metadata_keys', 'metadata', 400],
      ['41-character metadata key', { ...base, metadata: { ['k'.repeat(41)]: 'v' } }, 'invalid_metadata_key', `metadata[${'k'.repeat(41)}]`, 400],
      ['501-character metadata value', { ...base, metadata: { k: 'v'.repeat(501) } }, 'invalid_metadata_value', 'metadata[k]', 400],
      ['nested metadata value', { ...base, metadata: { k: { nested: 'v' } } }, 'invalid_metadata_value', 'metadata[k]', 400],
    ];
    for (const [label, params, code, param, status] of cases) {
      const error = await expectRefused(label, () => op('charges.create', params), code, param, snapshot);
      expect([error.status, error.type], label).toEqual([status, 'client_error']);
    }
    await op('customers.create', { id: 'cus_no_card' });
    await expectRefused('customer without a default card', () => op('charges.create', { amount: 1000, currency: 'jpy', customer: 'cus_no_card' }), 'missing_card', 'customer', snapshot);
    await op('customers.create', { id: 'cus_other', card: await token() });
    await expectRefused('a card the customer does not hold', () => op('charges.create', { amount: 1000, currency: 'jpy', customer: 'cus_other', card: 'car_missing' }), 'dont_has_this_card', 'card', snapshot);
    await op('charges.create', base);
    await expectRefused('token used twice', () => op('charges.create', base), 'token_already_used', 'card', snapshot);
    await expectRefused('public key', () => op('charges.create', { ...base, card: tok }, publicCaller), 'invalid_api_key', undefined, snapshot);
  });
});

describe('settlement hooks', () => {
  it('a capture and a refund row get, as they are written, the term their own instant falls in ("a charge belongs to the term in which it is captured")', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const immediate = await charge();
    const held = await charge({ capture: false, expiry_days: 60 });
    expect(held).toMatchObject({ term_id: null });
    const term = async (id: string | null) => ctx.db.selectFrom('terms').select(['term_id', 'start_at', 'end_at']).where('term_id', '=', id!).executeTakeFirstOrThrow();
    const contains = (t: { start_at: Date; end_at: Date }, at: Date) => t.start_at.getTime() <= at.getTime() && at.getTime() < t.end_at.getTime();
    // Captured 40 days after it was authorized: the capture's term, not the authorization's.
    const later = new Date(REFERENCE_INSTANT.getTime() + 40 * MS_PER_DAY);
    ctx.clock.set(later);
    const captured = await op<Charge & { term_id: string | null }>('charges.capture', { id: held.id, amount: 700 });
    const capturedTerm = await term(captured.term_id);
    expect(contains(capturedTerm, later)).toBe(true);
    const immediateTerm = await term((await op<Charge & { term_id: string | null }>('charges.retrieve', { id: immediate.id })).term_id);
    expect(contains(immediateTerm, REFERENCE_INSTANT)).toBe(true);
    expect(immediateTerm.term_id).not.toBe(capturedTerm.term_id);
    // The refund of the earlier charge, made later, is in the refund's term.
    await op('charges.refund', { id: immediate.id, amount: 100 });
    const refunds = await ctx.db.selectFrom('refunds').select(['term_id']).where('charge_id', '=', immediate.id).execute();
    expect(refunds).toHaveLength(1);
    expect(contains(await term(refunds[0]!.term_id), later)).toBe(true);
    ctx.clock.set(REFERENCE_INSTANT);
  });
});

describe('charges.retrieve reads the charge and its card in one statement', () => {
  it("shows what a list shows (chargeCardsOf's two reads), for a stored card, the default card, a token's card and a deleted card", async () => {
    await op('customers.create', { id: 'cus_one_read', card: await token(TEST_CARDS.visa.number), metadata: { tier: 'gold' } });
    const extra = await op<{ id: string }>('cards.create', { customer: 'cus_one_read', card: await token(TEST_CARDS.mastercard.number) });
    const byCard = await op('charges.create', { amount: 2000, currency: 'jpy', customer: 'cus_one_read', card: extra.id });
    const byDefault = await op('charges.create', { amount: 2100, currency: 'jpy', customer: 'cus_one_read', metadata: { order: '7' } });
    const byToken = await charge({ amount: 1500 }, TEST_CARDS.jcb.number);
    await op('cards.delete', { customer: 'cus_one_read', id: extra.id });
    const listed = await op<{ data: Charge[] }>('charges.list', { limit: 100 });
    for (const created of [byCard, byDefault, byToken]) {
      const retrieved = await op('charges.retrieve', { id: created.id });
      expect(JSON.stringify(retrieved)).toBe(JSON.stringify(listed.data.find((c) => c.id === created.id)));
    }
    expect((await op('charges.retrieve', { id: byCard.id })).card).toMatchObject({ id: extra.id, last4: '4444', customer: 'cus_one_read' });
    expect((await op('charges.retrieve', { id: byToken.id })).card).toMatchObject({ last4: '0000', customer: null });
    const unknown = await rejection(op('charges.retrieve', { id: 'ch_not_there' }));
    expect([unknown.code, unknown.param]).toEqual(['invalid_id', 'id']);
  });
});

describe('charges.create writes its settled row and event in one statement', () => {
  /** The row's settlement columns. */
  const settlementOf = (chargeId: string) =>
    ctx.db.selectFrom('charges').select(['fee', 'platform_fee', 'total_platform_fee', 'term_id', 'dispute_due_at']).where('account_id', '=', caller.accountId).where('charge_id', '=', chargeId).executeTakeFirstOrThrow();

  it('the response, the event and a retrieve show one object; the settlement is what settleCaptured writes', async () => {
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 3 * MS_PER_DAY));
    await op('tenants.create', { id: 'ten_api_perf', name: 'Shop', platform_fee_rate: '12.5', payjp_fee_included: 'true' });
    await op('customers.create', { id: 'cus_api_perf', card: await token(TEST_CARDS.jcb.number) });
    const other = await op<{ id: string }>('cards.create', { customer: 'cus_api_perf', card: await token(TEST_CARDS.disputedFraudulent.number) });
    // Keys in an order that is not jsonb's (shorter keys first): the object must show the stored order.
    const metadata = { zeta_long_key: '1', b: '2', aa: '3' };
    const created: Charge[] = [
      await op('charges.create', { amount: 1234, currency: 'jpy', customer: 'cus_api_perf', metadata, description: 'by customer' }),
      await op('charges.create', { amount: 5000, currency: 'jpy', customer: 'cus_api_perf', card: other.id, tenant: 'ten_api_perf' }),
      await op('charges.create', { amount: 777, currency: 'jpy', customer: 'cus_api_perf', capture: false, metadata }),
      await charge({ amount: 3333, tenant: 'ten_api_perf', platform_fee: '300', metadata }),
    ];
    const declined = await rejection(op('charges.create', { amount: 1000, currency: 'jpy', card: await token(TEST_CARDS.declinesOnCharge.number), metadata }));
    const all = [...created, (await op('charges.retrieve', { id: declined.charge })) as Charge];
    for (const object of all) {
      const events = await listEvents(ctx.db, caller.accountId, { resourceId: object.id });
      expect(events).toHaveLength(1);
      expect(events[0]!.data).toEqual(object);
      expect(JSON.stringify(events[0]!.data)).toBe(JSON.stringify(await op('charges.retrieve', { id: object.id })));
    }
    for (const object of created.slice(0, 3)) expect(JSON.stringify(object)).toBe(JSON.stringify(await op('charges.retrieve', { id: object.id })));
    expect(Object.keys(created[0]!.metadata)).toEqual(['b', 'aa', 'zeta_long_key']);
    // The settlement columns the INSERT wrote are those settleCaptured writes on the same row unsettled.
    const captured = created.filter((c) => c.captured);
    expect(captured).toHaveLength(3);
    const written = await Promise.all(captured.map((c) => settlementOf(c.id)));
    expect(written.every((w) => w.term_id !== null && w.fee !== null)).toBe(true);
    expect(written[1]!.dispute_due_at).not.toBeNull();
    expect(written[1]!.platform_fee).not.toBeNull();
    expect(written[0]!.platform_fee).toBeNull();
    await ctx.db.transaction().execute(async (trx) => {
      for (const c of captured) {
        await trx.updateTable('charges').set({ fee: null, term_id: null, dispute_due_at: null, total_platform_fee: 0 }).where('account_id', '=', caller.accountId).where('charge_id', '=', c.id).execute();
      }
      await settleCaptured(trx, ctx, captured.map((c) => ({ accountId: caller.accountId, livemode: false, chargeId: c.id })));
    });
    const resettled = await Promise.all(captured.map((c) => settlementOf(c.id)));
    expect(resettled).toEqual(written);
  });

  it('a term closed while the card network answers gets nothing: the charge settles into the next open term, with one event', async () => {
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 400 * MS_PER_DAY));
    await op('customers.create', { id: 'cus_term_race', card: await token() });
    // The first charge of the instant's term opens it; the second's first step finds it open.
    const first = await op('charges.create', { amount: 1000, currency: 'jpy', customer: 'cus_term_race' });
    const { term_id: termId } = await settlementOf(first.id);
    const term = () => ctx.db.selectFrom('terms').selectAll().where('account_id', '=', caller.accountId).where('term_id', '=', termId!).executeTakeFirstOrThrow();
    const closing = {
      ...ctx,
      processor: {
        ...ctx.processor,
        // The term's close (due at its end: this capture is recorded late) between the first
        // step's read and the record step.
        authorize: async (requests: Parameters<typeof ctx.processor.authorize>[0]) => {
          // A batch closes each account's earliest open term: the file's earlier terms go first.
          const { end_at: end } = await term();
          while ((await ctx.db.transaction().execute((trx) => closeTermBatch(trx, ctx, [caller.accountId], end, 10))).selected > 0);
          return ctx.processor.authorize(requests);
        },
      },
    };
    const second = (await runOperation(closing, caller, 'charges.create', { amount: 2000, currency: 'jpy', customer: 'cus_term_race' })) as Charge;
    expect(second.paid).toBe(true);
    const settled = await settlementOf(second.id);
    expect(settled.term_id).not.toBe(termId);
    const next = await ctx.db.selectFrom('terms').selectAll().where('account_id', '=', caller.accountId).where('term_id', '=', settled.term_id!).executeTakeFirstOrThrow();
    expect([(await term()).closed, next.closed, next.start_at]).toEqual([true, false, (await term()).end_at]);
    expect(await eventsOf(second.id)).toEqual(['charge.succeeded']);
    expect(await ctx.db.selectFrom('network_claims').select('resource_id').where('account_id', '=', caller.accountId).where('resource', '=', 'charge').where('resource_id', '=', second.id).execute()).toEqual([]);
  });
});

describe('charges.retrieve, update, list', () => {
  it('update changes description and merges metadata (charge.updated); unknown id is invalid_id 404', async () => {
    const created = await charge({ metadata: { a: '1', b: '2' } });
    const updated = await op('charges.update', { id: created.id, description: 'gift', metadata: { b: '', c: '3' } });
    expect(updated).toMatchObject({ description: 'gift', metadata: { a: '1', c: '3' } });
    expect(await eventsOf(created.id)).toEqual(['charge.succeeded', 'charge.updated']);
    // v1 form syntax: `metadata=` (empty) clears every key.
    expect(await op('charges.update', { id: created.id, metadata: '' })).toMatchObject({ metadata: {} });
    await expectRefused('21 keys after the merge', () => op('charges.update', { id: created.id, metadata: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`n${i}`, 'v'])) }), 'too_many_metadata_keys', 'metadata', snapshot);
    const error = await expectRefused('unknown id', () => op('charges.retrieve', { id: 'ch_missing' }), 'invalid_id', 'id', snapshot);
    expect(error.status).toBe(404);
    await expectRefused('update with amount', () => op('charges.update', { id: created.id, amount: 5 }), 'invalid_param_key', 'amount', snapshot);
  });

  it('"results are ordered newest first" with pagination and the customer filter (v1 §4.1)', async () => {
    await op('customers.create', { id: 'cus_list', card: await token() });
    const made: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + (i + 1) * 60_000));
      made.push((await op('charges.create', { amount: 100 + i, currency: 'jpy', customer: 'cus_list' })).id);
    }
    const page = await op<{ object: string; count: number; has_more: boolean; url: string; data: Charge[] }>('charges.list', { customer: 'cus_list', limit: 2 });
    expect(page).toMatchObject({ object: 'list', count: 2, has_more: true, url: '/v1/charges' });
    expect(page.data.map((c) => c.id)).toEqual([made[2], made[1]]);
    const rest = await op<{ data: Charge[]; has_more: boolean }>('charges.list', { customer: 'cus_list', limit: 2, offset: 2 });
    expect(rest.data.map((c) => c.id)).toEqual([made[0]]);
    expect(rest.has_more).toBe(false);
    await expectRefused('limit 101', () => op('charges.list', { limit: 101 }), 'invalid_querystring', 'limit', snapshot);
    ctx.clock.set(REFERENCE_INSTANT);
  });
});

describe('charges.capture', () => {
  it('"capture with a smaller amount sets amount_refunded to the difference"; event charge.captured; a second capture is already_captured', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const held = await charge({ capture: false });
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 3600_000));
    const captured = await op('charges.capture', { id: held.id, amount: 800 });
    expect(captured).toMatchObject({ captured: true, captured_at: seconds(REFERENCE_INSTANT) + 3600, amount: 1000, amount_refunded: 200, refunded: false });
    const row = await ctx.db.selectFrom('charges').select(['amount_captured']).where('charge_id', '=', held.id).executeTakeFirstOrThrow();
    expect(row.amount_captured).toBe(800);
    expect(await eventsOf(held.id)).toEqual(['charge.succeeded', 'charge.captured']);
    await expectRefused('second capture', () => op('charges.capture', { id: held.id }), 'already_captured', 'id', snapshot);
    await expectRefused('capture of a charge captured at creation', async () => op('charges.capture', { id: (await charge()).id }), 'already_captured', 'id', async () => (await snapshot()).refunds);
    ctx.clock.set(REFERENCE_INSTANT);
  });

  it('capture without amount takes the whole hold', async () => {
    const held = await charge({ capture: false });
    expect(await op('charges.capture', { id: held.id })).toMatchObject({ captured: true, amount_refunded: 0 });
  });

  it('"Capture amount 50 to 9,999,999 yen, at most the held amount": above the hold is capture_amount_gt_net', async () => {
    const held = await charge({ capture: false });
    await expectRefused('above the hold', () => op('charges.capture', { id: held.id, amount: 1001 }), 'capture_amount_gt_net', 'amount', snapshot);
    await expectRefused('below 50', () => op('charges.capture', { id: held.id, amount: 49 }), 'invalid_amount', 'amount', snapshot);
  });

  it('"After expired_at … capture then fails with charge_expired" (service rules §2), even before the job released it: a capture at expired_at itself is made', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const atExpiry = await charge({ capture: false, expiry_days: 1 });
    const after = await charge({ capture: false, expiry_days: 1 });
    const expiredAt = async (id: string) => (await ctx.db.selectFrom('charges').select('expired_at').where('charge_id', '=', id).executeTakeFirstOrThrow()).expired_at!;
    expect(await expiredAt(atExpiry.id)).toEqual(new Date(REFERENCE_INSTANT.getTime() + MS_PER_DAY));
    // At expired_at itself the hold is still good: the capture is made.
    ctx.clock.set(await expiredAt(atExpiry.id));
    expect(await op('charges.capture', { id: atExpiry.id })).toMatchObject({ captured: true, amount: 1000, amount_refunded: 0 });
    // One millisecond after it, the capture is refused.
    ctx.clock.set(new Date((await expiredAt(after.id)).getTime() + 1));
    await expectRefused('capture after expiry', () => op('charges.capture', { id: after.id }), 'charge_expired', 'id', snapshot);
    ctx.clock.set(REFERENCE_INSTANT);
  });

  it('a refunded (cancelled) hold cannot be captured; a failed charge is failed_payment', async () => {
    const held = await charge({ capture: false });
    await op('charges.refund', { id: held.id });
    await expectRefused('capture after cancel', () => op('charges.capture', { id: held.id }), 'cant_capture_refunded_charge', 'id', snapshot);
    const error = await rejection(op('charges.create', { amount: 1000, currency: 'jpy', card: await token(TEST_CARDS.declinesOnCharge.number), capture: false }));
    await expectRefused('capture a failed charge', () => op('charges.capture', { id: error.charge }), 'failed_payment', 'id', snapshot);
  });
});

describe('charges.refund', () => {
  it('"refund within 180 days: refunded=true (full); amount_refunded set; event charge.refunded", one refunds row', async () => {
    const paid = await charge();
    const refunded = await op('charges.refund', { id: paid.id, refund_reason: 'customer request' });
    expect(refunded).toMatchObject({ refunded: true, amount_refunded: 1000, refund_reason: 'customer request' });
    const rows = await ctx.db.selectFrom('refunds').selectAll().where('charge_id', '=', paid.id).execute();
    expect(rows.map((r) => [r.amount, r.reason, r.created_at])).toEqual([[1000, 'customer request', ctx.clock.now()]]);
    expect(await eventsOf(paid.id)).toEqual(['charge.succeeded', 'charge.refunded']);
    await expectRefused('refund again', () => op('charges.refund', { id: paid.id }), 'already_refunded', 'id', snapshot);
  });

  it('partial refunds add up; above what is left is refund_amount_gt_net; the last one makes refunded=true', async () => {
    const paid = await charge();
    expect(await op('charges.refund', { id: paid.id, amount: 300 })).toMatchObject({ refunded: false, amount_refunded: 300 });
    await expectRefused('above the rest', () => op('charges.refund', { id: paid.id, amount: 701 }), 'refund_amount_gt_net', 'amount', snapshot);
    expect(await op('charges.refund', { id: paid.id })).toMatchObject({ refunded: true, amount_refunded: 1000 });
    const rows = await ctx.db.selectFrom('refunds').select('amount').where('charge_id', '=', paid.id).orderBy('created_at').orderBy('amount').execute();
    expect(rows.map((r) => r.amount).sort()).toEqual([300, 700]);
  });

  it('after a smaller capture only the captured amount can be refunded', async () => {
    const held = await charge({ capture: false });
    await op('charges.capture', { id: held.id, amount: 600 });
    await expectRefused('more than captured', () => op('charges.refund', { id: held.id, amount: 601 }), 'refund_amount_gt_net', 'amount', snapshot);
    expect(await op('charges.refund', { id: held.id })).toMatchObject({ refunded: true, amount_refunded: 1000 });
    const rows = await ctx.db.selectFrom('refunds').select('amount').where('charge_id', '=', held.id).execute();
    expect(rows.map((r) => r.amount)).toEqual([600]);
  });

  it('"an uncaptured charge can only be cancelled whole": refund with a smaller amount is refused; a whole refund releases the hold without a refunds row', async () => {
    const held = await charge({ capture: false });
    await expectRefused('partial refund of a hold', () => op('charges.refund', { id: held.id, amount: 500 }), 'invalid_amount_to_not_captured', 'amount', snapshot);
    const cancelled = await op('charges.refund', { id: held.id });
    expect(cancelled).toMatchObject({ captured: false, refunded: true, amount_refunded: 1000 });
    expect(await ctx.db.selectFrom('refunds').select('refund_id').where('charge_id', '=', held.id).execute()).toEqual([]);
    expect(await eventsOf(held.id)).toEqual(['charge.succeeded', 'charge.refunded']);
  });

  it('"Refund window: 180 days from the sale" → refund_limit_exceeded; bad amount and reason are refused', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const paid = await charge();
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 180 * MS_PER_DAY));
    await expectRefused('reason of 256 characters', () => op('charges.refund', { id: paid.id, refund_reason: 'r'.repeat(256) }), 'invalid_refund_reason', 'refund_reason', snapshot);
    await expectRefused('amount 0', () => op('charges.refund', { id: paid.id, amount: 0 }), 'invalid_refund_amount', 'amount', snapshot);
    expect(await op('charges.refund', { id: paid.id, amount: 1 })).toMatchObject({ amount_refunded: 1 });
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 180 * MS_PER_DAY + 1000));
    await expectRefused('day 181', () => op('charges.refund', { id: paid.id }), 'refund_limit_exceeded', 'id', snapshot);
    ctx.clock.set(REFERENCE_INSTANT);
  });
});

describe('charges.reauth', () => {
  it('"a separate hold is created; the earlier hold is not cancelled": new expired_at from the reauth instant, attempt recorded', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const released: string[] = [];
    const release = ctx.processor.release.bind(ctx.processor);
    const watching = { ...ctx, processor: { ...ctx.processor, release: async (r: Parameters<typeof release>[0]) => (released.push(...r.map((x) => x.reference)), release(r)) } };
    const held = await charge({ capture: false });
    const later = new Date(REFERENCE_INSTANT.getTime() + 2 * MS_PER_DAY);
    ctx.clock.set(later);
    const reauthed = (await runOperation(watching, caller, 'charges.reauth', { id: held.id, expiry_days: 10 })) as Charge;
    expect(reauthed).toMatchObject({ captured: false, paid: true, expired_at: seconds(later) + 10 * 86_400 });
    expect(released).toEqual([]);
    const attempts = await ctx.db.selectFrom('reauthorizations').selectAll().where('charge_id', '=', held.id).execute();
    expect(attempts).toMatchObject([{ scheduled: false, outcome: 'succeeded', previous_expired_at: new Date((held.expired_at ?? 0) * 1000), attempted_at: later }]);
    expect(await eventsOf(held.id)).toEqual(['charge.succeeded', 'charge.updated']);
    ctx.clock.set(REFERENCE_INSTANT);
  });

  it('"Reauth … can fail even for the same amount": the declined attempt is recorded, the charge is unchanged, 402', async () => {
    const held = await charge({ capture: false }, TEST_CARDS.reauthFails.number);
    const error = await rejection(op('charges.reauth', { id: held.id }));
    expect([error.code, error.status, error.charge]).toEqual(['card_declined', 402, held.id]);
    expect(await op('charges.retrieve', { id: held.id })).toEqual(held);
    const attempts = await ctx.db.selectFrom('reauthorizations').select(['outcome', 'failure_code']).where('charge_id', '=', held.id).execute();
    expect(attempts).toEqual([{ outcome: 'failed', failure_code: 'card_declined' }]);
  });

  it('refused for refunded charges (cant_reauth_refunded_charge) and captured ones', async () => {
    const held = await charge({ capture: false });
    await op('charges.refund', { id: held.id });
    await expectRefused('reauth of a refunded hold', () => op('charges.reauth', { id: held.id }), 'cant_reauth_refunded_charge', 'id', snapshot);
    const paid = await charge();
    await expectRefused('reauth of a captured charge', () => op('charges.reauth', { id: paid.id }), 'already_captured', 'id', snapshot);
    const other = await charge({ capture: false });
    await expectRefused('expiry_days 61', () => op('charges.reauth', { id: other.id, expiry_days: 61 }), 'invalid_expiry_days', 'expiry_days', snapshot);
  });
});

describe('3-D Secure (v1 §3.1, §4.3)', () => {
  it('"three_d_secure=true: paid=false, captured=false, captured_at=null, expired_at=null, three_d_secure_status=unverified … forced regardless of other parameters"', async () => {
    const pending = await charge({ three_d_secure: true, capture: false, expiry_days: 3 });
    expect(pending).toMatchObject({ paid: false, captured: false, captured_at: null, expired_at: null, three_d_secure_status: 'unverified' });
    expect(await eventsOf(pending.id)).toEqual([]);
    await expectRefused('tds_finish while unverified', () => op('charges.tds_finish', { id: pending.id }), 'three_d_secure_incompleted', 'id', snapshot);
    await expectRefused('capture while pending', () => op('charges.capture', { id: pending.id }), 'three_d_secure_incompleted', 'id', snapshot);
    await expectRefused('refund while pending', () => op('charges.refund', { id: pending.id }), 'three_d_secure_incompleted', 'id', snapshot);
  });

  it('"tds_finish … capture, captured_at, expired_at take the values requested at creation; times are based on the tds_finish request time"', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const pending = await charge({ three_d_secure: true, capture: false, expiry_days: 3 }, TEST_CARDS.threeDSecureRequired.number);
    const authenticated = await op('charges.tds_authenticate', { id: pending.id }, publicCaller);
    expect(authenticated.three_d_secure_status).toBe('verified');
    const finishAt = new Date(REFERENCE_INSTANT.getTime() + 10 * 60_000);
    ctx.clock.set(finishAt);
    const finished = await op('charges.tds_finish', { id: pending.id });
    expect(finished).toMatchObject({ paid: true, captured: false, captured_at: null, expired_at: seconds(finishAt) + 3 * 86_400, three_d_secure_status: 'verified' });
    expect(await eventsOf(pending.id)).toEqual(['charge.succeeded']);
    await expectRefused('tds_finish twice', () => op('charges.tds_finish', { id: pending.id }), 'invalid_three_d_secure_state', 'id', snapshot);

    const capturing = await charge({ three_d_secure: true }, TEST_CARDS.threeDSecureAttempted.number);
    expect((await op('charges.tds_authenticate', { id: capturing.id })).three_d_secure_status).toBe('attempted');
    const later = new Date(finishAt.getTime() + 60_000);
    ctx.clock.set(later);
    expect(await op('charges.tds_finish', { id: capturing.id })).toMatchObject({ paid: true, captured: true, captured_at: seconds(later), three_d_secure_status: 'attempted' });
    ctx.clock.set(REFERENCE_INSTANT);
  });

  it('"a pending charge can be finished for 30 minutes after creation; after that tds_finish fails (three_d_secure_expired)"', async () => {
    ctx.clock.set(REFERENCE_INSTANT);
    const pending = await charge({ three_d_secure: true });
    await op('charges.tds_authenticate', { id: pending.id });
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 30 * 60_000 + 1000));
    await expectRefused('after 30 minutes', () => op('charges.tds_finish', { id: pending.id }), 'three_d_secure_expired', 'id', snapshot);
    ctx.clock.set(new Date(REFERENCE_INSTANT.getTime() + 30 * 60_000));
    expect(await op('charges.tds_finish', { id: pending.id })).toMatchObject({ paid: true, captured: true });
    ctx.clock.set(REFERENCE_INSTANT);
  });

  it('"tds_finish is rejected unless three_d_secure_status is verified or attempted"; a charge without 3-D Secure is not_in_three_d_secure_flow', async () => {
    const failed = await charge({ three_d_secure: true }, TEST_CARDS.threeDSecureFailed.number);
    expect((await op('charges.tds_authenticate', { id: failed.id })).three_d_secure_status).toBe('failed');
    const error = await expectRefused('failed authentication', () => op('charges.tds_finish', { id: failed.id }), 'three_d_secure_failed', 'id', snapshot);
    expect(error.status).toBe(402);
    const errored = await charge({ three_d_secure: true }, TEST_CARDS.threeDSecureError.number);
    await op('charges.tds_authenticate', { id: errored.id });
    await expectRefused('authentication error', () => op('charges.tds_finish', { id: errored.id }), 'three_d_secure_failed', 'id', snapshot);
    await expectRefused('authenticate twice', () => op('charges.tds_authenticate', { id: errored.id }), 'invalid_three_d_secure_state', 'id', snapshot);
    const plain = await charge();
    await expectRefused('not a 3-D Secure charge', () => op('charges.tds_finish', { id: plain.id }), 'not_in_three_d_secure_flow', 'id', snapshot);
  });

  it('"a declined card gives a 402 error" at tds_finish; the failed charge is kept', async () => {
    const pending = await charge({ three_d_secure: true }, TEST_CARDS.declinesOnCharge.number);
    await op('charges.tds_authenticate', { id: pending.id });
    const error = await rejection(op('charges.tds_finish', { id: pending.id }));
    expect([error.code, error.status, error.charge]).toEqual(['card_declined', 402, pending.id]);
    expect(await op('charges.retrieve', { id: pending.id })).toMatchObject({ paid: false, failure_code: 'card_declined' });
    expect(await eventsOf(pending.id)).toEqual(['charge.failed']);
  });
});
