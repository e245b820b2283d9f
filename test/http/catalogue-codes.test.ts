/**
 * Two catalogue codes of v1 §7 through the `payjp` SDK on the real server:
 * - `no_param` ("no parameter set"): an update that sets nothing is refused and changes nothing;
 * - `pg_wrong` ("fault on the payment processor side"): a card network that does not answer (its
 *   call throws) makes a charge 500 `pg_wrong` (`server_error`), not the service's `payjp_wrong`,
 *   and nothing is charged; the token can be used again.
 */
import * as v2 from '@payjp/payjpv2';
import Payjp from 'payjp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, type AccountKeys } from '../../src/accounts/accounts';
import { simulatedCardNetwork, type CardNetwork } from '../../src/processor/card-network';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { createTestDatabase, isPostgres, testContext, type TestDatabase } from '../support/database';
import { harnessServerForBlock, sdkError, serveOn, type Served } from '../support/http-server';
import { ok, problem, v2CardMethod, v2Client } from '../support/v2-sdk';

const card = (number: string = TEST_CARDS.visa.number) => ({ card: { number, exp_month: 12, exp_year: 2035, cvc: '123' } }) as never;
const direct = { 'X-Payjp-Direct-Token-Generate': 'true' };

describe('no_param: an update that sets no parameter', () => {
  const harness = harnessServerForBlock();

  it('customers, charges, plans: 400 no_param (client_error) and nothing changes; one parameter updates', async () => {
    const payjp = harness.server.sdk(harness.server.keys.a.test.secret);
    const customer = await payjp.customers.create({ email: 'buyer@example.com', metadata: { tier: 'gold' } });
    expect(await sdkError(payjp.customers.update(customer.id, {}))).toEqual({ status: 400, type: 'client_error', code: 'no_param', param: undefined, charge: undefined });
    expect(await payjp.customers.retrieve(customer.id)).toEqual(customer);
    const charge = await payjp.charges.create({ amount: 1_000, currency: 'jpy', card: (await payjp.tokens.create(card(), direct)).id });
    expect(await sdkError(payjp.charges.update(charge.id, {}))).toMatchObject({ status: 400, code: 'no_param' });
    const plan = await payjp.plans.create({ amount: 500, currency: 'jpy', interval: 'month' });
    expect(await sdkError(payjp.plans.update(plan.id, {}))).toMatchObject({ status: 400, code: 'no_param' });
    expect(await payjp.plans.retrieve(plan.id)).toEqual(plan);
    // Refused before anything is read: an unknown id with no parameter is no_param too.
    expect(await sdkError(payjp.customers.update('cus_none', {}))).toMatchObject({ status: 400, code: 'no_param' });
    expect(await payjp.customers.update(customer.id, { description: 'regular' })).toMatchObject({ id: customer.id, description: 'regular' });
  });
});

describe('pg_wrong: the card network does not answer', () => {
  let database: TestDatabase;
  let served: Served;
  let keys: AccountKeys;
  let down = true;
  const plain = simulatedCardNetwork();
  const flaky: CardNetwork = {
    ...plain,
    authorize: async (requests) => {
      if (down) throw new Error('connect ETIMEDOUT processor.invalid:443');
      return plain.authorize(requests);
    },
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    const ctx = { ...testContext(database.store, { seed: 33 }), processor: flaky };
    keys = (await createAccount(ctx, { name: 'Flaky', id: 'acct_flaky' })).keys;
    served = await serveOn(ctx, isPostgres() ? 'postgres' : 'pglite', { rateLimits: { limits: { live: { pk: 1_000, payment: 1_000, sk: 1_000 }, test: { pk: 1_000, payment: 1_000, sk: 1_000 } } } });
  });
  afterAll(async () => {
    await served?.close();
    await database?.drop();
  });

  it('a charge while the processor is down: 500 pg_wrong (server_error), nothing charged, the token usable once it is back', async () => {
    const payjp = Payjp(keys.test.secret, { apibase: served.apibase });
    const token = await payjp.tokens.create(card(), direct);
    expect(await sdkError(payjp.charges.create({ amount: 2_000, currency: 'jpy', card: token.id }))).toEqual({ status: 500, type: 'server_error', code: 'pg_wrong', param: undefined, charge: undefined });
    expect((await payjp.charges.list()).data).toEqual([]);
    down = false;
    expect(await payjp.charges.create({ amount: 2_000, currency: 'jpy', card: token.id })).toMatchObject({ paid: true, captured: true, amount: 2_000 });
  });
});

describe('card_flagged counts the refusals of charges and payment flows too', () => {
  const harness = harnessServerForBlock();

  it('five declined charges of one stored card lock it out: the sixth is card_flagged without a charge, token creation too; other cards go on; 30 minutes later it is asked again', async () => {
    const { server } = harness;
    const payjp = server.sdk(server.keys.a.test.secret);
    const customer = await payjp.customers.create({ card: (await payjp.tokens.create(card(TEST_CARDS.declinesOnCharge.number), direct)).id });
    for (let i = 0; i < 5; i += 1) {
      expect(await sdkError(payjp.charges.create({ amount: 1_000, currency: 'jpy', customer: customer.id }))).toMatchObject({ status: 402, type: 'card_error', code: 'card_declined', charge: expect.stringMatching(/^ch_/) });
    }
    const flagged = await sdkError(payjp.charges.create({ amount: 1_000, currency: 'jpy', customer: customer.id }));
    expect(flagged).toEqual({ status: 402, type: 'card_error', code: 'card_flagged', param: undefined, charge: undefined });
    // The refused request made no charge: the five declined ones are all there is.
    expect((await payjp.charges.list({ customer: customer.id } as never)).data).toHaveLength(5);
    expect(await sdkError(payjp.tokens.create(card(TEST_CARDS.declinesOnCharge.number), direct))).toMatchObject({ status: 402, code: 'card_flagged' });
    expect(await payjp.charges.create({ amount: 1_000, currency: 'jpy', card: (await payjp.tokens.create(card(), direct)).id })).toMatchObject({ paid: true });
    server.ctx.clock.set(new Date(server.ctx.clock.now().getTime() + 30 * 60_000));
    expect(await sdkError(payjp.charges.create({ amount: 1_000, currency: 'jpy', customer: customer.id }))).toMatchObject({ status: 402, code: 'card_declined' });
  });

  it('v2: five declined confirmations of one card lock it out too: the sixth confirmation is 402 card_flagged and leaves the flow as it was; a v1 token for the card is refused; other cards go on', async () => {
    const { server } = harness;
    const client = v2Client(server, server.keys.b.test.secret);
    const v1 = server.sdk(server.keys.b.test.secret);
    const declining = await v2CardMethod(client, TEST_CARDS.declinesOnCharge.number);
    for (let i = 0; i < 5; i += 1) {
      const declined = await problem(v2.createPaymentFlow({ client, body: { amount: 1_000, currency: 'jpy', payment_method_id: declining.id, confirm: true } }));
      expect(declined).toMatchObject({ status: 402, code: 'card_declined' });
    }
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 1_000, currency: 'jpy' } }));
    const flagged = await problem(v2.confirmPaymentFlow({ client, path: { payment_flow_id: flow.id }, body: { payment_method_id: declining.id } }));
    expect(flagged).toMatchObject({ status: 402, code: 'card_flagged' });
    // Refused before the network and before the flow changed: no payment method attached, no event of processing.
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flow.id } }))).toMatchObject({ status: 'requires_payment_method', payment_method_id: null });
    expect(await sdkError(v1.tokens.create(card(TEST_CARDS.declinesOnCharge.number), direct))).toMatchObject({ status: 402, code: 'card_flagged' });
    const good = await v2CardMethod(client, TEST_CARDS.visa.number);
    expect(await ok(v2.confirmPaymentFlow({ client, path: { payment_flow_id: flow.id }, body: { payment_method_id: good.id } }))).toMatchObject({ status: 'succeeded' });
  });
});
