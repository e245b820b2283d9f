/**
 * The real clock, for the worker and the CLI (composition roots). This is the one place in the
 * engine that reads the wall clock.
 */
import type { Clock } from './clock';

export const systemClock: Clock = {
  now: () => new Date(), // allow-clock: the composition root's real clock
};
