/**
 * Every v2 route runs a command operation (decode, execute, encode) whose codec lives in
 * src/api/v2/<resource>.ts, as every v1 route does. A route whose operation is unknown or a plain
 * handler fails here, naming it.
 */
import { describe, expect, it } from 'vitest';
import { V2_ROUTES } from '../../src/api/v2/routes';
import { findOperation } from '../../src/api/operations';

describe('v2 operations apart from the wire', () => {
  it('every v2 route runs a registered command operation', () => {
    const names = [...new Set(V2_ROUTES.map((route) => route.operation))].sort();
    // Every resource the SDK calls (official-sdks.md §2) is routed.
    const resources = [...new Set(names.map((name) => name.slice(0, name.lastIndexOf('.'))))];
    expect(resources).toEqual([
      'checkout.sessions',
      'customers',
      'payment_disputes',
      'payment_flows',
      'payment_method_configurations',
      'payment_methods',
      'payment_refunds',
      'payment_transactions',
      'prices',
      'products',
      'setup_flows',
      'tax_rates',
      'v2.balances',
      'v2.customers',
      'v2.events',
      'v2.statements',
      'v2.terms',
    ]);
    expect(names).toHaveLength(69);
    const unknown = names.filter((name) => findOperation(name) === undefined);
    const plain = names.filter((name) => findOperation(name) !== undefined && findOperation(name)!.parts === undefined);
    expect({ unknown, plain }).toEqual({ unknown: [], plain: [] });
  });
});
