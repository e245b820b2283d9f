/**
 * optionalEnum, the one reader of an optional parameter that takes one of a list: absent is
 * undefined, a listed value is itself, anything else is refused naming the parameter. The
 * cancellation reasons of payment and setup flows are read by it.
 */
import { describe, expect, it } from 'vitest';
import { findOperation } from '../../src/api/operations';
import { KessaiError } from '../../src/domain/errors';
import { optionalEnum } from '../../src/operations/params';

function refusal(run: () => unknown): { code: string; param: string | undefined } {
  try {
    run();
  } catch (error) {
    if (error instanceof KessaiError) return { code: error.code, param: error.param };
    throw error;
  }
  throw new Error('not refused');
}

function decode(name: string, input: object): unknown {
  const parts = findOperation(name)?.parts;
  if (parts === undefined) throw new Error(`${name} is not a command operation`);
  return parts.decode(input as never, { caller: undefined as never, clock: undefined as never });
}

describe('optionalEnum', () => {
  const COLOURS = ['red', 'blue'] as const;

  it('reads absent, null and listed values', () => {
    expect(optionalEnum({}, 'colour', COLOURS)).toBeUndefined();
    expect(optionalEnum({ colour: null }, 'colour', COLOURS)).toBeUndefined();
    expect(optionalEnum({ colour: 'blue' }, 'colour', COLOURS)).toBe('blue');
  });

  it('refuses an unlisted value or a non-string with the code, naming the parameter', () => {
    expect(refusal(() => optionalEnum({ colour: 'green' }, 'colour', COLOURS))).toEqual({ code: 'invalid_param_key', param: 'colour' });
    expect(refusal(() => optionalEnum({ colour: '' }, 'colour', COLOURS))).toEqual({ code: 'invalid_param_key', param: 'colour' });
    expect(refusal(() => optionalEnum({ colour: 3 }, 'colour', COLOURS, { code: 'invalid_querystring' }))).toEqual({ code: 'invalid_querystring', param: 'colour' });
    expect(refusal(() => optionalEnum({ colour: 'green' }, 'colour', COLOURS, { parent: 'paint' }))).toEqual({ code: 'invalid_param_key', param: 'paint[colour]' });
  });

  it('reads the cancellation reason of payment and setup flows', () => {
    expect(decode('payment_flows.cancel', { id: 'pfl_1', cancellation_reason: 'fraudulent' })).toEqual({ id: 'pfl_1', reason: 'fraudulent' });
    expect(decode('payment_flows.cancel', { id: 'pfl_1' })).toEqual({ id: 'pfl_1', reason: null });
    expect(refusal(() => decode('payment_flows.cancel', { id: 'pfl_1', cancellation_reason: 'bored' }))).toEqual({ code: 'invalid_param_key', param: 'cancellation_reason' });
    expect(decode('setup_flows.cancel', { id: 'sfl_1', cancellation_reason: 'abandoned' })).toEqual({ id: 'sfl_1', reason: 'abandoned' });
    // fraudulent is a payment flow's reason, not a setup flow's.
    expect(refusal(() => decode('setup_flows.cancel', { id: 'sfl_1', cancellation_reason: 'fraudulent' }))).toEqual({ code: 'invalid_param_key', param: 'cancellation_reason' });
  });
});
