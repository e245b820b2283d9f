import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KessaiError } from '../../src/domain/errors';
import {
  CARD_ISSUERS,
  EXTENDED_AUTHORIZATION_PARAM,
  HOLD_METHODS,
  HOLD_RULE_ERAS,
  holdLapsed,
  holdRule,
  parseExtendedAuthorizationRequest,
  reauthDue,
  v1HoldExpiresAt,
  v2HoldExpiresAt,
  type CardIssuer,
  type HoldMethod,
} from '../../src/domain/hold-periods';
import { thrown } from '../support/rejections';

const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;

/** The rule change is at 00:00 JST on 2026-09-14, i.e. 15:00 UTC the day before. */
const CHANGE = new Date('2026-09-13T15:00:00Z');
const LAST_OLD_MS = new Date(CHANGE.getTime() - 1);
const OLD = new Date('2026-06-01T03:00:00Z');
const NEW = new Date('2026-10-01T03:00:00Z');


describe('hold rule table (service rules §2.1)', () => {
  // | method / issuer | authorized before 2026-09-14 | from 2026-09-14 |
  const rows: readonly [HoldMethod, CardIssuer, number, number | null, number, number | null][] = [
    ['card', 'domestic', 7, 30, 7, 25],
    ['apple_pay', 'domestic', 7, 30, 7, 25],
    ['card', 'overseas', 7, 30, 5, null],
    ['apple_pay', 'overseas', 7, 30, 5, null],
    ['paypay', 'domestic', 30, null, 30, null],
    ['paypay', 'overseas', 30, null, 30, null],
  ];

  for (const [method, issuer, oldDefault, oldExtended, newDefault, newExtended] of rows) {
    for (const [label, before] of [['well before', OLD], ['one millisecond before', LAST_OLD_MS]] as const) {
      it(`${method} / ${issuer} authorized ${label} 2026-09-14 JST: ${oldDefault} days, extendable to ${oldExtended ?? 'nothing'}`, () => {
        expect(holdRule(method, issuer, before)).toMatchObject({ defaultDays: oldDefault, extendedDays: oldExtended, effectiveFrom: null });
      });
    }
    for (const [label, after] of [['exactly at', CHANGE], ['well after', NEW]] as const) {
      it(`${method} / ${issuer} authorized ${label} 2026-09-14 00:00 JST: ${newDefault} days, extendable to ${newExtended ?? 'nothing'}`, () => {
        expect(holdRule(method, issuer, after)).toMatchObject({ defaultDays: newDefault, extendedDays: newExtended, effectiveFrom: '2026-09-14' });
      });
    }
  }

  it('every era covers every method × issuer', () => {
    for (const era of HOLD_RULE_ERAS) {
      for (const method of HOLD_METHODS) {
        for (const issuer of CARD_ISSUERS) {
          expect(era.cells[method][issuer].defaultDays).toBeGreaterThan(0);
        }
      }
    }
  });

  it('the boundary is JST midnight, not UTC midnight: 2026-09-14 08:59 JST is already the new rule', () => {
    // Still 2026-09-13 in UTC.
    expect(holdRule('card', 'overseas', new Date('2026-09-13T23:59:00Z')).defaultDays).toBe(5);
    expect(holdRule('card', 'overseas', new Date('2026-09-14T08:59:00+09:00')).defaultDays).toBe(5);
  });

  it('a hold authorized on 2026-09-13 (23:59:59 JST) keeps the old rule, even when it lives past the change', () => {
    const authorizedAt = new Date('2026-09-13T23:59:59+09:00');
    const rule = holdRule('card', 'overseas', authorizedAt);
    expect(rule).toMatchObject({ defaultDays: 7, extendedDays: 30, effectiveFrom: null });
    const { expiresAt } = v2HoldExpiresAt('card', 'overseas', authorizedAt, undefined);
    expect(expiresAt.toISOString()).toBe('2026-09-20T14:59:59.000Z');
  });

  it('refuses an invalid Date', () => {
    expect(() => holdRule('card', 'domestic', new Date(Number.NaN))).toThrow(RangeError);
  });
});

describe('v2 hold expiry and request_extended_authorization', () => {
  it('no request: default period, authorizedAt + days × 24 h', () => {
    expect(v2HoldExpiresAt('card', 'domestic', NEW, undefined)).toEqual({ expiresAt: new Date(NEW.getTime() + 7 * DAY), extended: false, days: 7 });
    expect(v2HoldExpiresAt('paypay', 'domestic', NEW, undefined).days).toBe(30);
    expect(v2HoldExpiresAt('card', 'overseas', NEW, undefined).days).toBe(5);
  });

  it('must_extend on a domestic card extends to 30 days before 2026-09-14 and to 25 days from it', () => {
    expect(v2HoldExpiresAt('card', 'domestic', OLD, 'must_extend')).toEqual({ expiresAt: new Date(OLD.getTime() + 30 * DAY), extended: true, days: 30 });
    expect(v2HoldExpiresAt('apple_pay', 'domestic', NEW, 'must_extend')).toEqual({ expiresAt: new Date(NEW.getTime() + 25 * DAY), extended: true, days: 25 });
  });

  it('"With must_extend on a card issued overseas the request fails" (v2 §4.2) under the new rule', () => {
    const error = thrown(() => v2HoldExpiresAt('card', 'overseas', NEW, 'must_extend'));
    expect(error.code).toBe('extended_authorization_not_available');
    expect(error.status).toBe(400);
    expect(error.param).toBe(EXTENDED_AUTHORIZATION_PARAM);
    expect(error.param).toBe('payment_method_options[card][request_extended_authorization]');
    expect(error.message).toMatch(/overseas/);
    expect(() => v2HoldExpiresAt('apple_pay', 'overseas', CHANGE, 'must_extend')).toThrow(KessaiError);
  });

  it('must_extend on an overseas card is allowed under the old rule (authorized before 2026-09-14)', () => {
    expect(v2HoldExpiresAt('card', 'overseas', LAST_OLD_MS, 'must_extend')).toMatchObject({ extended: true, days: 30 });
  });

  it('must_extend on PayPay fails in both eras (30 days, not extendable)', () => {
    expect(thrown(() => v2HoldExpiresAt('paypay', 'domestic', OLD, 'must_extend')).code).toBe('extended_authorization_not_available');
    expect(thrown(() => v2HoldExpiresAt('paypay', 'domestic', NEW, 'must_extend')).code).toBe('extended_authorization_not_available');
  });

  it('"if_available extends where possible" and otherwise falls back to the default period', () => {
    expect(v2HoldExpiresAt('card', 'domestic', NEW, 'if_available')).toMatchObject({ extended: true, days: 25 });
    expect(v2HoldExpiresAt('card', 'overseas', OLD, 'if_available')).toMatchObject({ extended: true, days: 30 });
    expect(v2HoldExpiresAt('card', 'overseas', NEW, 'if_available')).toEqual({ expiresAt: new Date(NEW.getTime() + 5 * DAY), extended: false, days: 5 });
    expect(v2HoldExpiresAt('paypay', 'overseas', NEW, 'if_available')).toMatchObject({ extended: false, days: 30 });
  });

  it('parses the request field strictly', () => {
    expect(parseExtendedAuthorizationRequest(undefined)).toBeUndefined();
    expect(parseExtendedAuthorizationRequest('must_extend')).toBe('must_extend');
    expect(parseExtendedAuthorizationRequest('if_available')).toBe('if_available');
    expect(parseExtendedAuthorizationRequest('never')).toBeUndefined();
    for (const bad of ['MUST_EXTEND', 'NEVER', '', null, 1, true]) {
      const error = thrown(() => parseExtendedAuthorizationRequest(bad));
      expect(error.code).toBe('no_allowed_param');
      expect(error.param).toBe(EXTENDED_AUTHORIZATION_PARAM);
    }
  });

  it('an extension never shortens a hold (property)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...HOLD_METHODS),
        fc.constantFrom(...CARD_ISSUERS),
        fc.date({ min: new Date('2020-01-01T00:00:00Z'), max: new Date('2035-01-01T00:00:00Z'), noInvalidDate: true }),
        (method, issuer, at) => {
          const plain = v2HoldExpiresAt(method, issuer, at, undefined);
          const ifAvailable = v2HoldExpiresAt(method, issuer, at, 'if_available');
          expect(ifAvailable.expiresAt.getTime()).toBeGreaterThanOrEqual(plain.expiresAt.getTime());
          expect(ifAvailable.extended).toBe(holdRule(method, issuer, at).extendedDays !== null);
        },
      ),
    );
  });
});

describe('v1 expiry_days', () => {
  const authorizedAt = new Date('2027-01-10T10:00:00+09:00');

  it('defaults to 7 days: creation + 7 × 24 h', () => {
    expect(v1HoldExpiresAt({ authorizedAt, expiryDays: undefined, issuer: 'domestic' })).toEqual({
      expiresAt: new Date(authorizedAt.getTime() + 7 * DAY),
      requestedDays: 7,
      days: 7,
      capped: false,
    });
  });

  it('"expired_at = creation + N × 24 h" for N = 1 and N = 59', () => {
    expect(v1HoldExpiresAt({ authorizedAt, expiryDays: 1, issuer: 'domestic' }).expiresAt).toEqual(new Date(authorizedAt.getTime() + DAY));
    expect(v1HoldExpiresAt({ authorizedAt, expiryDays: 59, issuer: 'domestic' }).expiresAt).toEqual(new Date(authorizedAt.getTime() + 59 * DAY));
  });

  it('"for N = 60, 23:59:59 JST of the 59th day after creation"', () => {
    // JST date 2027-01-10 + 59 days = 2027-03-10.
    const { expiresAt, days } = v1HoldExpiresAt({ authorizedAt, expiryDays: 60, issuer: 'domestic' });
    expect(days).toBe(60);
    expect(expiresAt.toISOString()).toBe('2027-03-10T14:59:59.000Z');
  });

  it('N = 60 counts from the JST date, not the UTC date (authorized 2027-01-10 00:30 JST = 2027-01-09 UTC)', () => {
    const early = new Date('2027-01-10T00:30:00+09:00');
    expect(v1HoldExpiresAt({ authorizedAt: early, expiryDays: 60, issuer: 'domestic' }).expiresAt.toISOString()).toBe('2027-03-10T14:59:59.000Z');
    const late = new Date('2027-01-10T23:59:59+09:00');
    expect(v1HoldExpiresAt({ authorizedAt: late, expiryDays: 60, issuer: 'domestic' }).expiresAt.toISOString()).toBe('2027-03-10T14:59:59.000Z');
  });

  it('N = 60 crosses a leap day by calendar days', () => {
    const at = new Date('2028-01-15T12:00:00+09:00');
    // 2028-01-15 + 59 days = 2028-03-14 (2028 is a leap year).
    expect(v1HoldExpiresAt({ authorizedAt: at, expiryDays: 60, issuer: 'domestic' }).expiresAt.toISOString()).toBe('2028-03-14T14:59:59.000Z');
  });

  it.each([0, 61, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])('refuses expiry_days = %s with invalid_expiry_days on expiry_days', (expiryDays) => {
    const error = thrown(() => v1HoldExpiresAt({ authorizedAt, expiryDays, issuer: 'domestic' }));
    expect(error.code).toBe('invalid_expiry_days');
    expect(error.param).toBe('expiry_days');
    expect(error.status).toBe(400);
  });

  it('refuses a non-number expiry_days that slipped past the types', () => {
    const error = thrown(() => v1HoldExpiresAt({ authorizedAt, expiryDays: '7' as unknown as number, issuer: 'domestic' }));
    expect(error.code).toBe('invalid_expiry_days');
  });

  it('"expiry_days is capped by the issuer rule for overseas cards (from 2026-09-14: at most 5 days)": larger values are capped', () => {
    const at = new Date('2026-09-14T00:00:00+09:00');
    expect(v1HoldExpiresAt({ authorizedAt: at, expiryDays: 60, issuer: 'overseas' })).toEqual({
      expiresAt: new Date(at.getTime() + 5 * DAY),
      requestedDays: 60,
      days: 5,
      capped: true,
    });
    expect(v1HoldExpiresAt({ authorizedAt: at, expiryDays: 6, issuer: 'overseas', method: 'apple_pay' })).toMatchObject({ days: 5, capped: true });
    expect(v1HoldExpiresAt({ authorizedAt: at, expiryDays: 5, issuer: 'overseas' })).toMatchObject({ days: 5, capped: false });
    expect(v1HoldExpiresAt({ authorizedAt: at, expiryDays: 3, issuer: 'overseas' })).toMatchObject({ days: 3, capped: false });
    // The default 7 is above the overseas limit too.
    expect(v1HoldExpiresAt({ authorizedAt: at, expiryDays: undefined, issuer: 'overseas' })).toMatchObject({ requestedDays: 7, days: 5, capped: true });
  });

  it('the overseas cap still refuses values outside 1..60 rather than capping them', () => {
    expect(thrown(() => v1HoldExpiresAt({ authorizedAt: NEW, expiryDays: 61, issuer: 'overseas' })).code).toBe('invalid_expiry_days');
  });

  it('overseas cards authorized before 2026-09-14 keep the full v1 range 1..60', () => {
    expect(v1HoldExpiresAt({ authorizedAt: LAST_OLD_MS, expiryDays: 60, issuer: 'overseas' })).toMatchObject({ days: 60, capped: false });
    expect(v1HoldExpiresAt({ authorizedAt: LAST_OLD_MS, expiryDays: 40, issuer: 'overseas' })).toMatchObject({ days: 40, capped: false });
  });

  it('domestic cards keep the v1 range 1..60 after 2026-09-14', () => {
    const { expiresAt, days, capped } = v1HoldExpiresAt({ authorizedAt: NEW, expiryDays: 60, issuer: 'domestic' });
    expect({ days, capped }).toEqual({ days: 60, capped: false });
    // NEW is 2026-10-01 12:00 JST; + 59 days = 2026-11-29.
    expect(expiresAt.toISOString()).toBe('2026-11-29T14:59:59.000Z');
  });

  it('expiry lies after authorization and within 60 days for every valid input (property)', () => {
    fc.assert(
      fc.property(
        fc.date({ min: new Date('2020-01-01T00:00:00Z'), max: new Date('2035-01-01T00:00:00Z'), noInvalidDate: true }),
        fc.integer({ min: 1, max: 60 }),
        fc.constantFrom(...CARD_ISSUERS),
        (at, expiryDays, issuer) => {
          const { expiresAt, days } = v1HoldExpiresAt({ authorizedAt: at, expiryDays, issuer });
          expect(days).toBeLessThanOrEqual(expiryDays);
          expect(expiresAt.getTime()).toBeGreaterThan(at.getTime());
          expect(expiresAt.getTime()).toBeLessThanOrEqual(at.getTime() + 60 * DAY);
        },
      ),
    );
  });
});

describe('holdLapsed', () => {
  const expiresAt = new Date('2027-01-17T01:00:00Z');
  it('"after expired_at the hold is released": still held at expired_at, lapsed one millisecond later', () => {
    expect(holdLapsed(expiresAt, expiresAt)).toBe(false);
    expect(holdLapsed(expiresAt, new Date(expiresAt.getTime() + 1))).toBe(true);
  });
});

describe('scheduled reauthorization selection (service rules §2 Decision)', () => {
  const expiresAt = new Date('2027-01-17T01:00:00Z');
  const base = { expiresAt, at: new Date(expiresAt.getTime() - 12 * HOUR), leadTimeMs: DAY, attempts: 0, maxAttempts: 2, funding: 'credit' } as const;

  it('a credit-card hold lapsing within the lead time is due', () => {
    expect(reauthDue(base)).toBe(true);
    expect(reauthDue({ ...base, at: new Date(expiresAt.getTime() - DAY) })).toBe(true);
    expect(reauthDue({ ...base, at: expiresAt })).toBe(true);
  });

  it('a hold lapsing later than the lead time is not due yet', () => {
    expect(reauthDue({ ...base, at: new Date(expiresAt.getTime() - DAY - 1) })).toBe(false);
  });

  it('a hold that has already lapsed is not reauthorized', () => {
    expect(reauthDue({ ...base, at: new Date(expiresAt.getTime() + 1) })).toBe(false);
  });

  it('"never for debit cards (double debit)", nor prepaid or unknown funding', () => {
    expect(reauthDue({ ...base, funding: 'debit' })).toBe(false);
    expect(reauthDue({ ...base, funding: 'prepaid' })).toBe(false);
    expect(reauthDue({ ...base, funding: 'unknown' })).toBe(false);
  });

  it('"up to a configured count": stops once maxAttempts attempts were made', () => {
    expect(reauthDue({ ...base, attempts: 1 })).toBe(true);
    expect(reauthDue({ ...base, attempts: 2 })).toBe(false);
    expect(reauthDue({ ...base, maxAttempts: 0 })).toBe(false);
  });

  it('refuses nonsense configuration', () => {
    expect(() => reauthDue({ ...base, leadTimeMs: -1 })).toThrow(RangeError);
    expect(() => reauthDue({ ...base, attempts: 0.5 })).toThrow(RangeError);
    expect(() => reauthDue({ ...base, maxAttempts: -1 })).toThrow(RangeError);
  });
});
