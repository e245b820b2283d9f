import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatJst, parseInstant, toJstIso } from '../../src/domain/time';

describe('JST where people read', () => {
  it('a JST midnight reads as that date at 00:00 +09:00, not the UTC instant before it', () => {
    expect(formatJst(parseInstant('2027-01-01'))).toBe('2027-01-01 00:00 +09:00');
    expect(toJstIso(parseInstant('2027-01-01'))).toBe('2027-01-01T00:00:00+09:00');
    expect(formatJst(new Date('2027-01-31T15:00:00Z'))).toBe('2027-02-01 00:00 +09:00');
  });

  it('shows seconds and milliseconds only when there are some', () => {
    expect(formatJst(new Date('2027-03-04T01:02:03Z'))).toBe('2027-03-04 10:02:03 +09:00');
    expect(formatJst(new Date('2027-03-04T01:02:03.456Z'))).toBe('2027-03-04 10:02:03.456 +09:00');
  });

  it('reads back as the same instant, for any instant', () => {
    fc.assert(
      fc.property(fc.integer({ min: Date.UTC(1990, 0, 1), max: Date.UTC(2100, 0, 1) }), (ms) => {
        const at = new Date(ms);
        expect(new Date(formatJst(at).replace(' ', 'T').replace(' ', '')).getTime()).toBe(ms);
        expect(new Date(toJstIso(at)).getTime()).toBe(Math.floor(ms / 1000) * 1000);
      }),
      { numRuns: 2000 },
    );
  });
});
