/**
 * Time is an input. Everything in the engine asks a Clock for "now"; the worker gives it the
 * system clock, tests a fixed or manual one, the simulator a virtual one that only moves forward.
 */

export interface Clock {
  now(): Date;
}

/** Always the same instant: for a single operation or a test that must not see time pass. */
export class FixedClock implements Clock {
  readonly #at: Date;
  constructor(at: Date) {
    this.#at = new Date(at.getTime());
  }
  now(): Date {
    return new Date(this.#at.getTime());
  }
}

/** A clock tests move by hand, forwards or backwards ("the clock went backwards" is a test). */
export class ManualClock implements Clock {
  #ms: number;
  constructor(at: Date) {
    this.#ms = at.getTime();
  }
  now(): Date {
    return new Date(this.#ms);
  }
  set(at: Date): void {
    this.#ms = at.getTime();
  }
  advance(ms: number): Date {
    this.#ms += ms;
    return this.now();
  }
}

/**
 * The simulation's clock: it jumps from one due instant to the next and never goes back, so a
 * simulated history is a single forward pass like the real one.
 */
export class VirtualClock implements Clock {
  #ms: number;
  constructor(start: Date) {
    this.#ms = start.getTime();
  }
  now(): Date {
    return new Date(this.#ms);
  }
  advanceTo(at: Date): void {
    if (at.getTime() < this.#ms) {
      throw new RangeError(`virtual clock cannot move back from ${new Date(this.#ms).toISOString()} to ${at.toISOString()}`);
    }
    this.#ms = at.getTime();
  }
}
