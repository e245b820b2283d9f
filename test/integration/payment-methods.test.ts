import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import type { CustomerObject } from '../../src/customers/customers';
import { decodeCreateToken } from '../../src/api/v1/tokens';
import { createToken } from '../../src/customers/tokens';
import type { Database } from '../../src/db/schema';
import { listEvents } from '../../src/events/outbox';
import type { V2CustomerObject } from '../../src/customers/customer-record';
import type { V2List } from '../../src/operations/v2-pagination';
import type { PaymentMethodObject } from '../../src/payment-methods/payment-methods';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';
import { v1Operation, v2Operation } from '../support/operations';
import { expectRefused, rejection as rejectionOf } from '../support/rejections';

const createCustomer = v1Operation<CustomerObject>('customers.create');
const retrieveCustomer = v1Operation<CustomerObject>('customers.retrieve');
const updateCustomer = v1Operation<CustomerObject>('customers.update');
const createPaymentMethod = v2Operation<PaymentMethodObject>('payment_methods.create');
const retrievePaymentMethod = v2Operation<PaymentMethodObject>('payment_methods.retrieve');
const updatePaymentMethod = v2Operation<PaymentMethodObject>('payment_methods.update');
const attachPaymentMethod = v2Operation<PaymentMethodObject>('payment_methods.attach');
const detachPaymentMethod = v2Operation<PaymentMethodObject>('payment_methods.detach');
const retrievePaymentMethodByCard = v2Operation<PaymentMethodObject>('payment_methods.retrieve_by_card');
const listPaymentMethods = v2Operation<V2List<PaymentMethodObject>>('payment_methods.list');
const listCustomerPaymentMethods = v2Operation<V2List<PaymentMethodObject>>('customers.list_payment_methods');
const updateV2Customer = v2Operation<V2CustomerObject>('v2.customers.update');

const ACCOUNT = 'acct_v2methods';
const secret: Caller = { accountId: ACCOUNT, livemode: false, kind: 'secret' };
const live: Caller = { accountId: ACCOUNT, livemode: true, kind: 'secret' };

let database: TestDatabase;
let db: Kysely<Database>;
let ctx: ReturnType<typeof testContext>;

beforeAll(async () => {
  database = await createTestDatabase();
  db = database.store.db;
  await createAccount(testContext(database.store), { name: 'Method Shop', id: ACCOUNT, liveEnabled: true });
});
afterAll(async () => database?.drop());
beforeEach(async () => {
  await sql`TRUNCATE payment_methods, customers, cards, tokens, events`.execute(db);
  ctx = testContext(database.store, { seed: 21 });
});

const visa = { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: 2030, cvc: '123' };
const billing = { name: 'Taro Yamada', email: 'taro@example.test' };
const snapshot = async () => ({
  methods: await db.selectFrom('payment_methods').selectAll().orderBy('payment_method_id').execute(),
  events: (await db.selectFrom('events').select(({ fn }) => fn.countAll().as('n')).executeTakeFirstOrThrow()).n,
});
const eventTypes = async (id: string) => (await listEvents(db, ACCOUNT, { resourceId: id })).map((event) => event.type);

describe('payment methods (v2)', () => {
  it('creates a card method from raw card data in test mode, keeping only what the network answered', async () => {
    const method = await createPaymentMethod(ctx, secret, { type: 'card', card: visa, billing_details: billing, metadata: { a: 1 } });
    expect(method).toMatchObject({
      object: 'payment_method',
      type: 'card',
      customer_id: null,
      livemode: false,
      billing_details: { name: 'Taro Yamada', email: 'taro@example.test', phone: null, address: null },
      card: { brand: 'Visa', last4: '4242', exp_month: 12, exp_year: 2030, funding: 'credit' },
      metadata: { a: 1 },
      detached_at: null,
    });
    expect(method.id).toMatch(/^pm_/);
    expect(JSON.stringify(await db.selectFrom('payment_methods').selectAll().execute())).not.toContain(TEST_CARDS.visa.number);
    expect(await retrievePaymentMethod(ctx, secret, { id: method.id })).toEqual(method);
    // v2 §6.1 has no payment_method.created; nothing was attached.
    expect(await eventTypes(method.id)).toEqual([]);
  });

  it('attaches, detaches, updates, each with its event; a detached method is spent', async () => {
    const customer = await createCustomer(ctx, secret, { email: 'c@example.test' });
    const other = await createCustomer(ctx, secret, {});
    const method = await createPaymentMethod(ctx, secret, { type: 'card', card: visa, billing_details: billing });
    const attached = await attachPaymentMethod(ctx, secret, { id: method.id, customer_id: customer.id });
    expect(attached.customer_id).toBe(customer.id);
    await expectRefused('attached twice', () => attachPaymentMethod(ctx, secret, { id: method.id, customer_id: customer.id }), 'payment_method_already_attached', 'customer_id', snapshot);
    await expectRefused('another customer', () => attachPaymentMethod(ctx, secret, { id: method.id, customer_id: other.id }), 'payment_method_customer_mismatch', 'customer_id', snapshot);
    const updated = await updatePaymentMethod(ctx, secret, { id: method.id, billing_details: { phone: '+819012345678', email: '' }, metadata: { k: 'v' } });
    expect(updated.billing_details).toEqual({ name: 'Taro Yamada', email: null, phone: '+819012345678', address: null });
    expect((await listCustomerPaymentMethods(ctx, secret, { id: customer.id })).data.map((m) => m.id)).toEqual([method.id]);
    const detached = await detachPaymentMethod(ctx, secret, { id: method.id });
    expect([detached.customer_id, detached.detached_at]).toEqual([null, '2027-01-01T00:00:00Z']);
    await expectRefused('detached twice', () => detachPaymentMethod(ctx, secret, { id: method.id }), 'payment_method_already_detached', 'id', snapshot);
    await expectRefused('reattach', () => attachPaymentMethod(ctx, secret, { id: method.id, customer_id: customer.id }), 'payment_method_already_detached', 'id', snapshot);
    expect(await eventTypes(method.id)).toEqual(['payment_method.attached', 'payment_method.updated', 'payment_method.detached']);
    const loose = await createPaymentMethod(ctx, secret, { type: 'paypay' });
    await expectRefused('never attached', () => detachPaymentMethod(ctx, secret, { id: loose.id }), 'payment_method_unattached', 'id', snapshot);
    expect((await listPaymentMethods(ctx, secret, { type: 'paypay' })).data.map((m) => m.id)).toEqual([loose.id]);
  });

  it('create attaches at once with customer_id; refuses live mode and bad input, changing nothing', async () => {
    const customer = await createCustomer(ctx, secret, {});
    const method = await createPaymentMethod(ctx, secret, { type: 'card', card: visa, billing_details: billing, customer_id: customer.id });
    expect(await eventTypes(method.id)).toEqual(['payment_method.attached']);
    await expectRefused('live', () => createPaymentMethod(ctx, live, { type: 'card', card: visa, billing_details: billing }), 'no_allowed_param', 'type', snapshot);
    await expectRefused('no type', () => createPaymentMethod(ctx, secret, { card: visa }), 'missing_param', 'type', snapshot);
    await expectRefused('apple pay', () => createPaymentMethod(ctx, secret, { type: 'apple_pay' }), 'invalid_param_key', 'type', snapshot);
    await expectRefused('no card', () => createPaymentMethod(ctx, secret, { type: 'card', billing_details: billing }), 'missing_param', 'card', snapshot);
    await expectRefused('no contact', () => createPaymentMethod(ctx, secret, { type: 'card', card: visa, billing_details: { name: 'x' } }), 'missing_param', 'billing_details[email]', snapshot);
    await expectRefused('bad number', () => createPaymentMethod(ctx, secret, { type: 'card', card: { ...visa, number: '4242424242424241' }, billing_details: billing }), 'invalid_number', 'card[number]', snapshot);
    await expectRefused('declined card', () => createPaymentMethod(ctx, secret, { type: 'card', card: { ...visa, number: TEST_CARDS.declined.number }, billing_details: billing }), 'card_declined', undefined, snapshot);
    await expectRefused('unknown customer', () => createPaymentMethod(ctx, secret, { type: 'paypay', customer_id: 'cus_nope' }), 'invalid_id', 'customer_id', snapshot);
    await expectRefused('bad email', () => createPaymentMethod(ctx, secret, { type: 'card', card: visa, billing_details: { email: 'nope' } }), 'invalid_email', 'billing_details[email]', snapshot);
    await expectRefused('other mode', () => retrievePaymentMethod(ctx, live, { id: method.id }), 'invalid_id', 'id', snapshot);
  });

  it('looks up the payment method of a v1 card: made once, attached to the card’s customer, the same on every lookup', async () => {
    const tok = await createToken(ctx, { ...secret, kind: 'public' }, decodeCreateToken({ card: visa }));
    const customer = await createCustomer(ctx, secret, { card: tok.id });
    const first = await retrievePaymentMethodByCard(ctx, secret, { card_id: customer.default_card! });
    expect(first).toMatchObject({ type: 'card', customer_id: customer.id, card: { brand: 'Visa', last4: '4242' } });
    expect(first.id).toBe(`pm_${customer.default_card!.slice('car_'.length)}`);
    expect(await retrievePaymentMethodByCard(ctx, secret, { card_id: customer.default_card! })).toEqual(first);
    await expectRefused('unknown card', () => retrievePaymentMethodByCard(ctx, secret, { card_id: 'car_nope' }), 'invalid_id', 'card_id', snapshot);
  });
});

describe('v2 customers update (v2 §4.6)', () => {
  const customerSnapshot = async () => ({ ...(await snapshot()), customers: await db.selectFrom('customers').selectAll().orderBy('customer_id').execute() });

  it('merges metadata under v2 rules, sets the default payment method, writes a v2 customer.updated; v1 update keeps v1 rules', async () => {
    const customer = await createCustomer(ctx, secret, { metadata: { plan: 'gold', keep: 'yes' } });
    const method = await createPaymentMethod(ctx, secret, { type: 'card', card: visa, billing_details: billing, customer_id: customer.id });
    ctx.clock.set(new Date(ctx.clock.now().getTime() + 60_000));
    const updated = await updateV2Customer(ctx, secret, { id: customer.id, metadata: { plan: '', visits: 3, vip: true }, default_payment_method_id: method.id, email: 'new@example.test' });
    expect(updated).toEqual({
      id: customer.id,
      object: 'customer',
      livemode: false,
      email: 'new@example.test',
      description: null,
      default_payment_method_id: method.id,
      metadata: { keep: 'yes', visits: 3, vip: true },
      test_clock: null,
      created_at: '2027-01-01T00:00:00Z',
      updated_at: '2027-01-01T00:01:00Z',
    });
    const events = await listEvents(db, ACCOUNT, { resourceId: customer.id, type: 'customer.updated' });
    expect(events.map((e) => [e.apiVersion, e.data])).toEqual([['v2', updated]]);
    expect((await retrieveCustomer(ctx, secret, { id: customer.id })).metadata).toEqual({ keep: 'yes', visits: 3, vip: true });
    // v1 customers.update still takes strings only (v1 §2.10).
    expect((await rejectionOf(updateCustomer(ctx, secret, { id: customer.id, metadata: { n: 1 } }))).code).toBe('invalid_metadata_value');
    expect((await updateV2Customer(ctx, secret, { id: customer.id, default_payment_method_id: '' })).default_payment_method_id).toBeNull();
  });

  it('refuses a method of another customer, a detached one, bad metadata, changing nothing', async () => {
    const customer = await createCustomer(ctx, secret, {});
    const other = await createCustomer(ctx, secret, {});
    const theirs = await createPaymentMethod(ctx, secret, { type: 'paypay', customer_id: other.id });
    const spent = await createPaymentMethod(ctx, secret, { type: 'paypay', customer_id: customer.id });
    await detachPaymentMethod(ctx, secret, { id: spent.id });
    await expectRefused('another customer', () => updateV2Customer(ctx, secret, { id: customer.id, default_payment_method_id: theirs.id }), 'payment_method_unattached', 'default_payment_method_id', customerSnapshot);
    await expectRefused('detached', () => updateV2Customer(ctx, secret, { id: customer.id, default_payment_method_id: spent.id }), 'payment_method_already_detached', 'default_payment_method_id', customerSnapshot);
    await expectRefused('unknown method', () => updateV2Customer(ctx, secret, { id: customer.id, default_payment_method_id: 'pm_nope' }), 'invalid_id', 'default_payment_method_id', customerSnapshot);
    await expectRefused('nested metadata', () => updateV2Customer(ctx, secret, { id: customer.id, metadata: { a: { b: 1 } } }), 'invalid_metadata_value', 'metadata[a]', customerSnapshot);
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, i]));
    await expectRefused('21 keys', () => updateV2Customer(ctx, secret, { id: customer.id, metadata: many }), 'too_many_metadata_keys', 'metadata', customerSnapshot);
    await expectRefused('unknown customer', () => updateV2Customer(ctx, secret, { id: 'cus_nope', metadata: {} }), 'invalid_id', 'id', customerSnapshot);
  });
});
