import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { termCloseJob } from '../../jobs/term-close';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { decodeCreateToken } from '../../src/api/v1/tokens';
import { createToken } from '../../src/customers/tokens';
import type { Database } from '../../src/db/schema';
import { listEvents } from '../../src/events/outbox';
import { Scheduler } from '../../src/engine/scheduler';
import { runOperation } from '../../src/api/operations';
import type { V2List } from '../../src/operations/v2-pagination';
import type { PaymentRefundObject } from '../../src/payment-refunds/payment-refunds';
import { TEST_CARDS, type TestCardName } from '../../src/processor/test-cards';
import { simulatedCardNetwork, type CardNetwork } from '../../src/processor/card-network';
import { SQL_DIR } from '../../src/db/migrate';
import { NETWORK_CLAIM_LEASE_MS } from '../../src/domain/network-claims';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';
import { createPaymentFlow, confirmPaymentFlow, capturePaymentFlow } from '../support/payment-flows';
import { expectRefused, rejection } from '../support/rejections';

const ACCOUNT = 'acct_v2refunds';
const secret: Caller = { accountId: ACCOUNT, livemode: false, kind: 'secret' };
const browser: Caller = { accountId: ACCOUNT, livemode: false, kind: 'public' };
const live: Caller = { accountId: ACCOUNT, livemode: true, kind: 'secret' };
const DAY = 24 * 60 * 60 * 1000;

// Refunds through their operations: the v2 codec reads the parameters, the feature executes.
type Run<T> = (context: typeof ctx, caller: Caller, input: unknown) => Promise<T>;
const operation = <T>(name: string): Run<T> => (context, caller, input) => runOperation(context, caller, name, input) as Promise<T>;
const createPaymentRefund = operation<PaymentRefundObject>('payment_refunds.create');
const retrievePaymentRefund = operation<PaymentRefundObject>('payment_refunds.retrieve');
const updatePaymentRefund = operation<PaymentRefundObject>('payment_refunds.update');
const listPaymentRefunds = operation<V2List<PaymentRefundObject>>('payment_refunds.list');
const listPaymentFlowRefunds = operation<V2List<PaymentRefundObject>>('payment_flows.list_refunds');

let database: TestDatabase;
let db: Kysely<Database>;
let ctx: ReturnType<typeof testContext>;

beforeAll(async () => {
  database = await createTestDatabase();
  db = database.store.db;
  await createAccount(testContext(database.store), { name: 'Refund Shop', id: ACCOUNT, liveEnabled: true });
});
afterAll(async () => database?.drop());
beforeEach(async () => {
  await sql`TRUNCATE payment_flows, payment_refunds, refunds, charges, tokens, events, network_claims`.execute(db);
  ctx = testContext(database.store, { seed: 16 });
});

async function token(card: TestCardName = 'visa', caller: Caller = browser): Promise<string> {
  return (await createToken(ctx, { ...caller, kind: 'public' }, decodeCreateToken({ card: { number: TEST_CARDS[card].number, exp_month: 12, exp_year: 2030 } }))).id;
}

/** An automatic-capture flow paid by card: succeeded, one capture row. */
async function paidFlow(amount: number, caller: Caller = secret) {
  const flow = await createPaymentFlow(ctx, caller, { amount });
  return confirmPaymentFlow(ctx, caller, { id: flow.id, payment_method: await token('visa', caller) });
}

/** A manual-capture flow, held. */
async function heldFlow(amount: number) {
  const flow = await createPaymentFlow(ctx, secret, { amount, capture_method: 'manual' });
  return confirmPaymentFlow(ctx, secret, { id: flow.id, payment_method: await token() });
}

const snapshot = async () => ({
  refunds: await db.selectFrom('payment_refunds').selectAll().orderBy('payment_refund_id').execute(),
  rows: await db.selectFrom('refunds').selectAll().orderBy('refund_id').execute(),
  charges: await db.selectFrom('charges').select(['charge_id', 'amount_refunded', 'refunded']).orderBy('charge_id').execute(),
  events: (await db.selectFrom('events').select(({ fn }) => fn.countAll().as('n')).executeTakeFirstOrThrow()).n,
});
const eventTypes = async (id: string) => (await listEvents(db, ACCOUNT, { resourceId: id })).map((event) => event.type);

describe('payment_refunds.create', () => {
  it('refunds part, then the rest; each is a refunds row settled like a v1 refund, with refund.created', async () => {
    const flow = await paidFlow(10_000);
    const part = await createPaymentRefund(ctx, secret, { payment_flow_id: flow.id, amount: 3000, reason: 'requested_by_customer', metadata: { ticket: 'T-9', n: 2 } });
    expect(part).toMatchObject({ object: 'payment_refund', payment_flow_id: flow.id, amount: 3000, currency: 'jpy', status: 'succeeded', reason: 'requested_by_customer', metadata: { ticket: 'T-9', n: 2 }, livemode: false, created_at: '2027-01-01T00:00:00Z' });
    expect(part.id).toMatch(/^pyre_/);
    const rest = await createPaymentRefund(ctx, secret, { payment_flow_id: flow.id });
    expect(rest.amount).toBe(7000);
    const rows = await db.selectFrom('refunds').selectAll().orderBy('amount').execute();
    expect(rows.map((r) => [r.amount, r.payment_refund_id, r.refund_fee_offset, r.term_id !== null])).toEqual([
      // Visa 3.00 % by default: floor(3000 × 3 / 100), floor(7000 × 3 / 100).
      [3000, part.id, 90, true],
      [7000, rest.id, 210, true],
    ]);
    const [charge] = await db.selectFrom('charges').selectAll().where('payment_flow_id', '=', flow.id).execute();
    expect([charge!.amount_refunded, charge!.refunded]).toEqual([10_000, true]);
    expect(await eventTypes(part.id)).toEqual(['refund.created']);
    expect(await eventTypes(rest.id)).toEqual(['refund.created']);
    expect(await retrievePaymentRefund(ctx, secret, { id: part.id })).toEqual(part);
  });

  it('a refund spanning a partial capture and the remainder draws on the first capture first', async () => {
    const held = await heldFlow(10_000);
    await capturePaymentFlow(ctx, secret, { id: held.id, amount_to_capture: 4000 });
    ctx.clock.set(new Date(ctx.clock.now().getTime() + DAY));
    await capturePaymentFlow(ctx, secret, { id: held.id });
    const refund = await createPaymentRefund(ctx, secret, { payment_flow_id: held.id, amount: 5000 });
    const rows = await sql<{ capture: number; amount: number }>`
      SELECT c.payment_flow_capture AS capture, r.amount FROM refunds r JOIN charges c ON c.account_id = r.account_id AND c.charge_id = r.charge_id
      WHERE r.payment_refund_id = ${refund.id} ORDER BY c.payment_flow_capture`.execute(db);
    expect(rows.rows).toEqual([
      { capture: 1, amount: 4000 },
      { capture: 2, amount: 1000 },
    ]);
  });

  it('refuses with the catalogue code and parameter and changes nothing', async () => {
    const flow = await paidFlow(5000);
    const open = await createPaymentFlow(ctx, secret, { amount: 5000 });
    const held = await heldFlow(5000);
    await expectRefused('no flow', () => createPaymentRefund(ctx, secret, {}), 'missing_param', 'payment_flow_id', snapshot);
    await expectRefused('unknown flow', () => createPaymentRefund(ctx, secret, { payment_flow_id: 'pfw_nope' }), 'invalid_id', 'payment_flow_id', snapshot);
    await expectRefused('other mode', () => createPaymentRefund(ctx, live, { payment_flow_id: flow.id }), 'invalid_id', 'payment_flow_id', snapshot);
    await expectRefused('unpaid flow', () => createPaymentRefund(ctx, secret, { payment_flow_id: open.id }), 'invalid_status', 'payment_flow_id', snapshot);
    await expectRefused('held, not captured', () => createPaymentRefund(ctx, secret, { payment_flow_id: held.id }), 'invalid_status', 'payment_flow_id', snapshot);
    await expectRefused('zero', () => createPaymentRefund(ctx, secret, { payment_flow_id: flow.id, amount: 0 }), 'invalid_refund_amount', 'amount', snapshot);
    await expectRefused('above', () => createPaymentRefund(ctx, secret, { payment_flow_id: flow.id, amount: 5001 }), 'refund_amount_gt_net', 'amount', snapshot);
    await expectRefused('reason', () => createPaymentRefund(ctx, secret, { payment_flow_id: flow.id, reason: 'changed_mind' }), 'invalid_refund_reason', 'reason', snapshot);
    await expectRefused('metadata', () => createPaymentRefund(ctx, secret, { payment_flow_id: flow.id, metadata: { a: [1] } }), 'invalid_metadata_value', 'metadata[a]', snapshot);
    await expectRefused('unknown parameter', () => createPaymentRefund(ctx, secret, { payment_flow_id: flow.id, charge: 'ch_x' }), 'invalid_param_key', 'charge', snapshot);
    await createPaymentRefund(ctx, secret, { payment_flow_id: flow.id, amount: 4000 });
    await expectRefused('above what is left', () => createPaymentRefund(ctx, secret, { payment_flow_id: flow.id, amount: 1001 }), 'refund_amount_gt_net', 'amount', snapshot);
    await createPaymentRefund(ctx, secret, { payment_flow_id: flow.id });
    await expectRefused('refunded in full', () => createPaymentRefund(ctx, secret, { payment_flow_id: flow.id, amount: 1 }), 'already_refunded', 'payment_flow_id', snapshot);
  });

  it('"Refund window: 180 days from the sale": a refund at exactly 180 days is made, one a millisecond later is refused', async () => {
    const old = await paidFlow(5000);
    const { created_at: createdAt } = await db.selectFrom('payment_flows').select('created_at').where('payment_flow_id', '=', old.id).executeTakeFirstOrThrow();
    ctx.clock.set(new Date(createdAt.getTime() + 180 * DAY));
    expect(await createPaymentRefund(ctx, secret, { payment_flow_id: old.id, amount: 1 })).toMatchObject({ amount: 1 });
    ctx.clock.set(new Date(createdAt.getTime() + 180 * DAY + 1));
    await expectRefused('past 180 days', () => createPaymentRefund(ctx, secret, { payment_flow_id: old.id }), 'refund_limit_exceeded', 'payment_flow_id', snapshot);
  });

  it('two racing refunds of 70 % each: one succeeds, the other is refused, never above the captured amount', async () => {
    const flow = await paidFlow(10_000);
    const outcomes = await Promise.allSettled([
      createPaymentRefund(ctx, secret, { payment_flow_id: flow.id, amount: 7000 }),
      createPaymentRefund(ctx, secret, { payment_flow_id: flow.id, amount: 7000 }),
    ]);
    expect(outcomes.map((o) => o.status).sort()).toEqual(['fulfilled', 'rejected']);
    const refused = outcomes.find((o) => o.status === 'rejected') as PromiseRejectedResult;
    expect((refused.reason as { code: string }).code).toBe('refund_amount_gt_net');
    const total = await sql<{ n: number }>`SELECT coalesce(sum(amount), 0)::bigint AS n FROM refunds WHERE account_id = ${ACCOUNT}`.execute(db);
    expect(total.rows[0]!.n).toBe(7000);
  });
});

describe('payment refunds left pending before their claims moved to network_claims', () => {
  it('sql/000240 gives a pending refund without a claim the claim it would have taken; the next refund after the lease finishes it once', async () => {
    const flow = await paidFlow(8_000);
    const asked: string[] = [];
    const counting = (fail: boolean): CardNetwork => ({
      ...simulatedCardNetwork(),
      refund: async (requests) => {
        asked.push(...requests.map((r) => r.reference));
        return fail ? Promise.reject(new Error('the process died at the network')) : simulatedCardNetwork().refund(requests);
      },
    });
    const at = ctx.clock.now();
    await expect(createPaymentRefund({ ...ctx, processor: counting(true) }, secret, { payment_flow_id: flow.id, amount: 3_000 })).rejects.toThrow('the process died');
    const pending = await db.selectFrom('payment_refunds').selectAll().where('payment_flow_id', '=', flow.id).executeTakeFirstOrThrow();
    const claimed = await db.selectFrom('network_claims').select(['operation', 'claimed_at', 'lease_until', 'recovery']).where('resource_id', '=', pending.payment_refund_id).executeTakeFirstOrThrow();
    // A refund as the earlier code left it: pending, stamped by its updated_at, no claim row.
    await db.deleteFrom('network_claims').where('resource_id', '=', pending.payment_refund_id).execute();
    await sql.raw(readFileSync(join(SQL_DIR, '000240_payment_refund_claims.sql'), 'utf8')).execute(db);
    expect(await db.selectFrom('network_claims').select(['operation', 'claimed_at', 'lease_until', 'recovery']).where('resource_id', '=', pending.payment_refund_id).executeTakeFirstOrThrow()).toEqual(claimed);
    const later = { ...testContext(database.store, { at: new Date(at.getTime() + NETWORK_CLAIM_LEASE_MS), seed: 17 }), processor: counting(false) };
    const own = await createPaymentRefund(later, secret, { payment_flow_id: flow.id, amount: 1_000 });
    expect(asked).toEqual([pending.payment_refund_id, pending.payment_refund_id, own.id]);
    expect(await retrievePaymentRefund(ctx, secret, { id: pending.payment_refund_id })).toMatchObject({ status: 'succeeded', amount: 3_000 });
    expect(await eventTypes(pending.payment_refund_id)).toEqual(['refund.created']);
    const rows = await db.selectFrom('refunds').select('amount').where('account_id', '=', ACCOUNT).orderBy('created_at').orderBy('amount', 'desc').execute();
    expect(rows.map((r) => r.amount)).toEqual([3_000, 1_000]);
    expect(await db.selectFrom('network_claims').select('resource_id').where('account_id', '=', ACCOUNT).execute()).toEqual([]);
  });
});

describe('payment_refunds.update, list and a flow’s refunds', () => {
  it('merges metadata under v2 §2.6 rules 3–5 with refund.updated; refused updates change nothing', async () => {
    const flow = await paidFlow(5000);
    const refund = await createPaymentRefund(ctx, secret, { payment_flow_id: flow.id, amount: 100, metadata: { a: '1', b: true } });
    ctx.clock.set(new Date(ctx.clock.now().getTime() + 60_000));
    const updated = await updatePaymentRefund(ctx, secret, { id: refund.id, metadata: { a: '', c: 3 } });
    expect(updated.metadata).toEqual({ b: true, c: 3 });
    expect(updated.updated_at).toBe('2027-01-01T00:01:00Z');
    expect((await updatePaymentRefund(ctx, secret, { id: refund.id, metadata: {} })).metadata).toEqual({});
    expect(await eventTypes(refund.id)).toEqual(['refund.created', 'refund.updated', 'refund.updated']);
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v']));
    await expectRefused('too many keys', () => updatePaymentRefund(ctx, secret, { id: refund.id, metadata: many }), 'too_many_metadata_keys', 'metadata', snapshot);
    await expectRefused('unknown', () => updatePaymentRefund(ctx, secret, { id: 'pyre_nope', metadata: {} }), 'invalid_id', 'id', snapshot);
    await expectRefused('amount', () => updatePaymentRefund(ctx, secret, { id: refund.id, amount: 5 }), 'invalid_param_key', 'amount', snapshot);
  });

  it('lists newest first with cursors both ways; a flow’s refunds only its own; an unknown cursor is named', async () => {
    const a = await paidFlow(9000);
    const b = await paidFlow(9000);
    const ids: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      ctx.clock.set(new Date(ctx.clock.now().getTime() + 1000));
      ids.push((await createPaymentRefund(ctx, secret, { payment_flow_id: a.id, amount: 100 })).id);
    }
    ctx.clock.set(new Date(ctx.clock.now().getTime() + 1000));
    const other = (await createPaymentRefund(ctx, secret, { payment_flow_id: b.id, amount: 100 })).id;
    const all = await listPaymentRefunds(ctx, secret, {});
    expect(all).toMatchObject({ object: 'list', url: '/v2/payment_refunds', has_more: false });
    expect(all.data.map((r) => r.id)).toEqual([other, ids[2], ids[1], ids[0]]);
    const first = await listPaymentRefunds(ctx, secret, { limit: 2 });
    expect([first.data.map((r) => r.id), first.has_more]).toEqual([[other, ids[2]], true]);
    const next = await listPaymentRefunds(ctx, secret, { limit: 2, starting_after: ids[2] });
    expect([next.data.map((r) => r.id), next.has_more]).toEqual([[ids[1], ids[0]], false]);
    const back = await listPaymentRefunds(ctx, secret, { limit: 2, ending_before: ids[0] });
    expect([back.data.map((r) => r.id), back.has_more]).toEqual([[ids[2], ids[1]], true]);
    const ofA = await listPaymentFlowRefunds(ctx, secret, { id: a.id });
    expect([ofA.url, ofA.data.map((r) => r.id)]).toEqual([`/v2/payment_flows/${a.id}/refunds`, [ids[2], ids[1], ids[0]]]);
    expect((await rejection(listPaymentRefunds(ctx, secret, { starting_after: 'pyre_nope' }))).param).toBe('starting_after');
    expect((await rejection(listPaymentFlowRefunds(ctx, secret, { id: 'pfw_nope' }))).code).toBe('invalid_id');
    expect((await rejection(listPaymentRefunds(ctx, secret, { limit: 101 }))).code).toBe('invalid_querystring');
    expect((await listPaymentRefunds(ctx, live, {})).data).toEqual([]);
  });
});

describe('settlement: a term with v1 and v2 captures and refunds (service rules §4)', () => {
  it('closes with Σ items = net for every statement and captured − refunded = Σ nets + the service’s fees, platform mode included', async () => {
    const tenant = (await runOperation(ctx, secret, 'tenants.create', { platform_fee_rate: '10.00', payjp_fee_included: false })) as { id: string };
    const v1 = (await runOperation(ctx, secret, 'charges.create', { amount: 20_000, currency: 'jpy', card: await token('visa', secret), tenant: tenant.id })) as { id: string };
    const v1own = (await runOperation(ctx, secret, 'charges.create', { amount: 8000, currency: 'jpy', card: await token('mastercard', secret) })) as { id: string };
    await runOperation(ctx, secret, 'charges.refund', { id: v1.id, amount: 5000 });
    await runOperation(ctx, secret, 'charges.refund', { id: v1own.id });
    const v2 = await paidFlow(12_345);
    const held = await heldFlow(30_000);
    await capturePaymentFlow(ctx, secret, { id: held.id, amount_to_capture: 10_000 });
    await capturePaymentFlow(ctx, secret, { id: held.id });
    await createPaymentRefund(ctx, secret, { payment_flow_id: v2.id, amount: 2345 });
    await createPaymentRefund(ctx, secret, { payment_flow_id: held.id, amount: 15_000 });
    const slot = new Date('2027-01-31T15:00:00Z');
    const runCtx = testContext(database.store, { at: slot, seed: 99 });
    expect((await new Scheduler(runCtx, [termCloseJob], { owner: 'test' }).runSlot(termCloseJob.name, slot)).status).toBe('succeeded');
    const totals = await sql<{ money_in: number; nets: number; service: number; bad_items: number; unsettled: number }>`
      SELECT
        (SELECT coalesce(sum(amount_captured), 0) FROM charges WHERE account_id = ${ACCOUNT})::bigint
          - (SELECT coalesce(sum(amount), 0) FROM refunds WHERE account_id = ${ACCOUNT})::bigint AS money_in,
        (SELECT coalesce(sum(net), 0) FROM statements WHERE account_id = ${ACCOUNT} AND type = 'sales')::bigint AS nets,
        ((SELECT coalesce(sum(fee), 0) FROM charges WHERE account_id = ${ACCOUNT})
          - (SELECT coalesce(sum(refund_fee_offset), 0) FROM refunds WHERE account_id = ${ACCOUNT}))::bigint AS service,
        (SELECT count(*) FROM statements s WHERE s.account_id = ${ACCOUNT}
           AND s.net <> (SELECT coalesce(sum(amount), 0) FROM statement_items i WHERE i.account_id = s.account_id AND i.statement_id = s.statement_id))::int AS bad_items,
        ((SELECT count(*) FROM charges WHERE account_id = ${ACCOUNT} AND term_id IS NULL)
          + (SELECT count(*) FROM refunds WHERE account_id = ${ACCOUNT} AND term_id IS NULL))::int AS unsettled`.execute(db);
    const t = totals.rows[0]!;
    // In: 20,000 + 8,000 + 12,345 + 30,000; out: 5,000 + 8,000 + 2,345 + 15,000.
    expect(t.money_in).toBe(70_345 - 30_345);
    expect(t.money_in).toBe(t.nets + t.service);
    expect([t.bad_items, t.unsettled]).toEqual([0, 0]);
    // The v2 refunds are in the merchant's sales statement exactly like the v1 one.
    const items = await sql<{ owner: string; subject: string; amount: number }>`
      SELECT s.owner, i.subject, sum(i.amount)::bigint AS amount FROM statements s
      JOIN statement_items i ON i.account_id = s.account_id AND i.statement_id = s.statement_id
      WHERE s.account_id = ${ACCOUNT} AND s.type = 'sales' GROUP BY s.owner, i.subject ORDER BY s.owner, i.subject`.execute(db);
    const of = (owner: string, subject: string) => items.rows.find((r) => r.owner === owner && r.subject === subject)?.amount;
    expect(of('merchant', 'gross_sales')).toBe(8000 + 12_345 + 30_000);
    expect(of('merchant', 'gross_refund')).toBe(-(8000 + 2345 + 15_000));
    // Visa and MasterCard default 3.00 %: refund_fee_offset = floor(refunded × 3 %) per refund row.
    expect(of('merchant', 'refund_fee_offset')).toBe(240 + 70 + 300 + 150);
    // The tenant's refund gives back floor(2,000 × 5,000 / 20,000) of the platform fee.
    expect(of('tenant', 'refund_platform_fee_offset')).toBe(500);
    expect(of('platform', 'refund_platform_fee_offset')).toBe(-500);
  });
});
