/**
 * chargeText (src/charges/charges.ts): a charge printed around its card's printed object is byte
 * for byte JSON.stringify(renderCharge(row, card)), whatever the strings and metadata hold.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chargeText, renderCharge, type ChargeCard, type ChargeObjectColumns } from '../../src/charges/charges';
import { renderCard } from '../../src/customers/card-object';

const at = new Date('2027-03-01T00:00:00.500Z');

function charge(overrides: Partial<ChargeObjectColumns> = {}): ChargeObjectColumns {
  return {
    charge_id: 'ch_1', livemode: false, created_at: at, amount: 1000, currency: 'jpy', paid: true, expired_at: null, captured: true,
    captured_at: at, customer_id: 'cus_1', description: null, failure_code: null, failure_message: null, fee_rate: '3.25', refunded: false,
    amount_refunded: 0, refund_reason: null, subscription_id: 'sub_1', metadata: {}, platform_fee: null, tenant_id: null,
    platform_fee_rate: null, total_platform_fee: 0, three_d_secure_status: null, term_id: 'tm_1',
    ...overrides,
  };
}

const card: ChargeCard = {
  card_id: 'car_1', livemode: false, created_at: at, brand: 'Visa', last4: '4242', exp_month: 12, exp_year: 2030, fingerprint: 'fp_1',
  name: 'TARO "card":null YAMADA', country: 'JP', cvc_check: 'passed', customer_id: 'cus_1', metadata: { card: '"card":null' },
};

describe('chargeText', () => {
  it('prints what JSON.stringify(renderCharge(row, card)) prints, with and without a card', () => {
    const rows = [
      charge(),
      // The card field's own text, as a key and inside strings, after the card field.
      charge({ description: '"card":null', metadata: { card: 'null', '"card":null': '"card":null' }, failure_message: '{"card":null}' }),
      charge({ paid: false, captured: false, captured_at: null, failure_code: 'card_declined', failure_message: 'Card was declined.', term_id: null }),
    ];
    for (const row of rows) {
      expect(chargeText(row, JSON.stringify(renderCard(card)))).toBe(JSON.stringify(renderCharge(row, card)));
      expect(chargeText(row, null)).toBe(JSON.stringify(renderCharge(row, null)));
    }
  });

  it('holds for any description, failure message and metadata', () => {
    const text = fc.string({ unit: 'grapheme' });
    fc.assert(
      fc.property(fc.option(text), fc.option(text), fc.dictionary(text, text, { maxKeys: 4 }), (description, message, metadata) => {
        const row = charge({ description, failure_message: message, metadata });
        expect(chargeText(row, JSON.stringify(renderCard(card)))).toBe(JSON.stringify(renderCharge(row, card)));
      }),
      { numRuns: 300, seed: 7 },
    );
  });
});
