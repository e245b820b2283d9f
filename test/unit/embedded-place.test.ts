import { describe, expect, it } from 'vitest';
import { embeddedPlace } from '../../src/simulation/simulate';

describe('where a simulation keeps its embedded database', () => {
  it('in memory for a small scenario, in a folder from 30,000 planned steps', () => {
    expect(embeddedPlace(0, 0)).toBe('memory');
    expect(embeddedPlace(29_999, 0)).toBe('memory');
    expect(embeddedPlace(30_000, 0)).toBe('folder');
  });

  it("a forecast's copied subscriptions weigh as the three steps of a sign-up each", () => {
    // A forecast of a 100,000-subscription book plans no steps of its own.
    expect(embeddedPlace(0, 100_000)).toBe('folder');
    expect(embeddedPlace(0, 10_000)).toBe('folder');
    expect(embeddedPlace(0, 9_999)).toBe('memory');
    expect(embeddedPlace(3, 9_999)).toBe('folder');
  });
});
