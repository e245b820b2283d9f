/**
 * Preloaded (`node --import`) into a real `kessai` process by a test: the process's wall clock runs
 * KESSAI_TEST_CLOCK_AHEAD_MS ahead of the machine's, so a process started now acts as one started
 * that much later — after a killed worker's leases have lapsed, without waiting for them. Only
 * "now" moves (`new Date()`, `Date.now()`); dates built from a value are untouched, timers too.
 * Plain JavaScript: it runs before tsx is registered.
 */
import process from 'node:process';

const aheadMs = Number(process.env.KESSAI_TEST_CLOCK_AHEAD_MS ?? 0);
if (!Number.isInteger(aheadMs) || aheadMs < 0) throw new Error(`KESSAI_TEST_CLOCK_AHEAD_MS must be a whole number of ms, got ${process.env.KESSAI_TEST_CLOCK_AHEAD_MS}`);

const MachineDate = globalThis.Date;

class AheadDate extends MachineDate {
  constructor(...args) {
    if (args.length === 0) super(MachineDate.now() + aheadMs);
    else super(...args);
  }

  static now() {
    return MachineDate.now() + aheadMs;
  }

  // Dates made before the preload or by Node itself (file times) are dates too.
  static [Symbol.hasInstance](value) {
    return value instanceof MachineDate;
  }
}

globalThis.Date = AheadDate;
