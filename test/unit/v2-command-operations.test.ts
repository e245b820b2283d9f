/**
 * The v2 resources whose parameter reading and rendering live in src/api/v2/<resource>.ts run
 * command operations (decode, execute, encode), as every v1 route does. A route of such a resource
 * whose operation is a plain handler fails here, naming it.
 */
import { describe, expect, it } from 'vitest';
import { V2_ROUTES } from '../../src/api/v2/routes';
import { findOperation } from '../../src/api/operations';

/** The v2 resources split from the wire so far (a full operation name stands for that operation alone). */
const SPLIT_RESOURCES = ['tax_rates', 'products', 'prices', 'payment_refunds', 'payment_flows.list_refunds', 'payment_flows.retrieve', 'payment_flows.list', 'payment_disputes', 'v2.customers', 'v2.events', 'payment_methods', 'customers.list_payment_methods', 'payment_method_configurations', 'payment_transactions', 'v2.statements', 'v2.balances', 'v2.terms', 'setup_flows', 'checkout.sessions'];
/** An operation's resource is its name without the verb (`v2.customers.create` → `v2.customers`). */
const isSplit = (name: string) => SPLIT_RESOURCES.some((split) => name === split || name.slice(0, name.lastIndexOf('.')) === split);

describe('v2 operations apart from the wire', () => {
  it('every route of a split v2 resource runs a registered command operation', () => {
    const names = [...new Set(V2_ROUTES.map((route) => route.operation))].filter(isSplit);
    expect(names.sort()).toEqual([
      'checkout.sessions.create',
      'checkout.sessions.expire',
      'checkout.sessions.list',
      'checkout.sessions.list_line_items',
      'checkout.sessions.retrieve',
      'checkout.sessions.update',
      'customers.list_payment_methods',
      'payment_disputes.list',
      'payment_disputes.retrieve',
      'payment_flows.list',
      'payment_flows.list_refunds',
      'payment_flows.retrieve',
      'payment_method_configurations.list',
      'payment_method_configurations.retrieve',
      'payment_method_configurations.update',
      'payment_methods.attach',
      'payment_methods.create',
      'payment_methods.detach',
      'payment_methods.list',
      'payment_methods.retrieve',
      'payment_methods.retrieve_by_card',
      'payment_methods.update',
      'payment_refunds.create',
      'payment_refunds.list',
      'payment_refunds.retrieve',
      'payment_refunds.update',
      'payment_transactions.list',
      'payment_transactions.retrieve',
      'prices.create',
      'prices.list',
      'prices.retrieve',
      'prices.update',
      'products.create',
      'products.delete',
      'products.list',
      'products.retrieve',
      'products.update',
      'setup_flows.cancel',
      'setup_flows.complete_action',
      'setup_flows.confirm',
      'setup_flows.create',
      'setup_flows.list',
      'setup_flows.retrieve',
      'setup_flows.update',
      'tax_rates.create',
      'tax_rates.list',
      'tax_rates.retrieve',
      'tax_rates.update',
      'v2.balances.balance_urls',
      'v2.balances.list',
      'v2.balances.retrieve',
      'v2.customers.create',
      'v2.customers.delete',
      'v2.customers.list',
      'v2.customers.retrieve',
      'v2.customers.update',
      'v2.events.list',
      'v2.events.retrieve',
      'v2.statements.list',
      'v2.statements.retrieve',
      'v2.statements.statement_urls',
      'v2.terms.list',
      'v2.terms.retrieve',
    ]);
    const unknown = names.filter((name) => findOperation(name) === undefined);
    const plain = names.filter((name) => findOperation(name) !== undefined && findOperation(name)!.parts === undefined);
    expect({ unknown, plain }).toEqual({ unknown: [], plain: [] });
  });
});
