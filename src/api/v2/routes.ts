/**
 * Every v2 route the `@payjp/payjpv2` SDK calls (official-sdks.md §2) and the operation it runs.
 * Path parameters carry the SDK's names (`{payment_flow_id}`) and reach the operation as `id`
 * unless a route says otherwise; reference fields the SDK names `*_id` are read as the operation's
 * names and answered under both (./codec.ts, docs/decisions/api-conventions.md "The v2 wire: …").
 *
 * ADDING A RESOURCE: one line per operation in V2_ROUTES (e.g. setup flows,
 * `crud('/setup_flows', 'setup_flow_id', 'setup_flows')`), with `renames` / `encode` where its
 * fields differ from the SDK's.
 */
import { reject } from '../../domain/errors';
import type { HttpMethod } from '../v1/routes';
import { renameFields, withSdkNames, type FieldRenames, type V2Route } from './codec';

const route = (method: HttpMethod, path: string, operation: string, extra: Partial<V2Route> = {}): V2Route => ({ method, path, operation, ...extra });

/** A v2 list (`object: "list"`) or a single object: the renames applied to each object. */
function sdkNames(renames: FieldRenames, each: (object: Record<string, unknown>) => Record<string, unknown> = (o) => o): (result: object) => object {
  const one = (object: Record<string, unknown>) => withSdkNames(each(object), renames);
  return (result) => {
    const value = result as Record<string, unknown>;
    if (value.object === 'list' && Array.isArray(value.data)) return { ...value, data: (value.data as Record<string, unknown>[]).map(one) };
    return one(value);
  };
}

/** Create, retrieve, update and list at `base` and `base/:param`; `extra` per verb. */
function crud(base: string, param: string, resource: string, extra: Partial<Record<'create' | 'retrieve' | 'update' | 'list', Partial<V2Route>>> = {}): V2Route[] {
  return [
    route('POST', base, `${resource}.create`, extra.create),
    route('GET', `${base}/:${param}`, `${resource}.retrieve`, extra.retrieve),
    route('POST', `${base}/:${param}`, `${resource}.update`, extra.update),
    route('GET', base, `${resource}.list`, extra.list),
  ];
}

/** The payment flow as the SDK reads it: `customer_id`, `payment_method_id` beside the seed's names. */
const FLOW_NAMES: FieldRenames = { customer_id: 'customer', payment_method_id: 'payment_method', checkout_session_id: 'checkout_session' };
const encodeFlow = sdkNames(FLOW_NAMES);
const flowRoute = (extra: Partial<V2Route> = {}): Partial<V2Route> => ({ renames: { customer_id: 'customer', payment_method_id: 'payment_method' }, encode: encodeFlow, ...extra });

/**
 * createPaymentFlow's `currency` is required by the SDK (official-sdks.md §2): the wire refuses a
 * request without it. The operation keeps `jpy` as its default for scenario files, which call it
 * without the wire.
 */
function decodeFlowCreate(input: Record<string, unknown>): Record<string, unknown> {
  if (input.currency === undefined || input.currency === null) reject('missing_param', 'currency', 'currency is required (jpy)');
  return input;
}

/** `line_items[].price_id` (SDK) or `line_items[].price` (seed), read as `price`. */
function decodeLineItems(input: Record<string, unknown>): Record<string, unknown> {
  if (!Array.isArray(input.line_items)) return input;
  return { ...input, line_items: input.line_items.map((item: unknown, i) => (item !== null && typeof item === 'object' && !Array.isArray(item) ? renameFields(item as Record<string, unknown>, { price_id: 'price' }, `line_items[${i}]`) : item)) };
}
/**
 * Checkout fields of the SDK whose one value is what kessai does anyway (`currency: jpy`, `ui_mode:
 * hosted`, `locale: ja`): read and checked here, so an SDK integration that sends them works; any
 * other value is refused naming the field, never ignored.
 */
const CHECKOUT_SOLE_VALUES: Readonly<Record<string, string>> = { currency: 'jpy', ui_mode: 'hosted', locale: 'ja' };
function decodeCheckoutCreate(input: Record<string, unknown>): Record<string, unknown> {
  const out = { ...input };
  for (const [field, only] of Object.entries(CHECKOUT_SOLE_VALUES)) {
    if (out[field] === undefined) continue;
    if (out[field] !== only) reject('invalid_param_key', field, `${field} must be ${only}, got ${JSON.stringify(out[field])}`);
    delete out[field];
  }
  return decodeLineItems(out);
}

const withLineItemPriceIds = (session: Record<string, unknown>): Record<string, unknown> => {
  const items = session.line_items as { data?: Record<string, unknown>[] } | undefined;
  if (items === undefined || !Array.isArray(items.data)) return session;
  return { ...session, line_items: { ...items, data: items.data.map((item) => withSdkNames(item, { price_id: 'price' })) } };
};
const SESSION_NAMES: FieldRenames = { customer_id: 'customer', payment_flow_id: 'payment_flow', setup_flow_id: 'setup_flow' };
const encodeSession = sdkNames(SESSION_NAMES, withLineItemPriceIds);
const sessionRoute = (extra: Partial<V2Route> = {}): Partial<V2Route> => ({ renames: { customer_id: 'customer' }, encode: encodeSession, ...extra });

export const V2_ROUTES: readonly V2Route[] = [
  // Payment flows (v2 §4.2–4.4, §4.8).
  ...crud('/payment_flows', 'payment_flow_id', 'payment_flows', { create: flowRoute({ decode: decodeFlowCreate }), retrieve: flowRoute(), update: flowRoute(), list: flowRoute() }),
  route('POST', '/payment_flows/:payment_flow_id/confirm', 'payment_flows.confirm', flowRoute()),
  // The browser's return from a 3-D Secure challenge (not in SDK 1.0.5; docs/decisions/payment-flows-and-checkout.md,
  // "Payment transactions, complete_action, confirmation without a row lock").
  route('POST', '/payment_flows/:payment_flow_id/complete_action', 'payment_flows.complete_action', flowRoute()),
  route('POST', '/payment_flows/:payment_flow_id/capture', 'payment_flows.capture', flowRoute()),
  route('POST', '/payment_flows/:payment_flow_id/cancel', 'payment_flows.cancel', flowRoute()),
  route('GET', '/payment_flows/:payment_flow_id/refunds', 'payment_flows.list_refunds'),
  // Setup flows: a card saved for later (src/setup-flows; fields already under the SDK's names).
  ...crud('/setup_flows', 'setup_flow_id', 'setup_flows'),
  route('POST', '/setup_flows/:setup_flow_id/cancel', 'setup_flows.cancel'),
  route('POST', '/setup_flows/:setup_flow_id/confirm', 'setup_flows.confirm'),
  route('POST', '/setup_flows/:setup_flow_id/complete_action', 'setup_flows.complete_action'),
  // Payment refunds.
  ...crud('/payment_refunds', 'payment_refund_id', 'payment_refunds'),
  // Payment disputes (chargebacks): read-only (src/disputes).
  route('GET', '/payment_disputes', 'payment_disputes.list'),
  route('GET', '/payment_disputes/:payment_dispute_id', 'payment_disputes.retrieve'),
  // Payment methods.
  ...crud('/payment_methods', 'payment_method_id', 'payment_methods'),
  route('GET', '/payment_methods/cards/:card_id', 'payment_methods.retrieve_by_card', { pathParams: { card_id: 'card_id' } }),
  route('POST', '/payment_methods/:payment_method_id/attach', 'payment_methods.attach'),
  route('POST', '/payment_methods/:payment_method_id/detach', 'payment_methods.detach'),
  // Customers (v2 rendering).
  ...crud('/customers', 'customer_id', 'v2.customers'),
  route('DELETE', '/customers/:customer_id', 'v2.customers.delete'),
  route('GET', '/customers/:customer_id/payment_methods', 'customers.list_payment_methods'),
  // Products, prices, tax rates.
  ...crud('/products', 'product_id', 'products'),
  route('DELETE', '/products/:product_id', 'products.delete'),
  ...crud('/prices', 'price_id', 'prices'),
  ...crud('/tax_rates', 'tax_rate_id', 'tax_rates'),
  // Checkout sessions (v2 §4.1).
  ...crud('/checkout/sessions', 'checkout_session_id', 'checkout.sessions', {
    create: sessionRoute({ decode: decodeCheckoutCreate, errorField: (field) => field.replace(/^line_items\.(\d+)\.price$/, 'line_items.$1.price_id') }),
    retrieve: sessionRoute(),
    update: sessionRoute(),
    list: sessionRoute(),
  }),
  route('GET', '/checkout/sessions/:checkout_session_id/line_items', 'checkout.sessions.list_line_items'),
  route('POST', '/checkout/sessions/:checkout_session_id/expire', 'checkout.sessions.expire', sessionRoute()),
  // Payment method configurations (v2 §4.5).
  route('GET', '/payment_method_configurations', 'payment_method_configurations.list'),
  route('GET', '/payment_method_configurations/:payment_method_configuration_id', 'payment_method_configurations.retrieve'),
  route('POST', '/payment_method_configurations/:payment_method_configuration_id', 'payment_method_configurations.update'),
  // Statements, balances, terms: read-only views of the settlement (statement URLs served here).
  route('GET', '/statements', 'v2.statements.list'),
  route('GET', '/statements/:statement_id', 'v2.statements.retrieve'),
  route('POST', '/statements/:statement_id/statement_urls', 'v2.statements.statement_urls'),
  route('GET', '/balances', 'v2.balances.list'),
  route('GET', '/balances/:balance_id', 'v2.balances.retrieve'),
  route('POST', '/balances/:balance_id/balance_urls', 'v2.balances.balance_urls'),
  route('GET', '/terms', 'v2.terms.list'),
  route('GET', '/terms/:term_id', 'v2.terms.retrieve'),
  // Payment transactions: the settled captures and refunds (src/settlement/payment-transactions.ts).
  route('GET', '/payment_transactions', 'payment_transactions.list'),
  route('GET', '/payment_transactions/:payment_transaction_id', 'payment_transactions.retrieve'),
  // Events (v2 §4.7).
  route('GET', '/events', 'v2.events.list'),
  route('GET', '/events/:event_id', 'v2.events.retrieve'),
];
