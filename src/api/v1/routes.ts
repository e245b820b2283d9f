/**
 * Every v1 route and the operation it runs (v1 §4 and the `payjp` SDK's method set, see
 * ../shared/spec/official-sdks.md §4). Path parameters are named as the operation's parameters
 * (`:id`, `:customer`), so the v1 codec can place them without a per-route mapping.
 */
export type HttpMethod = 'GET' | 'POST' | 'DELETE';

export interface V1Route {
  readonly method: HttpMethod;
  /** Fastify pattern, e.g. `/v1/customers/:customer/cards/:id`. */
  readonly path: string;
  readonly operation: string;
  /**
   * An update of an existing object: a request that sets no parameter at all changes nothing and
   * is refused with `no_param` (v1 §7 "no parameter set").
   */
  readonly needsParams?: boolean;
}

const route = (method: HttpMethod, path: string, operation: string, extra: Partial<V1Route> = {}): V1Route => ({ method, path: `/v1${path}`, operation, ...extra });

/** The resource's five routes: create, list, retrieve, update and (when it has one) delete. */
function crud(base: string, resource: string, withDelete: boolean, parent = ''): V1Route[] {
  const routes = [
    route('POST', `${parent}${base}`, `${resource}.create`),
    route('GET', `${parent}${base}`, `${resource}.list`),
    route('GET', `${parent}${base}/:id`, `${resource}.retrieve`),
    route('POST', `${parent}${base}/:id`, `${resource}.update`, { needsParams: true }),
  ];
  return withDelete ? [...routes, route('DELETE', `${parent}${base}/:id`, `${resource}.delete`)] : routes;
}

export const V1_ROUTES: readonly V1Route[] = [
  route('POST', '/tokens', 'tokens.create'),
  route('GET', '/tokens/:id', 'tokens.retrieve'),
  route('POST', '/tokens/:id/tds_finish', 'tokens.tds_finish'),
  ...crud('/charges', 'charges', false),
  ...['capture', 'refund', 'reauth', 'tds_finish'].map((action) => route('POST', `/charges/:id/${action}`, `charges.${action}`)),
  ...crud('/customers', 'customers', true),
  ...crud('/cards', 'cards', true, '/customers/:customer'),
  route('GET', '/customers/:customer/subscriptions', 'customers.subscriptions.list'),
  route('GET', '/customers/:customer/subscriptions/:id', 'customers.subscriptions.retrieve'),
  ...crud('/plans', 'plans', true),
  ...crud('/subscriptions', 'subscriptions', true),
  ...['pause', 'resume', 'cancel'].map((action) => route('POST', `/subscriptions/:id/${action}`, `subscriptions.${action}`)),
  route('GET', '/statements', 'statements.list'),
  route('GET', '/statements/:id', 'statements.retrieve'),
  route('POST', '/statements/:id/statement_urls', 'statements.statement_urls'),
  route('GET', '/balances', 'balances.list'),
  route('GET', '/balances/:id', 'balances.retrieve'),
  route('POST', '/balances/:id/statement_urls', 'balances.statement_urls'),
  route('GET', '/terms', 'terms.list'),
  route('GET', '/terms/:id', 'terms.retrieve'),
  ...crud('/tenants', 'tenants', true),
  route('POST', '/tenants/:id/application_urls', 'tenants.application_urls'),
  // Transfers after the settlement overhaul (src/settlement/transfers.ts).
  ...['transfers', 'tenant_transfers'].flatMap((resource) => [
    route('GET', `/${resource}`, `${resource}.list`),
    route('GET', `/${resource}/:id`, `${resource}.retrieve`),
    route('GET', `/${resource}/:id/charges`, `${resource}.charges`),
  ]),
  route('POST', '/tenant_transfers/:id/statement_urls', 'tenant_transfers.statement_urls'),
  route('POST', '/three_d_secure_requests', 'three_d_secure_requests.create'),
  route('GET', '/three_d_secure_requests', 'three_d_secure_requests.list'),
  route('GET', '/three_d_secure_requests/:id', 'three_d_secure_requests.retrieve'),
  route('GET', '/events', 'events.list'),
  route('GET', '/events/:id', 'events.retrieve'),
  route('GET', '/accounts', 'accounts.retrieve'),
];

/** Where the statement download URL is served (unauthenticated: the signed token is the credential). */
export const STATEMENT_DOWNLOAD_PATH = '/v1/statements/download';
/** Where a tenant's application page is served (unauthenticated, like the statement download; not under
 * /v1/tenants/, where a tenant's chosen id could be `application`). */
export const TENANT_APPLICATION_PATH = '/v1/tenant_application';

/** The paths a route pattern (`/v1/charges/:id`) answers, as a regular expression of the path. */
export function routePattern(path: string): RegExp {
  return new RegExp(`^${path.replace(/:[a-z_]+/g, '[^/]+')}/?$`);
}

const PATTERNS = V1_ROUTES.map((r) => ({ method: r.method, pattern: routePattern(r.path) }));

/** The methods some route answers at `url` (path only): a non-empty answer makes a miss a 405. */
export function methodsAt(url: string): HttpMethod[] {
  const path = url.split('?')[0]!;
  return [...new Set(PATTERNS.filter((p) => p.pattern.test(path)).map((p) => p.method))];
}
