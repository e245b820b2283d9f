import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import type { Database } from '../../src/db/schema';
import { listEvents } from '../../src/events/outbox';
import { runOperation } from '../../src/api/operations';
import type { PriceObject } from '../../src/prices/prices';
import type { ProductObject } from '../../src/products/products';
import type { TaxRateObject } from '../../src/tax-rates/tax-rates';
import type { V2List } from '../../src/operations/v2-pagination';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';
import { v2Operation } from '../support/operations';
import { expectRefused } from '../support/rejections';

const ACCOUNT = 'acct_catalogue';
const secret: Caller = { accountId: ACCOUNT, livemode: false, kind: 'secret' };
const live: Caller = { accountId: ACCOUNT, livemode: true, kind: 'secret' };

// Through their operations: the v2 codec reads the parameters, the feature executes.
const operation = v2Operation;
const createProduct = operation<ProductObject>('products.create');
const retrieveProduct = operation<ProductObject>('products.retrieve');
const updateProduct = operation<ProductObject>('products.update');
const deleteProduct = operation<{ id: string; object: 'product'; deleted: true; livemode: boolean }>('products.delete');
const listProducts = operation<V2List<ProductObject>>('products.list');
const createPrice = operation<PriceObject>('prices.create');
const retrievePrice = operation<PriceObject>('prices.retrieve');
const updatePrice = operation<PriceObject>('prices.update');
const listPrices = operation<V2List<PriceObject>>('prices.list');
const createTaxRate = operation<TaxRateObject>('tax_rates.create');
const retrieveTaxRate = operation<TaxRateObject>('tax_rates.retrieve');
const updateTaxRate = operation<TaxRateObject>('tax_rates.update');
const listTaxRates = operation<V2List<TaxRateObject>>('tax_rates.list');

let database: TestDatabase;
let db: Kysely<Database>;
let ctx: ReturnType<typeof testContext>;

beforeAll(async () => {
  database = await createTestDatabase();
  db = database.store.db;
  await createAccount(testContext(database.store), { name: 'Catalogue Shop', id: ACCOUNT, liveEnabled: true });
});
afterAll(async () => database?.drop());
beforeEach(async () => {
  await sql`TRUNCATE products, prices, tax_rates, events`.execute(db);
  ctx = testContext(database.store, { seed: 3 });
});

const snapshot = async () => ({
  products: await db.selectFrom('products').selectAll().orderBy('product_id').execute(),
  prices: await db.selectFrom('prices').selectAll().orderBy('price_id').execute(),
  taxRates: await db.selectFrom('tax_rates').selectAll().orderBy('tax_rate_id').execute(),
  events: (await db.selectFrom('events').select(({ fn }) => fn.countAll().as('n')).executeTakeFirstOrThrow()).n,
});
const eventTypes = async (id: string) => (await listEvents(db, ACCOUNT, { resourceId: id })).map((event) => event.type);
const tick = () => ctx.clock.set(new Date(ctx.clock.now().getTime() + 1000));

describe('products (v2)', () => {
  it('creates, retrieves, updates and lists, each change with its event', async () => {
    const tea = await createProduct(ctx, secret, { name: 'Green tea', description: '100 g', unit_label: 'bag', url: 'https://shop.test/tea', metadata: { sku: 'T-1' } });
    expect(tea).toMatchObject({ object: 'product', name: 'Green tea', active: true, description: '100 g', unit_label: 'bag', url: 'https://shop.test/tea', default_price_id: null, metadata: { sku: 'T-1' }, livemode: false });
    expect(tea.id).toMatch(/^prod_/);
    expect(await retrieveProduct(ctx, secret, { id: tea.id })).toEqual(tea);
    tick();
    const own = await createProduct(ctx, secret, { id: 'cup-01', name: 'Cup', active: false });
    expect([own.id, own.active]).toEqual(['cup-01', false]);
    const price = await createPrice(ctx, secret, { product_id: tea.id, unit_amount: 1200, currency: 'jpy' });
    const updated = await updateProduct(ctx, secret, { id: tea.id, name: 'Sencha', description: '', default_price_id: price.id, metadata: { sku: '', lot: 7 } });
    expect(updated).toMatchObject({ name: 'Sencha', description: null, unit_label: 'bag', default_price_id: price.id, metadata: { lot: 7 } });
    expect(await eventTypes(tea.id)).toEqual(['product.created', 'product.updated']);
    expect((await listProducts(ctx, secret, {})).data.map((p) => p.id)).toEqual(['cup-01', tea.id]);
    expect((await listProducts(ctx, secret, { active: true })).data.map((p) => p.id)).toEqual([tea.id]);
    expect((await listProducts(ctx, secret, { limit: 1, starting_after: 'cup-01' })).data.map((p) => p.id)).toEqual([tea.id]);
    expect((await listProducts(ctx, secret, { ending_before: tea.id })).data.map((p) => p.id)).toEqual(['cup-01']);
    expect((await listProducts(ctx, live, {})).data).toEqual([]);
  });

  it('deletes a product without prices (product.deleted); refuses one with prices and every bad input, changing nothing', async () => {
    const bare = await createProduct(ctx, secret, { name: 'Sample' });
    expect(await deleteProduct(ctx, secret, { id: bare.id })).toEqual({ id: bare.id, object: 'product', deleted: true, livemode: false });
    expect(await eventTypes(bare.id)).toEqual(['product.created', 'product.deleted']);
    const tea = await createProduct(ctx, secret, { id: 'tea', name: 'Tea' });
    const other = await createProduct(ctx, secret, { name: 'Other' });
    const otherPrice = await createPrice(ctx, secret, { product_id: other.id, unit_amount: 100 });
    const inactive = await createPrice(ctx, secret, { product_id: tea.id, unit_amount: 100, active: false });
    await expectRefused('has prices', () => deleteProduct(ctx, secret, { id: tea.id }), 'product_has_prices', 'id', snapshot);
    await expectRefused('gone', () => retrieveProduct(ctx, secret, { id: bare.id }), 'invalid_id', 'id', snapshot);
    await expectRefused('no name', () => createProduct(ctx, secret, {}), 'missing_param', 'name', snapshot);
    await expectRefused('taken id', () => createProduct(ctx, secret, { id: 'tea', name: 'Again' }), 'already_exist_id', 'id', snapshot);
    await expectRefused('bad id', () => createProduct(ctx, secret, { id: 'tea leaf', name: 'x' }), 'invalid_flexible_id', 'id', snapshot);
    await expectRefused('bad url', () => createProduct(ctx, secret, { name: 'x', url: 'ftp://x' }), 'invalid_param_key', 'url', snapshot);
    await expectRefused('long label', () => createProduct(ctx, secret, { name: 'x', unit_label: 'a'.repeat(13) }), 'invalid_string_length', 'unit_label', snapshot);
    await expectRefused('price of another product', () => updateProduct(ctx, secret, { id: tea.id, default_price_id: otherPrice.id }), 'invalid_default_price', 'default_price_id', snapshot);
    await expectRefused('inactive price', () => updateProduct(ctx, secret, { id: tea.id, default_price_id: inactive.id }), 'invalid_default_price', 'default_price_id', snapshot);
    await expectRefused('empty name', () => updateProduct(ctx, secret, { id: tea.id, name: '' }), 'missing_param', 'name', snapshot);
    await expectRefused('metadata', () => updateProduct(ctx, secret, { id: tea.id, metadata: { k: { nested: 1 } } }), 'invalid_metadata_value', 'metadata[k]', snapshot);
    await expectRefused('other mode', () => deleteProduct(ctx, live, { id: tea.id }), 'invalid_id', 'id', snapshot);
  });
});

describe('prices (v2)', () => {
  it('creates with a product, updates (price.updated), lists by product and active; the amount never changes', async () => {
    const tea = await createProduct(ctx, secret, { name: 'Tea' });
    const bare = await createPrice(ctx, secret, { unit_amount: 500 });
    tick();
    const price = await createPrice(ctx, secret, { product_id: tea.id, unit_amount: 1200, nickname: 'Standard', lookup_key: 'tea_std', metadata: { a: 1 } });
    expect(price).toMatchObject({ object: 'price', product_id: tea.id, type: 'one_time', unit_amount: 1200, currency: 'jpy', active: true, nickname: 'Standard', lookup_key: 'tea_std', metadata: { a: 1 } });
    expect(bare.product_id).toBeNull();
    tick();
    const updated = await updatePrice(ctx, secret, { id: price.id, active: false, nickname: '', metadata: { b: 'x' } });
    expect(updated).toMatchObject({ active: false, nickname: null, lookup_key: 'tea_std', unit_amount: 1200, metadata: { a: 1, b: 'x' }, updated_at: '2027-01-01T00:00:02Z' });
    expect(await retrievePrice(ctx, secret, { id: price.id })).toEqual(updated);
    expect(await eventTypes(price.id)).toEqual(['price.created', 'price.updated']);
    expect((await listPrices(ctx, secret, {})).data.map((p) => p.id)).toEqual([price.id, bare.id]);
    expect((await listPrices(ctx, secret, { product_id: tea.id })).data.map((p) => p.id)).toEqual([price.id]);
    expect((await listPrices(ctx, secret, { active: true })).data.map((p) => p.id)).toEqual([bare.id]);
    expect((await listPrices(ctx, secret, { starting_after: price.id })).data.map((p) => p.id)).toEqual([bare.id]);
    await expectRefused('unknown product', () => createPrice(ctx, secret, { product_id: 'prod_nope', unit_amount: 1 }), 'invalid_id', 'product_id', snapshot);
    await expectRefused('amount is fixed', () => updatePrice(ctx, secret, { id: price.id, unit_amount: 1 }), 'invalid_param_key', 'unit_amount', snapshot);
    await expectRefused('unknown price', () => updatePrice(ctx, secret, { id: 'price_nope', active: true }), 'invalid_id', 'id', snapshot);
    await expectRefused('unknown cursor', () => listPrices(ctx, secret, { ending_before: 'price_nope' }), 'invalid_id', 'ending_before', snapshot);
    await expectRefused('both cursors', () => listPrices(ctx, secret, { ending_before: price.id, starting_after: bare.id }), 'invalid_querystring', 'ending_before', snapshot);
  });
});

describe('tax rates (v2)', () => {
  it('creates, retrieves, updates and lists; percentage is exact decimal text and fixed', async () => {
    const standard = await createTaxRate(ctx, secret, { display_name: '消費税', percentage: '10', inclusive: true, country: 'JP', metadata: { kind: 'standard' } });
    expect(standard).toMatchObject({ object: 'tax_rate', display_name: '消費税', percentage: '10.0000', inclusive: true, active: true, country: 'JP', description: null, metadata: { kind: 'standard' } });
    expect(standard.id).toMatch(/^txr_/);
    tick();
    const reduced = await createTaxRate(ctx, secret, { display_name: '軽減税率', percentage: 8, inclusive: false });
    expect(reduced.percentage).toBe('8.0000');
    const updated = await updateTaxRate(ctx, secret, { id: standard.id, active: false, description: '標準税率', metadata: { kind: '' } });
    expect(updated).toMatchObject({ active: false, description: '標準税率', percentage: '10.0000', metadata: {} });
    expect(await retrieveTaxRate(ctx, secret, { id: standard.id })).toEqual(updated);
    expect(await eventTypes(standard.id)).toEqual(['tax_rate.created', 'tax_rate.updated']);
    expect((await listTaxRates(ctx, secret, {})).data.map((t) => t.id)).toEqual([reduced.id, standard.id]);
    expect((await listTaxRates(ctx, secret, { active: false })).data.map((t) => t.id)).toEqual([standard.id]);
    await expectRefused('no name', () => createTaxRate(ctx, secret, { percentage: '10', inclusive: true }), 'missing_param', 'display_name', snapshot);
    await expectRefused('no percentage', () => createTaxRate(ctx, secret, { display_name: 'x', inclusive: true }), 'missing_param', 'percentage', snapshot);
    await expectRefused('over 100', () => createTaxRate(ctx, secret, { display_name: 'x', percentage: '100.5', inclusive: true }), 'invalid_param_key', 'percentage', snapshot);
    await expectRefused('five decimals', () => createTaxRate(ctx, secret, { display_name: 'x', percentage: '8.12345', inclusive: true }), 'invalid_param_key', 'percentage', snapshot);
    await expectRefused('no inclusive', () => createTaxRate(ctx, secret, { display_name: 'x', percentage: '8' }), 'missing_param', 'inclusive', snapshot);
    await expectRefused('country', () => createTaxRate(ctx, secret, { display_name: 'x', percentage: '8', inclusive: true, country: 'jp' }), 'invalid_country', 'country', snapshot);
    await expectRefused('percentage is fixed', () => updateTaxRate(ctx, secret, { id: standard.id, percentage: '8' }), 'invalid_param_key', 'percentage', snapshot);
    await expectRefused('other mode', () => retrieveTaxRate(ctx, live, { id: standard.id }), 'invalid_id', 'id', snapshot);
  });

  it('is reachable through the one registry', async () => {
    const rate = (await runOperation(ctx, secret, 'tax_rates.create', { display_name: 'VAT', percentage: '10', inclusive: false })) as { id: string };
    expect(((await runOperation(ctx, secret, 'tax_rates.list', {})) as { data: { id: string }[] }).data.map((t) => t.id)).toEqual([rate.id]);
  });
});
