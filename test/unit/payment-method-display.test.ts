import { describe, expect, it } from 'vitest';
import { APPLE_PAY_BRANDS, methodDisplay, methodUsable, paymentMethodDisplay, type DisplayInput } from '../../src/domain/payment-method-display';

const ALL_BRANDS = ['Visa', 'MasterCard', 'JCB', 'American Express', 'Diners Club', 'Discover'];
const live = (overrides: Partial<DisplayInput> = {}): DisplayInput => ({
  livemode: true,
  preferences: { card: 'none', paypay: 'none', apple_pay: 'none' },
  usableCardBrands: ALL_BRANDS,
  paypayUsable: true,
  ...overrides,
});

describe('payment method display rules (v2 §4.5)', () => {
  it('rule 1: "preference = off: the method is never shown"', () => {
    const shown = paymentMethodDisplay(live({ preferences: { card: 'none', paypay: 'off', apple_pay: 'off' } }));
    expect(shown.paypay).toEqual({ available: false, display_preference: { preference: 'off', value: 'off' } });
    expect(shown.apple_pay.available).toBe(false);
  });

  it('rule 2: "on or none: shown if the method is usable, otherwise hidden. none is not off"', () => {
    for (const preference of ['on', 'none'] as const) {
      expect(methodDisplay('paypay', live({ preferences: { card: 'none', paypay: preference, apple_pay: 'none' } })).available).toBe(true);
      expect(methodDisplay('paypay', live({ paypayUsable: false, preferences: { card: 'none', paypay: preference, apple_pay: 'none' } })).available).toBe(false);
    }
  });

  it('rule 3: card needs one usable brand; apple_pay "works with three card brands only"; paypay needs the account capability', () => {
    expect(APPLE_PAY_BRANDS).toHaveLength(3);
    expect(methodUsable('card', { usableCardBrands: ['Discover'], paypayUsable: false })).toBe(true);
    expect(methodUsable('card', { usableCardBrands: [], paypayUsable: false })).toBe(false);
    expect(methodUsable('apple_pay', { usableCardBrands: ['JCB', 'Diners Club', 'Discover'], paypayUsable: false })).toBe(false);
    for (const brand of APPLE_PAY_BRANDS) expect(methodUsable('apple_pay', { usableCardBrands: [brand], paypayUsable: false })).toBe(true);
    expect(methodUsable('paypay', { usableCardBrands: ALL_BRANDS, paypayUsable: false })).toBe(false);
  });

  it('rule 4: card visibility is computed automatically, whatever its stored preference', () => {
    expect(methodDisplay('card', live({ preferences: { card: 'off', paypay: 'none', apple_pay: 'none' } })).display_preference).toEqual({ preference: 'off', value: 'on' });
    expect(methodDisplay('card', live({ usableCardBrands: [], preferences: { card: 'on', paypay: 'none', apple_pay: 'none' } })).available).toBe(false);
  });

  it('rule 5: "in test mode usability is not evaluated: everything except off is shown"', () => {
    const test = paymentMethodDisplay(live({ livemode: false, usableCardBrands: [], paypayUsable: false, preferences: { card: 'none', paypay: 'on', apple_pay: 'off' } }));
    expect([test.card.available, test.paypay.available, test.apple_pay.available]).toEqual([true, true, false]);
  });

  it('available is true exactly when value is on (v2 §2.4)', () => {
    for (const livemode of [true, false]) {
      for (const preference of ['on', 'off', 'none'] as const) {
        for (const usable of [true, false]) {
          const shown = paymentMethodDisplay(live({ livemode, paypayUsable: usable, usableCardBrands: usable ? ALL_BRANDS : [], preferences: { card: preference, paypay: preference, apple_pay: preference } }));
          for (const method of [shown.card, shown.paypay, shown.apple_pay]) expect(method.available).toBe(method.display_preference.value === 'on');
        }
      }
    }
  });
});
