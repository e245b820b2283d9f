import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jstMonth } from '../../src/simulation/report';

describe('jstMonth (the report summary groups by JST month)', () => {
  it('is the JST calendar month of the instant, at the boundaries', () => {
    expect(jstMonth(new Date('2027-01-31T14:59:59.999Z'))).toBe('2027-01');
    expect(jstMonth(new Date('2027-01-31T15:00:00.000Z'))).toBe('2027-02');
    expect(jstMonth(new Date('2026-12-31T15:00:00.000Z'))).toBe('2027-01');
  });

  it('agrees with shifting the instant by nine hours, for any instant (its day cache included)', () => {
    fc.assert(
      fc.property(fc.integer({ min: Date.UTC(1990, 0, 1), max: Date.UTC(2100, 0, 1) }), (ms) => {
        expect(jstMonth(new Date(ms))).toBe(new Date(ms + 9 * 3_600_000).toISOString().slice(0, 7));
      }),
      { numRuns: 5000 },
    );
  });
});
