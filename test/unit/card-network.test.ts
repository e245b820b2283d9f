import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE, type ErrorCode } from '../../src/domain/errors';
import {
  AUTHORIZATION_KINDS,
  simulatedCardNetwork,
  type AuthorizationKind,
  type AuthorizationRequest,
  type AuthorizationResult,
} from '../../src/processor/card-network';
import { TEST_CARDS, TEST_CARD_LIST, cardFingerprint, type TestCardName } from '../../src/processor/test-cards';

/** 2026-05-20 12:00 JST. */
const AT = new Date('2026-05-20T03:00:00Z');

function request(name: TestCardName, overrides: Partial<AuthorizationRequest> = {}): AuthorizationRequest {
  return {
    reference: `ch_${name}`,
    fingerprint: cardFingerprint(TEST_CARDS[name].number),
    expMonth: 12,
    expYear: 2030,
    amount: 1000,
    currency: 'jpy',
    livemode: false,
    at: AT,
    kind: 'charge',
    ...overrides,
  };
}

async function authorizeOne(req: AuthorizationRequest, network = simulatedCardNetwork()): Promise<AuthorizationResult> {
  const [result, ...rest] = await network.authorize([req]);
  expect(rest).toEqual([]);
  if (result === undefined) throw new Error('no result');
  return result;
}

/** The outcome in one word: `ok` or the refusal code. */
function outcome(result: AuthorizationResult): 'ok' | ErrorCode {
  return result.approved ? 'ok' : result.code;
}

/**
 * What each card answers for each kind of authorization, written out by hand rather than read from
 * the table, so a change of the table shows up here as a deliberate edit.
 */
const EXPECTED: Record<TestCardName, 'ok' | ErrorCode | Partial<Record<AuthorizationKind, ErrorCode>>> = {
  visa: 'ok',
  mastercard: 'ok',
  jcb: 'ok',
  americanExpress: 'ok',
  dinersClub: 'ok',
  discover: 'ok',
  overseas: 'ok',
  debit: 'ok',
  prepaid: 'ok',
  declined: 'card_declined',
  expired: 'expired_card',
  incorrectData: 'incorrect_card_data',
  processingError: 'processing_error',
  unacceptableBrand: 'unacceptable_brand',
  declinesOnCharge: 'card_declined',
  expiresOnCharge: 'expired_card',
  declinesAbove10000: 'ok',
  incorrectDataOnCharge: 'incorrect_card_data',
  processingErrorOnCharge: 'processing_error',
  declinesRenewals: { renewal: 'card_declined' },
  reauthFails: { reauth: 'card_declined' },
  // Approved everywhere: the issuer refuses refunds to it, not payments.
  refundFails: 'ok',
  // Without 3-D Secure the buyer-present kinds are refused; merchant-initiated ones are exempt.
  threeDSecureRequired: { charge: 'card_declined', hold: 'card_declined' },
  threeDSecureAttempted: 'ok',
  threeDSecureFailed: 'ok',
  threeDSecureError: 'ok',
  // Approved everywhere: the issuer disputes the captured charge later (the disputes.open job).
  disputedFraudulent: 'ok',
  disputedNotReceived: 'ok',
};

function expectedOutcome(name: TestCardName, kind: AuthorizationKind): 'ok' | ErrorCode {
  const expected = EXPECTED[name];
  if (typeof expected === 'string') return expected;
  return expected[kind] ?? 'ok';
}

describe('authorization of every test card', () => {
  it('the expectation covers the whole table', () => {
    expect(Object.keys(EXPECTED).sort()).toEqual(TEST_CARD_LIST.map((card) => card.name).sort());
  });

  const cases = TEST_CARD_LIST.flatMap((card) => AUTHORIZATION_KINDS.map((kind) => [card.name, kind, expectedOutcome(card.name, kind)] as const));
  it.each(cases)('%s, %s → %s', async (name, kind, expected) => {
    const result = await authorizeOne(request(name, { kind }));
    expect(outcome(result)).toBe(expected);
    expect(result.reference).toBe(`ch_${name}`);
    if (result.approved) {
      expect(result.authorizationCode).toMatch(/^\d{6}$/);
    } else {
      expect(result.message).toBe(name === 'threeDSecureRequired' ? '3-D Secure authentication is required by the issuer' : ERROR_CATALOGUE[result.code].message);
      // Only a network fault may go away on a retry.
      expect(result.retryable).toBe(result.code === 'processing_error');
    }
  });
});

describe('card rules at authorization', () => {
  it('declinesAbove10000 approves 10,000 yen and declines 10,001 yen', async () => {
    expect(outcome(await authorizeOne(request('declinesAbove10000', { amount: 10_000 })))).toBe('ok');
    expect(outcome(await authorizeOne(request('declinesAbove10000', { amount: 10_001 })))).toBe('card_declined');
    expect(outcome(await authorizeOne(request('declinesAbove10000', { amount: 10_001, kind: 'renewal' })))).toBe('card_declined');
  });

  it('a card that requires 3-D Secure is approved once the buyer is verified or attempted', async () => {
    for (const kind of ['charge', 'hold'] as const) {
      expect(outcome(await authorizeOne(request('threeDSecureRequired', { kind, threeDSecure: 'verified' })))).toBe('ok');
      expect(outcome(await authorizeOne(request('threeDSecureRequired', { kind, threeDSecure: 'attempted' })))).toBe('ok');
    }
  });

  it('the stored expiry is good through its month in Japan time, then expired_card', async () => {
    // 05/2026 expires at 2026-06-01 00:00 JST = 2026-05-31 15:00 UTC.
    const lastInstant = new Date('2026-05-31T14:59:59.999Z');
    const firstExpired = new Date('2026-05-31T15:00:00.000Z');
    expect(outcome(await authorizeOne(request('visa', { expMonth: 5, expYear: 2026, at: lastInstant })))).toBe('ok');
    for (const kind of AUTHORIZATION_KINDS) {
      expect(outcome(await authorizeOne(request('visa', { expMonth: 5, expYear: 2026, at: firstExpired, kind })))).toBe('expired_card');
    }
    expect(outcome(await authorizeOne(request('visa', { expMonth: 12, expYear: 2026, at: new Date('2026-12-31T15:00:00Z') })))).toBe('expired_card');
    expect(outcome(await authorizeOne(request('visa', { expMonth: 12, expYear: 2026, at: new Date('2026-12-31T14:59:59Z') })))).toBe('ok');
  });

  it('"test_card_on_livemode: test card used in live mode" (v1 §7), for every table card and kind', async () => {
    const network = simulatedCardNetwork();
    const requests = TEST_CARD_LIST.flatMap((card) => AUTHORIZATION_KINDS.map((kind) => request(card.name, { kind, livemode: true })));
    const results = await network.authorize(requests);
    expect(new Set(results.map(outcome))).toEqual(new Set(['test_card_on_livemode']));
  });

  it('a fingerprint the table does not know is invalid_card, in test and live mode', async () => {
    for (const livemode of [false, true]) {
      const result = await authorizeOne({ ...request('visa', { livemode }), fingerprint: cardFingerprint('4111111111111111') });
      expect(outcome(result)).toBe('invalid_card');
    }
  });

  it('refuses a bad currency or amount rather than approving it', async () => {
    expect(outcome(await authorizeOne(request('visa', { currency: 'usd' as 'jpy' })))).toBe('invalid_currency');
    for (const amount of [0, -1, 1.5, Number.NaN, 2 ** 53]) {
      expect(outcome(await authorizeOne(request('visa', { amount })))).toBe('invalid_amount');
    }
  });

  it('rejects requests no engine code should build: an invalid instant or kind', async () => {
    const network = simulatedCardNetwork();
    await expect(network.authorize([request('visa', { at: new Date(Number.NaN) })])).rejects.toThrow(RangeError);
    await expect(network.authorize([request('visa', { kind: 'refund' as AuthorizationKind })])).rejects.toThrow(RangeError);
    await expect(network.authorize([request('visa', { kind: 'toString' as AuthorizationKind })])).rejects.toThrow(RangeError);
  });
});

describe('3-D Secure authentication', () => {
  it.each([
    ['visa', 'verified'],
    ['debit', 'verified'],
    ['threeDSecureRequired', 'verified'],
    ['threeDSecureAttempted', 'attempted'],
    ['threeDSecureFailed', 'failed'],
    ['threeDSecureError', 'error'],
  ] as const)('%s ends %s', async (name, status) => {
    const [result] = await simulatedCardNetwork().authenticate([{ reference: 'ch_1', fingerprint: cardFingerprint(TEST_CARDS[name].number), livemode: false, at: AT }]);
    expect(result).toEqual({ reference: 'ch_1', status });
  });

  it('an unknown card, or a test card in live mode, ends error', async () => {
    const results = await simulatedCardNetwork().authenticate([
      { reference: 'a', fingerprint: cardFingerprint('4111111111111111'), livemode: false, at: AT },
      { reference: 'b', fingerprint: cardFingerprint(TEST_CARDS.visa.number), livemode: true, at: AT },
    ]);
    expect(results).toEqual([
      { reference: 'a', status: 'error' },
      { reference: 'b', status: 'error' },
    ]);
  });
});

describe('capture and release', () => {
  it('always succeed in the simulator, one result per request in order', async () => {
    const network = simulatedCardNetwork({ processingErrorRate: 1 });
    const requests = ['ch_a', 'ch_b', 'ch_c'].map((reference) => ({ reference, authorizationCode: '123456', amount: 500, at: AT }));
    expect(await network.capture(requests)).toEqual(requests.map(({ reference }) => ({ reference, ok: true })));
    expect(await network.release(requests)).toEqual(requests.map(({ reference }) => ({ reference, ok: true })));
  });
});

/** A mixed batch: every card and kind, many references. */
function mixedBatch(size: number): AuthorizationRequest[] {
  const requests: AuthorizationRequest[] = [];
  for (let i = 0; i < size; i += 1) {
    const card = TEST_CARD_LIST[i % TEST_CARD_LIST.length]!;
    const kind = AUTHORIZATION_KINDS[Math.floor(i / TEST_CARD_LIST.length) % AUTHORIZATION_KINDS.length]!;
    requests.push(request(card.name, { reference: `ch_${i.toString(16).padStart(30, '0')}`, kind, amount: 50 + (i % 20_000) }));
  }
  return requests;
}

describe('determinism', () => {
  it('the same requests and seed give the same results, from two separately built networks', async () => {
    const requests = mixedBatch(5_000);
    const first = await simulatedCardNetwork({ seed: 42, processingErrorRate: 0.2 }).authorize(requests);
    const second = await simulatedCardNetwork({ seed: 42, processingErrorRate: 0.2 }).authorize(requests);
    expect(second).toEqual(first);
  });

  it('a different seed changes the seeded faults and approval codes, never the table’s answers', async () => {
    const requests = mixedBatch(5_000);
    const a = await simulatedCardNetwork({ seed: 1, processingErrorRate: 0.2 }).authorize(requests);
    const b = await simulatedCardNetwork({ seed: 2, processingErrorRate: 0.2 }).authorize(requests);
    expect(b).not.toEqual(a);
    const plain = await simulatedCardNetwork().authorize(requests);
    for (const [i, result] of plain.entries()) {
      // A request the table refuses is refused the same way under any seed.
      if (!result.approved) {
        expect(a[i]).toEqual(result);
        expect(b[i]).toEqual(result);
      }
    }
  });

  it('results do not depend on how requests are split into batches or ordered (property)', async () => {
    const requests = mixedBatch(400);
    const network = simulatedCardNetwork({ seed: 7, processingErrorRate: 0.3 });
    const whole = await network.authorize(requests);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.nat({ max: requests.length - 1 }), { maxLength: 60 }), fc.nat({ max: 50 }), async (picks, chunk) => {
        const picked = picks.map((index) => requests[index]!);
        const size = chunk + 1;
        const results: AuthorizationResult[] = [];
        for (let start = 0; start < picked.length; start += size) results.push(...(await network.authorize(picked.slice(start, start + size))));
        expect(results).toEqual(picks.map((index) => whole[index]));
      }),
      { numRuns: 100 },
    );
  });

  it('the instant is part of the request: the same reference at another instant may draw differently', async () => {
    const network = simulatedCardNetwork({ seed: 3 });
    const codes = new Set<string>();
    for (let hour = 0; hour < 50; hour += 1) {
      const result = await authorizeOne(request('visa', { at: new Date(AT.getTime() + hour * 3_600_000) }), network);
      if (result.approved) codes.add(result.authorizationCode);
    }
    expect(codes.size).toBeGreaterThan(45);
  });
});

describe('seeded processing errors', () => {
  it('rate 0 (the default) adds no fault: every outcome is the table’s, whatever the seed', async () => {
    const requests = mixedBatch(10_000);
    const results = await simulatedCardNetwork({ seed: 99 }).authorize(requests);
    for (const [i, result] of results.entries()) {
      const req = requests[i]!;
      const name = TEST_CARD_LIST[i % TEST_CARD_LIST.length]!.name;
      const expected = name === 'declinesAbove10000' && req.amount > 10_000 ? 'card_declined' : expectedOutcome(name, req.kind);
      if (outcome(result) !== expected) expect.fail(`${name} ${req.kind} ${req.amount}: ${outcome(result)}, expected ${expected}`);
    }
  });

  it('rate 1 fails every otherwise approved authorization with a retryable processing_error', async () => {
    const results = await simulatedCardNetwork({ processingErrorRate: 1 }).authorize([request('visa'), request('declinesOnCharge')]);
    expect(results).toEqual([
      { reference: 'ch_visa', approved: false, code: 'processing_error', message: ERROR_CATALOGUE.processing_error.message, retryable: true },
      { reference: 'ch_declinesOnCharge', approved: false, code: 'card_declined', message: ERROR_CATALOGUE.card_declined.message, retryable: false },
    ]);
  });

  it('rate 0.1 faults about a tenth of approvals', async () => {
    const requests = Array.from({ length: 100_000 }, (_, i) => request('visa', { reference: `ch_${i}` }));
    const results = await simulatedCardNetwork({ seed: 5, processingErrorRate: 0.1 }).authorize(requests);
    const faults = results.filter((result) => !result.approved).length;
    expect(faults).toBeGreaterThan(9_400);
    expect(faults).toBeLessThan(10_600);
  });

  it('refuses options out of range', () => {
    expect(() => simulatedCardNetwork({ processingErrorRate: 1.5 })).toThrow(RangeError);
    expect(() => simulatedCardNetwork({ processingErrorRate: -0.1 })).toThrow(RangeError);
    expect(() => simulatedCardNetwork({ processingErrorRate: Number.NaN })).toThrow(RangeError);
    expect(() => simulatedCardNetwork({ seed: 1.5 })).toThrow(RangeError);
  });
});

describe('bulk', () => {
  it('100,000 requests give 100,000 results in request order', async () => {
    const requests = mixedBatch(100_000);
    const results = await simulatedCardNetwork({ seed: 11, processingErrorRate: 0.01 }).authorize(requests);
    expect(results).toHaveLength(requests.length);
    for (let i = 0; i < requests.length; i += 1) {
      if (results[i]!.reference !== requests[i]!.reference) expect.fail(`result ${i} is for ${results[i]!.reference}`);
    }
    // Reversing the batch reverses the results.
    const reversed = await simulatedCardNetwork({ seed: 11, processingErrorRate: 0.01 }).authorize([...requests].reverse());
    expect(reversed).toEqual([...results].reverse());
  });

  it('an empty batch gives an empty result', async () => {
    const network = simulatedCardNetwork();
    expect(await network.authorize([])).toEqual([]);
    expect(await network.authenticate([])).toEqual([]);
  });
});
