/**
 * CORS: answered only for what the public key may do, the calls a browser makes from a merchant's
 * page (v1 §5: tokens; v2 §4.8: reading and confirming a payment or setup flow with its client
 * secret). A route is browser-callable when its operation accepts the public key (the operation
 * registry's `keys`), so the rule follows the operations and is written nowhere else. Everything
 * else is for the merchant's server with the secret key, and a browser gets no CORS answer for
 * it: a secret key pasted into a web page does not work there. Credentials are the key in the
 * Authorization header, never cookies, so any origin may call.
 */
import { findOperation } from './operations';
import { routePattern, type HttpMethod } from './v1/routes';

/** The headers a browser call may carry (no X-Payjp-Direct-Token-Generate: that is the secret key's). */
const ALLOWED_HEADERS = 'Authorization, Content-Type, Idempotency-Key';

export interface BrowserRoutes {
  /** True when `method` at `url` (path and query) runs an operation the public key may run. */
  allows(method: string, url: string): boolean;
}

/** The browser-callable routes among `routes` (full paths, `:param` patterns). */
export function browserRoutes(routes: readonly { readonly method: HttpMethod; readonly path: string; readonly operation: string }[]): BrowserRoutes {
  const callable = routes.filter((route) => findOperation(route.operation)?.keys === 'secret_or_public').map((route) => ({ method: route.method, pattern: routePattern(route.path) }));
  return {
    allows: (method, url) => {
      const path = url.split('?')[0]!;
      return callable.some((route) => route.method === method && route.pattern.test(path));
    },
  };
}

/** The headers of an answer to a browser-callable route (the preflight's included). */
export const CORS_HEADERS = { 'access-control-allow-origin': '*' } as const;

/** The headers of a preflight's answer for `method`. */
export function preflightHeaders(method: string): Record<string, string> {
  return { ...CORS_HEADERS, 'access-control-allow-methods': method, 'access-control-allow-headers': ALLOWED_HEADERS, 'access-control-max-age': '600' };
}
