import { describe, expect, it } from 'vitest';
import { FixedClock, ManualClock, VirtualClock } from '../../src/engine/clock';
import { systemClock } from '../../src/engine/system-clock';

/** The one reference instant the tests set time from. */
const T0 = new Date('2027-01-01T00:00:00.000Z');
const HOUR = 60 * 60 * 1000;

describe('FixedClock: always the same instant', () => {
  it('returns the same instant on every call', () => {
    const clock = new FixedClock(T0);
    expect(clock.now().toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(clock.now().getTime()).toBe(T0.getTime());
    expect(clock.now().getTime()).toBe(clock.now().getTime());
  });

  it('returns a copy: mutating the returned Date does not change the clock', () => {
    const clock = new FixedClock(T0);
    const first = clock.now();
    first.setTime(0);
    first.setUTCFullYear(1999);
    expect(clock.now().toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(clock.now()).not.toBe(clock.now());
  });

  it('copies the Date it was built from: mutating it afterwards does not change the clock', () => {
    const at = new Date(T0.getTime());
    const clock = new FixedClock(at);
    at.setTime(0);
    expect(clock.now().toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });
});

describe('ManualClock: moved by hand, forwards or backwards', () => {
  it('starts at the given instant', () => {
    expect(new ManualClock(T0).now().toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });

  it('set moves it to the given instant', () => {
    const clock = new ManualClock(T0);
    clock.set(new Date('2027-03-15T12:34:56.789Z'));
    expect(clock.now().toISOString()).toBe('2027-03-15T12:34:56.789Z');
  });

  it('advance moves it by milliseconds and returns the new now', () => {
    const clock = new ManualClock(T0);
    const returned = clock.advance(90 * 60 * 1000);
    expect(returned.toISOString()).toBe('2027-01-01T01:30:00.000Z');
    expect(clock.now().toISOString()).toBe('2027-01-01T01:30:00.000Z');
    clock.advance(1);
    expect(clock.now().toISOString()).toBe('2027-01-01T01:30:00.001Z');
  });

  it('the clock went backwards: set to an earlier instant and advance by a negative amount', () => {
    const clock = new ManualClock(T0);
    clock.set(new Date('2026-12-31T23:00:00.000Z'));
    expect(clock.now().toISOString()).toBe('2026-12-31T23:00:00.000Z');
    clock.advance(-HOUR);
    expect(clock.now().toISOString()).toBe('2026-12-31T22:00:00.000Z');
  });

  it('returns copies: mutating the returned Date does not move the clock', () => {
    const clock = new ManualClock(T0);
    clock.now().setTime(0);
    clock.advance(HOUR).setTime(0);
    expect(clock.now().toISOString()).toBe('2027-01-01T01:00:00.000Z');
  });

  it('is not moved by later changes to the Date it was built from or set to', () => {
    const start = new Date(T0.getTime());
    const clock = new ManualClock(start);
    start.setTime(0);
    expect(clock.now().toISOString()).toBe('2027-01-01T00:00:00.000Z');
    const later = new Date('2027-02-01T00:00:00.000Z');
    clock.set(later);
    later.setTime(0);
    expect(clock.now().toISOString()).toBe('2027-02-01T00:00:00.000Z');
  });
});

describe('VirtualClock: the simulation clock only moves forward', () => {
  it('advanceTo a later instant moves it there', () => {
    const clock = new VirtualClock(T0);
    clock.advanceTo(new Date('2027-01-02T00:00:00.000Z'));
    expect(clock.now().toISOString()).toBe('2027-01-02T00:00:00.000Z');
  });

  it('advanceTo the same instant is allowed and leaves it there', () => {
    const clock = new VirtualClock(T0);
    expect(() => clock.advanceTo(new Date(T0.getTime()))).not.toThrow();
    expect(clock.now().toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });

  it('advanceTo an earlier instant throws a RangeError naming both instants and does not move', () => {
    const clock = new VirtualClock(T0);
    const earlier = new Date(T0.getTime() - 1);
    expect(() => clock.advanceTo(earlier)).toThrow(RangeError);
    expect(() => clock.advanceTo(earlier)).toThrow('virtual clock cannot move back from 2027-01-01T00:00:00.000Z to 2026-12-31T23:59:59.999Z');
    expect(clock.now().toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });

  it('refuses to go back to an instant it has already passed', () => {
    const clock = new VirtualClock(T0);
    clock.advanceTo(new Date(T0.getTime() + 2 * HOUR));
    expect(() => clock.advanceTo(new Date(T0.getTime() + HOUR))).toThrow(RangeError);
    expect(clock.now().getTime()).toBe(T0.getTime() + 2 * HOUR);
  });

  it('returns copies: mutating the returned Date does not move the clock', () => {
    const clock = new VirtualClock(T0);
    clock.now().setTime(0);
    expect(clock.now().toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });
});

describe('systemClock: the real clock of the composition roots', () => {
  it('returns a Date close to the wall clock read by the test', () => {
    const before = Date.now();
    const now = systemClock.now();
    const after = Date.now();
    expect(now).toBeInstanceOf(Date);
    expect(now.getTime()).toBeGreaterThanOrEqual(before);
    expect(now.getTime()).toBeLessThanOrEqual(after);
  });

  it('moves with real time and returns a fresh Date each call', () => {
    const first = systemClock.now();
    const second = systemClock.now();
    expect(second).not.toBe(first);
    expect(second.getTime()).toBeGreaterThanOrEqual(first.getTime());
    expect(Math.abs(second.getTime() - new Date().getTime())).toBeLessThan(5_000);
  });
});
