import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, type Caller } from '../../src/accounts/accounts';
import { chargeCards, type ChargeRequest } from '../../src/charges/charges';
import { listEvents } from '../../src/events/outbox';
import { runOperation } from '../../src/api/operations';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { createTestDatabase, testContext, type TestDatabase } from '../support/database';

let database: TestDatabase;
let ctx: ReturnType<typeof testContext>;
const caller: Caller = { accountId: 'acct_charges', livemode: false, kind: 'secret' };

beforeAll(async () => {
  database = await createTestDatabase();
  ctx = testContext(database.store, { seed: 11 });
  await createAccount(ctx, { name: 'Charges Shop', id: 'acct_charges', feeRates: { Visa: '2.59' } });
});
afterAll(async () => database?.drop());

/** A customer with one stored test card; returns the card row. */
async function customerWithCard(customerId: string, number: string) {
  const token = (await runOperation(ctx, caller, 'tokens.create', { card: { number, exp_month: '12', exp_year: '2035', cvc: '123' } })) as { id: string };
  await runOperation(ctx, caller, 'customers.create', { id: customerId, card: token.id });
  return ctx.db.selectFrom('cards').selectAll().where('customer_id', '=', customerId).executeTakeFirstOrThrow();
}

describe('charging stored cards in bulk', () => {
  it('records approved and declined charges in request order, with fee rates and events', async () => {
    const good = await customerWithCard('cus_good', TEST_CARDS.visa.number);
    const bad = await customerWithCard('cus_bad', TEST_CARDS.declinesOnCharge.number);
    const at = new Date('2027-02-01T00:00:00Z');
    const request = (customerId: string, card: typeof good, subscriptionId: string): ChargeRequest => ({
      accountId: caller.accountId,
      livemode: false,
      customerId,
      card,
      amount: 1_000,
      at,
      kind: 'renewal',
      subscriptionId,
      periodStart: at,
    });
    const outcomes = await ctx.db.transaction().execute((trx) => chargeCards(trx, ctx, [request('cus_good', good, 'sub_a'), request('cus_bad', bad, 'sub_b')]));
    expect(outcomes.map((o) => o.status)).toEqual(['succeeded', 'failed']);
    const [ok, failed] = outcomes;
    expect(ok).toMatchObject({ charge: { amount: 1_000, paid: true, captured: true, captured_at: at.getTime() / 1000, fee_rate: '2.59', subscription: 'sub_a', customer: 'cus_good', card: { id: good.card_id, last4: '4242' } } });
    expect(failed).toMatchObject({ code: 'card_declined', charge: { paid: false, captured: false, captured_at: null, failure_code: 'card_declined' } });
    const events = await listEvents(ctx.db, caller.accountId, {});
    const chargeEvents = events.filter((e) => e.type.startsWith('charge.'));
    expect(chargeEvents.map((e) => [e.type, e.data.id, e.createdAt])).toEqual([
      ['charge.succeeded', ok!.status === 'succeeded' ? ok!.charge.id : '', at],
      ['charge.failed', failed!.status === 'failed' ? failed!.charge.id : '', at],
    ]);
  });

  it('"one renewal charge per subscription and period start": a repeat is not written, and asks the network under the same reference', async () => {
    const card = await customerWithCard('cus_once', TEST_CARDS.mastercard.number);
    const at = new Date('2027-03-01T00:00:00Z');
    const request: ChargeRequest = { accountId: caller.accountId, livemode: false, customerId: 'cus_once', card, amount: 980, at, kind: 'renewal', subscriptionId: 'sub_once', periodStart: at };
    const released: string[] = [];
    const asked: string[] = [];
    const watching = {
      ...ctx,
      processor: {
        ...ctx.processor,
        authorize: async (requests: Parameters<typeof ctx.processor.authorize>[0]) => {
          asked.push(...requests.map((r) => r.reference));
          return ctx.processor.authorize(requests);
        },
        release: async (requests: Parameters<typeof ctx.processor.release>[0]) => {
          released.push(...requests.map((r) => r.reference));
          return ctx.processor.release(requests);
        },
      },
    };
    const first = await ctx.db.transaction().execute((trx) => chargeCards(trx, watching, [request]));
    const second = await ctx.db.transaction().execute((trx) => chargeCards(trx, watching, [request]));
    expect(first.map((o) => o.status)).toEqual(['succeeded']);
    expect(second).toEqual([{ status: 'duplicate' }]);
    // The period's natural key is the idempotency reference: a real network answers the repeat with
    // the first authorization, which belongs to the charge already written and must not be voided.
    expect(asked).toEqual([`sub_once@2027-03-01T00:00:00.000Z/${card.card_id}`, `sub_once@2027-03-01T00:00:00.000Z/${card.card_id}`]);
    expect(released).toEqual([]);
    const rows = await ctx.db.selectFrom('charges').select('charge_id').where('subscription_id', '=', 'sub_once').execute();
    expect(rows).toHaveLength(1);
    const events = (await listEvents(ctx.db, caller.accountId, { type: 'charge.succeeded' })).filter((e) => (e.data as { subscription?: string }).subscription === 'sub_once');
    expect(events).toHaveLength(1);
  });

  it('writes nothing when the surrounding transaction rolls back', async () => {
    const card = await customerWithCard('cus_rollback', TEST_CARDS.jcb.number);
    const at = new Date('2027-04-01T00:00:00Z');
    const rolledBack = ctx.db.transaction().execute(async (trx) => {
      await chargeCards(trx, ctx, [{ accountId: caller.accountId, livemode: false, customerId: 'cus_rollback', card, amount: 500, at, kind: 'charge' }]);
      // Written inside the transaction: the rollback below is what takes it away.
      expect(await trx.selectFrom('charges').select('charge_id').where('customer_id', '=', 'cus_rollback').execute()).toHaveLength(1);
      throw new Error('the subscription change failed');
    });
    await expect(rolledBack).rejects.toThrow('the subscription change failed');
    expect(await ctx.db.selectFrom('charges').select('charge_id').where('customer_id', '=', 'cus_rollback').execute()).toEqual([]);
  });
});
