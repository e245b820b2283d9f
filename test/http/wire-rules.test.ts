/**
 * Wire rules of the official SDKs and the catalogue, one SDK test each, on the real server: the
 * states and parameters the SDKs document, answered as the service answers them.
 */
import * as v2 from '@payjp/payjpv2';
import type { Client } from '@payjp/payjpv2';
import type Payjp from 'payjp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { sdkError, startTestServer, type TestServer } from '../support/http-server';
import { ok, problem, v2CardMethod, v2Client } from '../support/v2-sdk';

describe('wire rules through the official SDKs', () => {
  let server: TestServer;
  let client: Client;
  let payjp: Payjp.Payjp;

  beforeAll(async () => {
    server = await startTestServer('harness');
    client = v2Client(server, server.keys.a.test.secret);
    payjp = server.sdk(server.keys.a.test.secret);
  });
  afterAll(async () => server?.close());

  const token = async (number: string = TEST_CARDS.visa.number) =>
    (await payjp.tokens.create({ card: { number, exp_month: 12, exp_year: 2035, cvc: '123' } } as never, { 'X-Payjp-Direct-Token-Generate': 'true' })).id;

  it('"A partial capture is allowed once": a second partial capture is 400 Invalid Status (urn type) and changes nothing', async () => {
    const pm = await v2CardMethod(client, TEST_CARDS.visa.number);
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 10_000, currency: 'jpy', payment_method_id: pm.id, capture_method: 'manual', confirm: true } }));
    expect(await ok(v2.capturePaymentFlow({ client, path: { payment_flow_id: flow.id }, body: { amount_to_capture: 4_000 } }))).toMatchObject({ status: 'requires_capture', amount_capturable: 6_000 });
    const refused = await problem(v2.capturePaymentFlow({ client, path: { payment_flow_id: flow.id }, body: { amount_to_capture: 1_000 } }));
    expect(refused).toMatchObject({ status: 400, title: 'Invalid Status', code: 'invalid_status', type: 'urn:kessai:problem:invalid_status', errors: [{ field: 'amount_to_capture' }] });
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flow.id } }))).toMatchObject({ status: 'requires_capture', amount_received: 4_000, amount_capturable: 6_000 });
  });

  it('createPaymentFlow without currency (required by the SDK) is refused naming currency; nothing is created', async () => {
    const before = (await ok(v2.getAllPaymentFlows({ client, query: { limit: 100 } }))).data.length;
    const refused = await problem(v2.createPaymentFlow({ client, body: { amount: 1_000 } as never }));
    expect(refused).toMatchObject({ status: 422, code: 'validation_error', type: 'urn:kessai:problem:validation_error', errors: [{ field: 'currency' }] });
    expect((await ok(v2.getAllPaymentFlows({ client, query: { limit: 100 } }))).data.length).toBe(before);
    expect(await ok(v2.createPaymentFlow({ client, body: { amount: 1_000, currency: 'jpy' } }))).toMatchObject({ currency: 'jpy', status: 'requires_payment_method' });
  });

  it('a card declined by createPaymentFlow (confirm=true) answers 402 naming the flow it created', async () => {
    const pm = await v2CardMethod(client, TEST_CARDS.declinesOnCharge.number);
    const refused = (await problem(v2.createPaymentFlow({ client, body: { amount: 2_000, currency: 'jpy', payment_method_id: pm.id, confirm: true } }))) as unknown as { status: number; code: string; payment_flow_id: string };
    expect(refused).toMatchObject({ status: 402, code: 'card_declined', payment_flow_id: expect.stringMatching(/^pfw_/) });
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: refused.payment_flow_id } }))).toMatchObject({ amount: 2_000, status: 'requires_payment_method', last_payment_error: expect.objectContaining({ code: 'card_declined' }) });
  });

  it('service rules §6: booleans are read case-insensitively (TRUE, tRuE, False); anything else is invalid_boolean', async () => {
    expect(await payjp.charges.create({ amount: 1_000, currency: 'jpy', card: await token(), capture: 'FALSE' } as never)).toMatchObject({ captured: false, paid: true });
    expect(await payjp.charges.create({ amount: 1_000, currency: 'jpy', card: await token(), capture: 'tRuE' } as never)).toMatchObject({ captured: true });
    expect(await payjp.charges.create({ amount: 1_000, currency: 'jpy', card: await token(), capture: 'False' } as never)).toMatchObject({ captured: false });
    expect(await sdkError(payjp.charges.create({ amount: 1_000, currency: 'jpy', card: await token(), capture: 'yes' } as never))).toMatchObject({ status: 400, code: 'invalid_boolean', param: 'capture' });
  });

  it('an owner filter that is not an owner is invalid_owner_type (balances and statements)', async () => {
    expect(await sdkError(payjp.balances.list({ owner: 'bank' } as never))).toMatchObject({ status: 400, code: 'invalid_owner_type', param: 'owner' });
    expect(await sdkError(payjp.statements.list({ owner: 'platformer' } as never))).toMatchObject({ status: 400, code: 'invalid_owner_type', param: 'owner' });
    expect(await payjp.balances.list({ owner: 'merchant' } as never)).toMatchObject({ object: 'list' });
  });

  it('Apple Pay: a payment method that is no wallet token is invalid_apple_pay_token; in live mode apple_pay_disabled_in_livemode', async () => {
    const customer = await payjp.customers.create({ card: await token() } as never);
    const flow = await ok(v2.createPaymentFlow({ client, body: { amount: 1_500, currency: 'jpy', customer_id: customer.id, payment_method_types: ['card', 'apple_pay'] } }));
    const notAToken = await problem(v2.confirmPaymentFlow({ client, path: { payment_flow_id: flow.id }, body: { payment_method_id: customer.default_card, payment_method_type: 'apple_pay' } as never }));
    expect(notAToken).toMatchObject({ status: 400, code: 'invalid_apple_pay_token', title: 'Invalid Apple Pay Token', errors: [{ field: 'payment_method_id' }] });
    expect(await ok(v2.getPaymentFlow({ client, path: { payment_flow_id: flow.id } }))).toMatchObject({ status: 'requires_payment_method' });

    const live = v2Client(server, server.keys.a.live.secret);
    const liveFlow = await ok(v2.createPaymentFlow({ client: live, body: { amount: 1_500, currency: 'jpy', payment_method_types: ['apple_pay'] } }));
    const disabled = await problem(v2.confirmPaymentFlow({ client: live, path: { payment_flow_id: liveFlow.id }, body: { payment_method_id: 'tok_from_the_wallet', payment_method_type: 'apple_pay' } as never }));
    expect(disabled).toMatchObject({ status: 400, code: 'apple_pay_disabled_in_livemode', title: 'Apple Pay Disabled In Livemode' });
  });

  it('charges.create with customer and a token in card: payment_method_duplicate_including_customer, the token unused', async () => {
    const customer = await payjp.customers.create({ card: await token() } as never);
    const second = await token(TEST_CARDS.mastercard.number);
    expect(await sdkError(payjp.charges.create({ amount: 1_000, currency: 'jpy', customer: customer.id, card: second }))).toMatchObject({ status: 400, code: 'payment_method_duplicate_including_customer', param: 'card' });
    expect(await payjp.tokens.retrieve(second)).toMatchObject({ used: false });
    expect(await payjp.charges.create({ amount: 1_000, currency: 'jpy', customer: customer.id, card: customer.default_card as string })).toMatchObject({ paid: true });
  });

  it('a v2 billing address with a postal code that is none is invalid_address_zip; a good one is kept', async () => {
    const card = { number: TEST_CARDS.visa.number, exp_month: 12, exp_year: 2035, cvc: '123' };
    const refused = await problem(v2.createPaymentMethod({ client, body: { type: 'card', card, billing_details: { email: 'buyer@example.com', address: { zip: '100<0001>' } } } }));
    expect(refused).toMatchObject({ status: 422, code: 'validation_error', errors: [{ field: 'billing_details.address.zip' }] });
    expect(refused.detail).toContain('zip');
    const made = await ok(v2.createPaymentMethod({ client, body: { type: 'card', card, billing_details: { email: 'buyer@example.com', address: { zip: '100-0001' } } } }));
    expect(made.billing_details).toMatchObject({ address: { zip: '100-0001' } });
  });

  it('card_flagged: after 5 refusals of one card within 30 minutes the card is locked out for 30 minutes, for that account and card only', async () => {
    const declined = { number: TEST_CARDS.declined.number, exp_month: 12, exp_year: 2035, cvc: '123' };
    const create = (sdk: Payjp.Payjp) => sdkError(sdk.tokens.create({ card: declined } as never, { 'X-Payjp-Direct-Token-Generate': 'true' }));
    for (let attempt = 1; attempt <= 5; attempt += 1) {
      expect(await create(payjp), `attempt ${attempt}`).toMatchObject({ status: 402, code: 'card_declined' });
      server.ctx.clock.advance(60_000);
    }
    expect(await create(payjp)).toMatchObject({ status: 402, type: 'card_error', code: 'card_flagged' });
    // Another card of the account, and the same card at another account, are not locked out.
    expect(await token()).toMatch(/^tok_/);
    expect(await create(server.sdk(server.keys.b.test.secret))).toMatchObject({ code: 'card_declined' });
    // The lockout ends 30 minutes after the fifth refusal (the clock is a minute past it now); the issuer is asked again.
    server.ctx.clock.advance(28 * 60_000);
    expect(await create(payjp)).toMatchObject({ code: 'card_flagged' });
    server.ctx.clock.advance(60_000);
    expect(await create(payjp)).toMatchObject({ code: 'card_declined' });
  });
});
