/**
 * Catching the engine's rejections in tests: the KessaiError a call threw, so a test can assert
 * its catalogue code and parameter. Anything else thrown is a test failure, and so is no error.
 */
import { expect } from 'vitest';
import { KessaiError } from '../../src/domain/errors';

/** The KessaiError a synchronous call throws. */
export function thrown(fn: () => unknown): KessaiError {
  try {
    fn();
  } catch (error) {
    if (error instanceof KessaiError) return error;
    throw error;
  }
  throw new Error('expected a KessaiError');
}

/** The KessaiError a promise rejects with. */
export async function rejection(promise: Promise<unknown>): Promise<KessaiError> {
  let outcome: unknown;
  try {
    await promise;
  } catch (error) {
    outcome = error;
  }
  if (outcome instanceof KessaiError) return outcome;
  if (outcome === undefined) throw new Error('expected a KessaiError, but the call succeeded');
  throw outcome;
}

/** Code and parameter of the KessaiError a synchronous call throws. */
export function rejectionOf(fn: () => unknown): { code: string; param: string | undefined } {
  const error = thrown(fn);
  return { code: error.code, param: error.param };
}

/**
 * Asserts that a call is refused with the catalogue code and parameter, and that the state the
 * snapshot reads is exactly as it was before ("bad input changes nothing").
 */
export async function expectRefused(label: string, call: () => Promise<unknown>, code: string, param: string | undefined, snapshot: () => Promise<unknown>): Promise<KessaiError> {
  const before = await snapshot();
  const error = await rejection(call());
  expect([error.code, error.param], label).toEqual([code, param]);
  expect(await snapshot(), `${label} changed state although refused`).toEqual(before);
  return error;
}
