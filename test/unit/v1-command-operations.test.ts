/**
 * Every operation a v1 route runs is split from the wire (a typed command, its
 * execution and the v1 codec, `defineCommandOperation`), so the v2 API can pair the same execution
 * with its own codec. A v1 route whose operation is a plain handler fails here, naming it.
 */
import { describe, expect, it } from 'vitest';
import { V1_ROUTES } from '../../src/api/v1/routes';
import { findOperation } from '../../src/api/operations';

describe('v1 operations apart from the wire', () => {
  it('every v1 route runs a registered command operation (decode, execute, encode)', () => {
    const names = [...new Set(V1_ROUTES.map((route) => route.operation))];
    expect(names.length).toBeGreaterThan(40);
    const unknown = names.filter((name) => findOperation(name) === undefined);
    const plain = names.filter((name) => findOperation(name) !== undefined && findOperation(name)!.parts === undefined);
    expect({ unknown, plain }).toEqual({ unknown: [], plain: [] });
  });
});
