import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { assertTermOf, nextTerm, termContaining, termIncludes, type TermBounds } from '../../src/domain/terms';

/** An instant written in JST, the way the business reads it. */
const jst = (local: string): Date => new Date(`${local}+09:00`);

const bounds = (term: TermBounds): readonly [string, string] => [term.start.toISOString(), term.end.toISOString()];

describe('monthly terms', () => {
  it('"Default cycle: calendar month (00:00 JST on the 1st)"', () => {
    expect(bounds(termContaining('monthly', jst('2027-03-10T12:00:00')))).toEqual([
      '2027-02-28T15:00:00.000Z', // 2027-03-01 00:00 JST
      '2027-03-31T15:00:00.000Z', // 2027-04-01 00:00 JST
    ]);
  });

  it('a charge captured at 23:59:59 JST on the last day lands in that term, one at 00:00:00 JST in the next', () => {
    const lastSecond = termContaining('monthly', jst('2027-03-31T23:59:59.999'));
    const firstSecond = termContaining('monthly', jst('2027-04-01T00:00:00'));
    expect(lastSecond.start).toEqual(jst('2027-03-01T00:00:00'));
    expect(lastSecond.end).toEqual(jst('2027-04-01T00:00:00'));
    expect(firstSecond.start).toEqual(lastSecond.end);
    expect(termIncludes(lastSecond, jst('2027-04-01T00:00:00'))).toBe(false);
  });

  it('uses the JST date, not the UTC one: 2027-03-31T15:00Z is already April in Japan', () => {
    expect(termContaining('monthly', new Date('2027-03-31T14:59:59Z')).start).toEqual(jst('2027-03-01T00:00:00'));
    expect(termContaining('monthly', new Date('2027-03-31T15:00:00Z')).start).toEqual(jst('2027-04-01T00:00:00'));
  });

  it('ends February on the 29th in the leap year 2028 and the 28th in 2027', () => {
    expect(termContaining('monthly', jst('2028-02-29T23:59:59')).end).toEqual(jst('2028-03-01T00:00:00'));
    expect(termContaining('monthly', jst('2027-02-28T23:59:59')).end).toEqual(jst('2027-03-01T00:00:00'));
  });

  it('crosses the year: December 2027 is followed by January 2028', () => {
    const december = termContaining('monthly', jst('2027-12-31T23:59:59'));
    expect(december.end).toEqual(jst('2028-01-01T00:00:00'));
    expect(bounds(nextTerm('monthly', december))).toEqual(bounds({ start: jst('2028-01-01T00:00:00'), end: jst('2028-02-01T00:00:00') }));
  });
});

describe('semi-monthly terms', () => {
  it('"semi-monthly (1st–15th, 16th–month end)": the first half ends at 16th 00:00 JST', () => {
    const first = termContaining('semi_monthly', jst('2027-06-15T23:59:59'));
    expect(first.start).toEqual(jst('2027-06-01T00:00:00'));
    expect(first.end).toEqual(jst('2027-06-16T00:00:00'));
    const second = termContaining('semi_monthly', jst('2027-06-16T00:00:00'));
    expect(second.start).toEqual(jst('2027-06-16T00:00:00'));
    expect(second.end).toEqual(jst('2027-07-01T00:00:00'));
  });

  it('the second half of February 2028 runs 16th–29th', () => {
    const term = termContaining('semi_monthly', jst('2028-02-29T12:00:00'));
    expect(term.start).toEqual(jst('2028-02-16T00:00:00'));
    expect(term.end).toEqual(jst('2028-03-01T00:00:00'));
  });

  it('nextTerm alternates halves and crosses the year', () => {
    const terms: TermBounds[] = [termContaining('semi_monthly', jst('2027-12-01T00:00:00'))];
    for (let i = 0; i < 3; i += 1) terms.push(nextTerm('semi_monthly', terms[terms.length - 1] as TermBounds));
    expect(terms.map((term) => term.start)).toEqual([
      jst('2027-12-01T00:00:00'),
      jst('2027-12-16T00:00:00'),
      jst('2028-01-01T00:00:00'),
      jst('2028-01-16T00:00:00'),
    ]);
  });

  it('nextTerm refuses a term of the other cycle', () => {
    const monthly = termContaining('monthly', jst('2027-06-10T00:00:00'));
    expect(() => nextTerm('semi_monthly', monthly)).toThrow(RangeError);
    expect(() => assertTermOf('monthly', monthly)).not.toThrow();
  });
});

describe('terms tile time (property)', () => {
  const instant = fc.integer({ min: Date.parse('2000-01-01T00:00:00Z'), max: Date.parse('2049-12-31T00:00:00Z') }).map((ms) => new Date(ms));
  const cycle = fc.constantFrom('monthly' as const, 'semi_monthly' as const);

  it('every instant lies in its term, which starts at 00:00 JST and is followed without gap', () => {
    fc.assert(
      fc.property(cycle, instant, (which, at) => {
        const term = termContaining(which, at);
        expect(termIncludes(term, at)).toBe(true);
        expect((term.start.getTime() + 9 * 3_600_000) % 86_400_000).toBe(0);
        const next = nextTerm(which, term);
        expect(next.start.getTime()).toBe(term.end.getTime());
        expect(termContaining(which, new Date(term.end.getTime() - 1))).toEqual(term);
      }),
      { numRuns: 500 },
    );
  });
});
