import { describe, expect, it } from 'vitest';
import { ID_PREFIX, ID_RANDOM_HEX_LENGTH, seededIds, type IdGenerator, type IdKind } from '../../src/domain/ids';
import { randomIds } from '../../src/engine/random-ids';

const KINDS = Object.keys(ID_PREFIX) as IdKind[];

/** One id of every kind, in a fixed order, then a few integers: a generator's observable output. */
function sample(ids: IdGenerator): string[] {
  const out = KINDS.map((kind) => ids.next(kind));
  for (let i = 0; i < 5; i += 1) out.push(String(ids.int(1_000_000)));
  return out;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function idPattern(kind: IdKind): RegExp {
  return new RegExp(`^${escapeRegExp(ID_PREFIX[kind])}[0-9a-f]{${ID_RANDOM_HEX_LENGTH}}$`);
}

describe('seeded ids: one scenario and seed always give the same ids', () => {
  it('the same seed gives the same sequence of ids across kinds', () => {
    expect(sample(seededIds(42))).toEqual(sample(seededIds(42)));
  });

  it('a different seed gives different ids', () => {
    const a = sample(seededIds(42));
    const b = sample(seededIds(43));
    // Not one id in common, not just a different sequence.
    const common = a.slice(0, KINDS.length).filter((id) => b.includes(id));
    expect(common).toEqual([]);
  });

  it('seed 0 works and differs from seed 1', () => {
    const zero = seededIds(0);
    const id = zero.next('charge');
    expect(id).toMatch(idPattern('charge'));
    expect(id).not.toBe('ch_' + '0'.repeat(ID_RANDOM_HEX_LENGTH));
    expect(sample(seededIds(0))).not.toEqual(sample(seededIds(1)));
  });

  it('consecutive ids of one generator differ', () => {
    const ids = seededIds(7);
    const seen = new Set<string>();
    for (let i = 0; i < 10_000; i += 1) seen.add(ids.next('charge'));
    expect(seen.size).toBe(10_000);
  });

  it('refuses a seed that is not a safe integer', () => {
    expect(() => seededIds(1.5)).toThrow(RangeError);
    expect(() => seededIds(Number.NaN)).toThrow(RangeError);
    expect(() => seededIds(2 ** 53)).toThrow(RangeError);
  });
});

describe('id format: the kind prefix, then 30 lowercase hex characters', () => {
  it.each(KINDS)('a %s id starts with its prefix and has 30 lowercase hex characters after it', (kind) => {
    const ids = seededIds(2027);
    for (let i = 0; i < 50; i += 1) {
      const id = ids.next(kind);
      expect(id.startsWith(ID_PREFIX[kind])).toBe(true);
      expect(id.slice(ID_PREFIX[kind].length)).toMatch(/^[0-9a-f]{30}$/);
    }
  });

  it('30 hex characters is 120 bits', () => {
    expect(ID_RANDOM_HEX_LENGTH).toBe(30);
  });
});

describe('int(bound): a uniformly distributed integer in [0, bound)', () => {
  it('stays in [0, bound) for small, odd and large bounds', () => {
    const ids = seededIds(99);
    const outOfRange: string[] = [];
    for (const bound of [1, 2, 3, 6, 7, 1000, 2 ** 31 + 1, 2 ** 32]) {
      let max = 0;
      for (let i = 0; i < 2000; i += 1) {
        const value = ids.int(bound);
        if (!Number.isInteger(value) || value < 0 || value >= bound) outOfRange.push(`${value} for bound ${bound}`);
        max = Math.max(max, value);
      }
      // Large bounds reach their upper half too (not stuck in the low bits).
      if (bound >= 6) expect(max).toBeGreaterThanOrEqual(bound / 2);
    }
    expect(outOfRange).toEqual([]);
  });

  it('bound 1 always gives 0', () => {
    const ids = seededIds(5);
    for (let i = 0; i < 100; i += 1) expect(ids.int(1)).toBe(0);
  });

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 32 + 1])('rejects bound %s with a RangeError', (bound) => {
    expect(() => seededIds(1).int(bound)).toThrow(RangeError);
    expect(() => seededIds(1).int(bound)).toThrow(/bound must be an integer in 1\.\.2\^32/);
  });

  it('is roughly uniform: 60,000 draws of bound 6 pass a chi-square sanity check', () => {
    const ids = seededIds(20270101);
    const draws = 60_000;
    const counts = new Array<number>(6).fill(0);
    for (let i = 0; i < draws; i += 1) {
      const face = ids.int(6);
      counts[face] = (counts[face] ?? 0) + 1;
    }
    const expected = draws / 6;
    const chiSquare = counts.reduce((sum, count) => sum + (count - expected) ** 2 / expected, 0);
    // 5 degrees of freedom: p = 0.001 at 20.5. Generous, and deterministic since the seed is fixed.
    expect(chiSquare).toBeLessThan(20.5);
    for (const count of counts) expect(Math.abs(count - expected) / expected).toBeLessThan(0.03);
  });

  it('is uniform over a bound that does not divide 2^32 (rejection sampling): the top half of 3·2^30 is hit as often as the bottom', () => {
    // Plain modulo of a 32-bit word would hit [0, 2^30) twice as often as [2^30, 3·2^30).
    const bound = 3 * 2 ** 30;
    const ids = seededIds(3);
    let low = 0;
    const draws = 30_000;
    for (let i = 0; i < draws; i += 1) if (ids.int(bound) < 2 ** 30) low += 1;
    expect(low / draws).toBeGreaterThan(0.3);
    expect(low / draws).toBeLessThan(0.37);
  });
});

describe('randomIds: production ids from the operating system', () => {
  it('gives 100,000 unique, well-formed ids (crossing several buffer refills)', () => {
    const ids = randomIds();
    const seen = new Set<string>();
    const pattern = idPattern('charge');
    for (let i = 0; i < 100_000; i += 1) {
      const id = ids.next('charge');
      if (!pattern.test(id)) expect(id).toMatch(pattern);
      seen.add(id);
    }
    expect(seen.size).toBe(100_000);
  });

  it('gives every kind its prefix', () => {
    const ids = randomIds();
    for (const kind of KINDS) expect(ids.next(kind)).toMatch(idPattern(kind));
  });

  it('two generators do not repeat each other', () => {
    expect(sample(randomIds())).not.toEqual(sample(randomIds()));
  });

  it('int(bound) stays in range and rejects bad bounds', () => {
    const ids = randomIds();
    const seen = new Set<number>();
    for (let i = 0; i < 5000; i += 1) seen.add(ids.int(6));
    expect([...seen].sort()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(() => ids.int(0)).toThrow(RangeError);
  });
});
