import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KessaiError, type ErrorCode } from '../../src/domain/errors';
import {
  CARD_BRANDS,
  MAX_EXPIRY_YEARS_AHEAD,
  TEST_CARDS,
  TEST_CARD_LIST,
  cardExpired,
  cardExpiresAt,
  cardFingerprint,
  disputeOfCapture,
  DISPUTED_TEST_CARDS,
  findTestCard,
  findTestCardByFingerprint,
  luhnValid,
  threeDSecureOutcome,
  tokenizeTestCard,
  validateCardData,
  type CardDataInput,
  type TestCardName,
} from '../../src/processor/test-cards';
import { thrown } from '../support/rejections';

/** 2026-05-20 12:00 JST. */
const NOW = new Date('2026-05-20T03:00:00Z');
const GOOD: CardDataInput = { number: '4242424242424242', exp_month: '12', exp_year: '2030', cvc: '123', name: 'TARO YAMADA' };


function expectRejection(fn: () => unknown, code: ErrorCode, param: string | undefined): KessaiError {
  const error = thrown(fn);
  expect({ code: error.code, param: error.param }).toEqual({ code, param });
  return error;
}

describe('the test-card table (service rules §2.2)', () => {
  it('has a successful card of each brand: "a successful card of each brand (Visa, Mastercard, JCB, American Express, Diners Club, Discover)"', () => {
    for (const brand of CARD_BRANDS) {
      const succeeding = TEST_CARD_LIST.filter(
        (card) => card.brand === brand && card.tokenization === 'ok' && card.authorization === 'approve' && card.threeDSecure === 'not_required',
      );
      expect(succeeding.length, brand).toBeGreaterThan(0);
    }
    expect(TEST_CARDS.visa.number).toBe('4242424242424242');
    expect(TEST_CARDS.mastercard.number).toBe('5555555555554444');
    expect(TEST_CARDS.jcb.number).toBe('3530111333300000');
    expect(TEST_CARDS.americanExpress.number).toBe('378282246310005');
    expect(TEST_CARDS.dinersClub.number).toBe('30569309025904');
    expect(TEST_CARDS.discover.number).toBe('6011111111111117');
  });

  it('has dispute cards: their captures are disputed a set number of days later, every other card never', () => {
    const capturedAt = new Date('2027-01-10T01:00:00Z');
    expect(DISPUTED_TEST_CARDS.map((card) => card.name)).toEqual(['disputedFraudulent', 'disputedNotReceived']);
    expect(disputeOfCapture(cardFingerprint(TEST_CARDS.disputedFraudulent.number), capturedAt)).toEqual({ at: new Date('2027-01-13T01:00:00Z'), reason: 'fraudulent' });
    expect(disputeOfCapture(cardFingerprint(TEST_CARDS.disputedNotReceived.number), capturedAt)).toEqual({ at: new Date('2027-02-09T01:00:00Z'), reason: 'product_not_received' });
    for (const card of TEST_CARD_LIST.filter((c) => c.dispute === undefined)) expect(disputeOfCapture(card.fingerprint, capturedAt), card.name).toBeUndefined();
    expect(disputeOfCapture(null, capturedAt)).toBeUndefined();
  });

  it('covers declined (card_declined), expired (expired_card) and processing error (processing_error)', () => {
    expect(TEST_CARDS.declined.tokenization).toBe('card_declined');
    expect(TEST_CARDS.expired.tokenization).toBe('expired_card');
    expect(TEST_CARDS.processingError.tokenization).toBe('processing_error');
    // The same three refusals exist at authorization too, for cards already stored on customers.
    expect(TEST_CARDS.declinesOnCharge.authorization).toMatchObject({ code: 'card_declined' });
    expect(TEST_CARDS.expiresOnCharge.authorization).toMatchObject({ code: 'expired_card' });
    expect(TEST_CARDS.processingErrorOnCharge.authorization).toMatchObject({ code: 'processing_error' });
  });

  it('covers 3-D Secure required, an overseas-issued card and a debit card', () => {
    expect(TEST_CARDS.threeDSecureRequired.threeDSecure).toBe('required');
    expect(TEST_CARDS.overseas).toMatchObject({ issuer: 'overseas', country: 'US', tokenization: 'ok', authorization: 'approve' });
    expect(TEST_CARDS.debit).toMatchObject({ funding: 'debit', tokenization: 'ok', authorization: 'approve' });
    expect(TEST_CARDS.prepaid.funding).toBe('prepaid');
  });

  it('has cards for renewal-only and reauth-only failures', () => {
    expect(TEST_CARDS.declinesRenewals.authorization).toEqual({ code: 'card_declined', kinds: ['renewal'] });
    expect(TEST_CARDS.reauthFails.authorization).toEqual({ code: 'card_declined', kinds: ['reauth'] });
  });

  it('marks every card issued outside Japan as overseas, and every Japanese card as domestic', () => {
    for (const card of TEST_CARD_LIST) expect(card.issuer, card.name).toBe(card.country === 'JP' ? 'domestic' : 'overseas');
  });

  describe.each(TEST_CARD_LIST.map((card) => [card.name, card] as const))('%s', (_name, card) => {
    it('passes the Luhn check and is 14 to 16 digits', () => {
      expect(luhnValid(card.number)).toBe(true);
      expect(card.number).toMatch(/^\d{14,16}$/);
    });

    it('has last4 equal to the number’s last four digits', () => {
      expect(card.last4).toBe(card.number.slice(-4));
    });

    it('has a brand consistent with its number’s prefix', () => {
      const prefixes: Record<(typeof CARD_BRANDS)[number], RegExp> = {
        Visa: /^4/,
        MasterCard: /^(5[1-5]|2[2-7])/,
        JCB: /^35/,
        'American Express': /^3[47]/,
        'Diners Club': /^3(0[0-5]|[68])/,
        Discover: /^6(011|5)/,
      };
      expect(card.number).toMatch(prefixes[card.brand]);
    });

    it('is found by number and by fingerprint', () => {
      expect(findTestCard(card.number)).toBe(card);
      expect(findTestCardByFingerprint(card.fingerprint)).toBe(card);
    });
  });

  it('has no number twice', () => {
    const numbers = TEST_CARD_LIST.map((card) => card.number);
    expect(new Set(numbers).size).toBe(numbers.length);
    expect(TEST_CARD_LIST.length).toBe(Object.keys(TEST_CARDS).length);
  });
});

describe('fingerprint', () => {
  it('is the first 32 hex characters of SHA-256 of the number', () => {
    const expected = createHash('sha256').update('4242424242424242').digest('hex').slice(0, 32);
    expect(cardFingerprint('4242424242424242')).toBe(expected);
    expect(TEST_CARDS.visa.number).toBe('4242424242424242');
    expect(findTestCard('4242424242424242')?.fingerprint).toBe(expected);
  });

  it('is deterministic and differs between cards', () => {
    const fingerprints = TEST_CARD_LIST.map((card) => card.fingerprint);
    expect(new Set(fingerprints).size).toBe(fingerprints.length);
    for (const card of TEST_CARD_LIST) {
      expect(card.fingerprint).toMatch(/^[0-9a-f]{32}$/);
      expect(cardFingerprint(card.number)).toBe(card.fingerprint);
    }
  });

  it('does not find unknown numbers or fingerprints', () => {
    expect(findTestCard('4111111111111111')).toBeUndefined();
    expect(findTestCardByFingerprint(cardFingerprint('4111111111111111'))).toBeUndefined();
  });
});

describe('luhnValid', () => {
  it('accepts known-good numbers and refuses their neighbours', () => {
    expect(luhnValid('79927398713')).toBe(true);
    expect(luhnValid('79927398710')).toBe(false);
    expect(luhnValid('4242424242424241')).toBe(false);
    expect(luhnValid('')).toBe(false);
    expect(luhnValid('4242 4242 4242 4242')).toBe(false);
  });

  it('detects every single-digit change of a valid number (the property Luhn is built for)', () => {
    fc.assert(
      fc.property(fc.constantFrom(...TEST_CARD_LIST.map((card) => card.number)), fc.nat(), fc.integer({ min: 1, max: 9 }), (number, at, delta) => {
        const position = at % number.length;
        const digit = (Number(number[position]) + delta) % 10;
        const changed = number.slice(0, position) + String(digit) + number.slice(position + 1);
        expect(luhnValid(changed)).toBe(false);
      }),
    );
  });
});

describe('card expiry', () => {
  it('a card is good through its whole expiry month, in Japan time', () => {
    // 12/2026 expires at 2027-01-01 00:00 JST = 2026-12-31 15:00 UTC.
    expect(cardExpiresAt(12, 2026).toISOString()).toBe('2026-12-31T15:00:00.000Z');
    expect(cardExpiresAt(2, 2028).toISOString()).toBe('2028-02-29T15:00:00.000Z');
    expect(cardExpired(12, 2026, new Date('2026-12-31T14:59:59.999Z'))).toBe(false);
    expect(cardExpired(12, 2026, new Date('2026-12-31T15:00:00.000Z'))).toBe(true);
  });
});

describe('validateCardData (token creation)', () => {
  it('normalises good data', () => {
    expect(validateCardData(GOOD, NOW)).toEqual({ number: '4242424242424242', expMonth: 12, expYear: 2030, cvc: '123', name: 'TARO YAMADA' });
  });

  it('reads two-digit years in this century, and accepts numbers as well as strings', () => {
    expect(validateCardData({ ...GOOD, exp_month: 1, exp_year: 27 }, NOW)).toMatchObject({ expMonth: 1, expYear: 2027 });
    expect(validateCardData({ ...GOOD, exp_month: '01', exp_year: '27' }, NOW)).toMatchObject({ expMonth: 1, expYear: 2027 });
    expect(validateCardData({ ...GOOD, cvc: 1234 }, NOW).cvc).toBe('1234');
  });

  it('cvc and name are optional', () => {
    expect(validateCardData({ number: GOOD.number, exp_month: 5, exp_year: 2026 }, NOW)).toMatchObject({ cvc: null, name: null });
    expect(validateCardData({ ...GOOD, cvc: null, name: null }, NOW)).toMatchObject({ cvc: null, name: null });
  });

  it('a missing number, month or year is missing_param on that field', () => {
    expectRejection(() => validateCardData({ ...GOOD, number: undefined }, NOW), 'missing_param', 'card[number]');
    expectRejection(() => validateCardData({ ...GOOD, exp_month: undefined }, NOW), 'missing_param', 'card[exp_month]');
    expectRejection(() => validateCardData({ ...GOOD, exp_year: null }, NOW), 'missing_param', 'card[exp_year]');
  });

  it('"a bad card number gives 400 card_error with param like card[number]" (v1 §7): invalid_number', () => {
    for (const number of ['4242424242424241', '4242-4242-4242-4242', '42424242424', '42424242424242424242', '', 'abcd', 4242424242424242]) {
      const error = expectRejection(() => validateCardData({ ...GOOD, number }, NOW), 'invalid_number', 'card[number]');
      expect({ status: error.status, type: error.type }).toEqual({ status: 400, type: 'card_error' });
    }
  });

  it('exp_month must be 1..12: invalid_expiry_month', () => {
    for (const exp_month of [0, 13, '13', '1.5', 1.5, '', 'ab', '001', -1]) {
      expectRejection(() => validateCardData({ ...GOOD, exp_month }, NOW), 'invalid_expiry_month', 'card[exp_month]');
    }
  });

  it('exp_year must be a 2- or 4-digit year: invalid_expiry_year', () => {
    for (const exp_year of ['203', '20300', '', 'abcd', 2026.5, '0027', 100]) {
      expectRejection(() => validateCardData({ ...GOOD, exp_year }, NOW), 'invalid_expiry_year', 'card[exp_year]');
    }
  });

  it(`a past year or one more than ${MAX_EXPIRY_YEARS_AHEAD} years ahead is invalid_expiry_year`, () => {
    expectRejection(() => validateCardData({ ...GOOD, exp_year: 2025 }, NOW), 'invalid_expiry_year', 'card[exp_year]');
    expectRejection(() => validateCardData({ ...GOOD, exp_year: '25' }, NOW), 'invalid_expiry_year', 'card[exp_year]');
    expect(validateCardData({ ...GOOD, exp_year: 2026 + MAX_EXPIRY_YEARS_AHEAD }, NOW).expYear).toBe(2046);
    expectRejection(() => validateCardData({ ...GOOD, exp_year: 2027 + MAX_EXPIRY_YEARS_AHEAD }, NOW), 'invalid_expiry_year', 'card[exp_year]');
  });

  it('a month already over this year is invalid_expiry_month; the current month is still good', () => {
    expectRejection(() => validateCardData({ ...GOOD, exp_month: 4, exp_year: 2026 }, NOW), 'invalid_expiry_month', 'card[exp_month]');
    expect(validateCardData({ ...GOOD, exp_month: 5, exp_year: 2026 }, NOW).expMonth).toBe(5);
  });

  it('reads the current month in Japan time: 2026-05-31 15:00 UTC is already June in Japan', () => {
    const juneInJapan = new Date('2026-05-31T15:00:00Z');
    expect(validateCardData({ ...GOOD, exp_month: 5, exp_year: 2026 }, new Date('2026-05-31T14:59:59Z')).expMonth).toBe(5);
    expectRejection(() => validateCardData({ ...GOOD, exp_month: 5, exp_year: 2026 }, juneInJapan), 'invalid_expiry_month', 'card[exp_month]');
  });

  it('cvc must be 3 or 4 digits: invalid_cvc', () => {
    for (const cvc of ['12', '12345', 'abc', '', '12a', 12, 1.5]) {
      expectRejection(() => validateCardData({ ...GOOD, cvc }, NOW), 'invalid_cvc', 'card[cvc]');
    }
    expect(validateCardData({ ...GOOD, cvc: '012' }, NOW).cvc).toBe('012');
  });

  it('"Card name: 2 to 45 characters" (v1 §8) of half-width letters, digits, space, period, hyphen: invalid_card_name', () => {
    expect(validateCardData({ ...GOOD, name: 'AB' }, NOW).name).toBe('AB');
    expect(validateCardData({ ...GOOD, name: 'A'.repeat(45) }, NOW).name).toBe('A'.repeat(45));
    expect(validateCardData({ ...GOOD, name: 'J. R. SMITH-JONES 3' }, NOW).name).toBe('J. R. SMITH-JONES 3');
    for (const name of ['A', 'A'.repeat(46), '', 'ＴＡＲＯ', '山田太郎', "O'BRIEN", 'TARO_YAMADA', 42]) {
      expectRejection(() => validateCardData({ ...GOOD, name }, NOW), 'invalid_card_name', 'card[name]');
    }
  });

  it('checks the number before the expiry, and the expiry before the cvc and name', () => {
    const everythingWrong = { number: '1', exp_month: 13, exp_year: 'x', cvc: '1', name: '' };
    expect(thrown(() => validateCardData(everythingWrong, NOW)).code).toBe('invalid_number');
    expect(thrown(() => validateCardData({ ...everythingWrong, number: GOOD.number }, NOW)).code).toBe('invalid_expiry_month');
    expect(thrown(() => validateCardData({ ...everythingWrong, number: GOOD.number, exp_month: 1 }, NOW)).code).toBe('invalid_expiry_year');
    expect(thrown(() => validateCardData({ ...everythingWrong, number: GOOD.number, exp_month: 1, exp_year: 2030 }, NOW)).code).toBe('invalid_cvc');
  });
});

describe('tokenizeTestCard', () => {
  const tokenize = (name: TestCardName, overrides: Partial<CardDataInput> = {}, livemode = false) =>
    tokenizeTestCard({ ...GOOD, number: TEST_CARDS[name].number, ...overrides }, { livemode, now: NOW });

  it('fills the card object fields from the table and the entered data', () => {
    expect(tokenize('overseas')).toEqual({
      testCard: 'overseas',
      brand: 'Visa',
      last4: '0003',
      expMonth: 12,
      expYear: 2030,
      fingerprint: cardFingerprint('4000000900000003'),
      name: 'TARO YAMADA',
      country: 'US',
      funding: 'credit',
      issuer: 'overseas',
      cvcCheck: 'passed',
    });
    expect(tokenize('debit', { cvc: undefined, name: undefined })).toMatchObject({ funding: 'debit', cvcCheck: 'unchecked', name: null });
  });

  it.each(TEST_CARD_LIST.map((card) => [card.name, card.tokenization] as const))('%s answers token creation with %s', (name, outcome) => {
    if (outcome === 'ok') {
      expect(tokenize(name)).toMatchObject({ testCard: name, brand: TEST_CARDS[name].brand, last4: TEST_CARDS[name].last4 });
    } else {
      const error = expectRejection(() => tokenize(name), outcome, undefined);
      expect(error.type).toBe('card_error');
    }
  });

  it('"Numbers that are not in the project\'s own test-card table are declined with invalid_card" (service rules §2.2)', () => {
    for (const number of ['4111111111111111', '4012888888881881', '5105105105105118']) {
      expect(luhnValid(number)).toBe(true);
      const error = expectRejection(() => tokenizeTestCard({ ...GOOD, number }, { livemode: false, now: NOW }), 'invalid_card', 'card[number]');
      expect({ status: error.status, type: error.type }).toEqual({ status: 402, type: 'card_error' });
    }
  });

  it('a Luhn-invalid number is refused as malformed before the table is asked', () => {
    expectRejection(() => tokenizeTestCard({ ...GOOD, number: '4242424242424241' }, { livemode: false, now: NOW }), 'invalid_number', 'card[number]');
  });

  it('every test card in live mode is test_card_on_livemode', () => {
    for (const card of TEST_CARD_LIST) {
      expectRejection(() => tokenize(card.name, {}, true), 'test_card_on_livemode', 'card[number]');
    }
    // The simulator has no live network: unknown numbers stay invalid_card in live mode too.
    expectRejection(() => tokenizeTestCard({ ...GOOD, number: '4111111111111111' }, { livemode: true, now: NOW }), 'invalid_card', 'card[number]');
  });

  it('format errors come before the table, so a declining card with a bad month reports the month', () => {
    expectRejection(() => tokenize('declined', { exp_month: 13 }), 'invalid_expiry_month', 'card[exp_month]');
  });
});

describe('threeDSecureOutcome', () => {
  it.each([
    ['visa', 'verified'],
    ['threeDSecureRequired', 'verified'],
    ['threeDSecureAttempted', 'attempted'],
    ['threeDSecureFailed', 'failed'],
    ['threeDSecureError', 'error'],
  ] as const)('%s authenticates as %s', (name, status) => {
    expect(threeDSecureOutcome(TEST_CARDS[name])).toBe(status);
  });
});
