/**
 * The HTTP server of the v1 API (Fastify 5): authentication, the v1 codec, one error policy, and a
 * route per v1 operation (routes.ts). Built by `buildServer`, so tests run the real server on port
 * 0 and `kessai serve` (src/cli/serve.ts) on its configured address.
 *
 * Order of a request: onRequest authentication (decorates `request.caller`) → the request policies
 * (rate limits, idempotency: `options.requestPolicies`) → the route: decode, run the operation,
 * encode. Every refusal, Fastify's own included, leaves through `setErrorHandler` as the v1 body;
 * the v2 API (`/v2`, src/api/v2/) is mounted in its own context with JSON bodies and problem
 * documents, after the same authentication and request policies.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import { authenticate, KeyCache, type Caller } from '../accounts/accounts';
import { CHECKOUT_PAGE_PATH } from '../checkout/checkout-sessions';
import { KessaiError } from '../domain/errors';
import type { Context } from '../engine/context';
import { silentLogger, type Logger } from '../engine/logger';
import { checkParameterText } from '../operations/params';
import { runOperation } from './operations';
import { balanceStatementsCsv } from '../settlement/balance-statement-urls';
import { claimedKindOf, statementCsv } from '../settlement/statement-urls';
import { tenantApplicationPage } from '../tenants/application-urls';
import { browserRoutes, CORS_HEADERS, preflightHeaders } from './cors';
import { installDrain } from './drain';
import { registerHostedCheckout } from './hosted-checkout';
import { registerTestClockRoutes } from './test-clock-routes';
import type { JobDefinition } from '../engine/job';
import { requestOnClock } from '../test-clocks/test-clocks';
import { registerV1ThreeDSecurePage } from './v1-three-d-secure-page';
import { operationContext } from './idempotency';
import { sendRefusal } from './refusal';
import { bodyText, decodeV1Input, parseForm, parseQuery, throwQueryRefusal } from './v1/codec';
import { registerV2Routes, V2_PREFIX } from './v2/codec';
import { V2_ROUTES } from './v2/routes';
import { methodsAt, STATEMENT_DOWNLOAD_PATH, TENANT_APPLICATION_PATH, V1_ROUTES, type V1Route } from './v1/routes';

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated caller (null on the unauthenticated routes: health, statement download). */
    caller: Caller | null;
  }
  interface FastifyContextConfig {
    /** True on the routes that need no API key. */
    readonly public?: boolean;
    /** True on the routes that answer a browser with a page: their refusals are pages too (src/api/refusal.ts). */
    readonly page?: boolean;
  }
}

/** Default request-body bound: 64 KiB is far above any v1 form (metadata: 20 keys of 500 characters). */
export const DEFAULT_BODY_LIMIT = 64 * 1024;

/**
 * Default bound on receiving one whole request, headers and body (`--request-timeout`): a form or
 * JSON body of at most the body limit arrives in well under a second; a client that drips its body
 * is cut off here rather than holding a socket (and its buffered body) for ever.
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
/** Bound on receiving a request's headers (never above the request bound). */
export const HEADERS_TIMEOUT_MS = 10_000;
/** How often the HTTP server looks for connections past those bounds (Node's default is 30 s, which would triple a short bound). */
const TIMEOUT_CHECK_INTERVAL_MS = 1_000;

export interface ServerOptions {
  readonly ctx: Context;
  /** Request logs (pino); default: the context's logger. */
  readonly log?: Logger;
  readonly bodyLimit?: number;
  /** The longest a client may take to send one whole request, headers and body (default DEFAULT_REQUEST_TIMEOUT_MS); past it the connection is closed (408). */
  readonly requestTimeoutMs?: number;
  /** TLS certificate and key (PEM): the server speaks HTTPS. */
  readonly https?: { readonly cert: string | Buffer; readonly key: string | Buffer };
  /**
   * REQUEST POLICIES GO HERE: plugins registered after authentication and before the routes, with
   * `request.caller` set (rate limits per account, zone and mode; Idempotency-Key handling).
   */
  readonly requestPolicies?: (app: FastifyInstance) => Promise<void>;
  /**
   * THE OPERATOR SURFACES GO HERE (src/api/admin/operator-surfaces.ts): /admin, /console, /metrics
   * and the API metrics hooks, registered before every other route, with their own credential.
   */
  readonly operate?: (app: FastifyInstance) => Promise<void>;
  /** The worker's jobs: test clocks are served (src/api/test-clock-routes.ts) and an advance runs these. */
  readonly testClockJobs?: readonly JobDefinition[];
}

/**
 * The API key of an `Authorization` header, or undefined when none is sent: the HTTP Basic user
 * name (the password is empty; the v1 SDK), or a Bearer token (the v2 SDK, official-sdks.md §1;
 * v2 accepts both schemes, and so does v1: one key, one check).
 */
export function apiKeyOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const bearer = /^Bearer\s+(\S+)$/i.exec(header.trim());
  if (bearer) return bearer[1]!;
  const match = /^Basic\s+(\S+)$/i.exec(header.trim());
  if (!match) return '';
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon === -1 ? decoded : decoded.slice(0, colon);
}

/**
 * The bases of the URLs kessai serves: configured (the checkout page: `--public-url` /
 * KESSAI_PUBLIC_URL), or this server's own address as the caller reached it.
 */
function urlBases(ctx: Context, request: FastifyRequest): Pick<Context['config'], 'statementDownloadBaseUrl' | 'tenantApplicationBaseUrl' | 'checkoutPageBaseUrl'> {
  const origin = `${request.protocol}://${request.host}`;
  return {
    statementDownloadBaseUrl: ctx.config.statementDownloadBaseUrl ?? `${origin}${STATEMENT_DOWNLOAD_PATH}`,
    tenantApplicationBaseUrl: ctx.config.tenantApplicationBaseUrl ?? `${origin}${TENANT_APPLICATION_PATH}`,
    checkoutPageBaseUrl: ctx.config.checkoutPageBaseUrl ?? `${origin}${CHECKOUT_PAGE_PATH}/`,
  };
}

/** The context of one request: the engine's, with the URL bases of this server. */
const requestContext = (ctx: Context, request: FastifyRequest): Context => ({ ...ctx, config: { ...ctx.config, ...urlBases(ctx, request) } });

/** Creating a token with the secret key needs the SDK's direct-generation header (official-sdks.md §4). */
function checkTokenKey(route: V1Route, caller: Caller, request: FastifyRequest): void {
  if (route.operation !== 'tokens.create' || caller.kind !== 'secret') return;
  if (String(request.headers['x-payjp-direct-token-generate']).toLowerCase() !== 'true') {
    throw new KessaiError('invalid_api_key', { message: 'Creating a token with a secret key needs the header X-Payjp-Direct-Token-Generate: true; use the public key.' });
  }
}

export async function buildServer(options: ServerOptions): Promise<FastifyInstance> {
  const { ctx } = options;
  const log = options.log ?? ctx.log ?? silentLogger();
  const requestTimeout = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  // Node's own server options: the headers bound and how often both bounds are checked.
  const timeouts = { headersTimeout: Math.min(HEADERS_TIMEOUT_MS, requestTimeout), connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS };
  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    bodyLimit: options.bodyLimit ?? DEFAULT_BODY_LIMIT,
    genReqId: () => `req_${randomUUID()}`,
    // Never throws: it runs while Fastify routes (see parseQuery; the first hook below refuses).
    routerOptions: { querystringParser: parseQuery },
    return503OnClosing: true,
    // A path Fastify cannot decode (`/v1/charges/%`) or an over-long path parameter: the catalogue's refusal, not Fastify's body.
    frameworkErrors: (error, request, reply) => sendRefusal(request, reply, error),
    // Fastify's own request lines (whose `req.url` the logger would not redact) are replaced by ours (onRequest, onResponse).
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
    requestTimeout,
    ...(options.https ? { https: { cert: options.https.cert, key: options.https.key, ...timeouts } } : { http: timeouts }),
  }) as unknown as FastifyInstance;
  app.setReplySerializer((payload) => JSON.stringify(payload));

  // Only form bodies: a JSON or any other body is refused (FST_ERR_CTP_INVALID_MEDIA_TYPE → 400).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, (_request, body, done) => {
    try {
      done(null, parseForm(bodyText(body as Buffer)));
    } catch (error) {
      done(error as Error, undefined);
    }
  });

  // Before every other hook: once the server stops (drainServer), a new request is refused before anything runs.
  installDrain(app);
  app.decorateRequest('caller', null);
  // First of all: a query string or path parameter that could not be read is refused (v1 body or problem document).
  app.addHook('onRequest', async (request) => {
    throwQueryRefusal(request.query);
    checkParameterText(request.params);
  });
  if (options.operate) await options.operate(app);
  // This server's memory of the keys it authenticated (a busy key is looked up once a second; see KeyCache).
  const keys = new KeyCache();
  // Browser calls from a merchant's page are cross-origin: CORS only on the routes of what the
  // public key may do (./cors.ts); a preflight for one is answered here, before authentication.
  const browserCallable = browserRoutes([...V1_ROUTES, ...V2_ROUTES.map((route) => ({ ...route, path: `${V2_PREFIX}${route.path}` }))]);
  app.addHook('onRequest', async (request, reply) => {
    if (request.headers.origin === undefined) return;
    const asked = request.headers['access-control-request-method'];
    if (request.method === 'OPTIONS' && typeof asked === 'string') {
      if (browserCallable.allows(asked.toUpperCase(), request.url)) return reply.code(204).headers(preflightHeaders(asked.toUpperCase())).send();
      return;
    }
    if (browserCallable.allows(request.method, request.url)) reply.headers(CORS_HEADERS);
  });
  app.addHook('onRequest', async (request, reply) => {
    // The access line is written when the request ends (onResponse); this one only at debug level
    // (its fields are not even built below that level: this hook runs for every request).
    if (request.log.level === 'debug' || request.log.level === 'trace') request.log.debug({ method: request.method, url: request.url }, 'request received');
    if (request.routeOptions.config.public === true) return;
    request.caller = await authenticate(ctx, apiKeyOf(request.headers.authorization), keys);
    // A secret key sent from a browser gets no CORS answer, even on a route the public key may call.
    if (request.caller.kind === 'secret') reply.removeHeader('access-control-allow-origin');
  });

  app.addHook('onResponse', async (request, reply) => {
    // One line a request, written at its end as an access log is: method, URL (the logger redacts
    // it: src/engine/redact-url.ts), status, time.
    request.log.info({ method: request.method, url: request.url, status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, 'request');
  });

  app.setErrorHandler((error, request, reply) => {
    void sendRefusal(request, reply, error);
  });

  app.setNotFoundHandler(async (request) => {
    // Authentication ran (onRequest hooks run for unknown URLs too): a caller without a key is 401.
    if (methodsAt(request.url).length > 0) throw new KessaiError('not_allowed_method', { message: `${request.method} is not allowed on this URL` });
    throw new KessaiError('not_found', { message: 'Unrecognized request URL.' });
  });

  app.get('/health', { config: { public: true } }, async () => {
    await ctx.db.selectNoFrom((eb) => eb.lit(1).as('one')).execute();
    return { status: 'ok' };
  });

  app.get(STATEMENT_DOWNLOAD_PATH, { config: { public: true } }, async (request, reply) => {
    const token = (request.query as Record<string, unknown>).token;
    if (typeof token !== 'string') throw new KessaiError('not_found', { param: 'token', message: 'This statement URL does not exist or has expired.' });
    // One mechanism, one download address: the token says whether it names a statement or a balance.
    const csv = claimedKindOf(token) === 'balance' ? await balanceStatementsCsv(ctx, token) : await statementCsv(ctx, token);
    return reply.type('text/csv; charset=utf-8').header('content-disposition', 'attachment; filename="statement.csv"').send(csv);
  });

  app.get(TENANT_APPLICATION_PATH, { config: { public: true } }, async (request, reply) => {
    const token = (request.query as Record<string, unknown>).token;
    if (typeof token !== 'string') throw new KessaiError('not_found', { param: 'token', message: 'This application URL does not exist or has expired.' });
    const page = await tenantApplicationPage(ctx, token);
    return reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(page);
  });

  // The buyer's pages and the browser script (no API key; src/api/hosted-checkout.ts).
  await registerHostedCheckout(app, ctx, (request) => requestContext(ctx, request));
  // The issuer's screen of v1 3-D Secure's redirect workflow (src/api/v1-three-d-secure-page.ts).
  registerV1ThreeDSecurePage(app, ctx);

  if (options.requestPolicies) await options.requestPolicies(app);

  // The v2 API in its own context: JSON bodies, problem documents (src/api/v2/codec.ts).
  await app.register(registerV2Routes, {
    prefix: V2_PREFIX,
    ctx,
    routes: V2_ROUTES,
    contextFor: async (route, request, input) => requestOnClock(operationContext(request, requestContext(ctx, request)), request.caller!, route.operation, input),
  });
  if (options.testClockJobs) registerTestClockRoutes(app, { ctx, jobs: options.testClockJobs });

  for (const route of V1_ROUTES) {
    app.route({
      method: route.method,
      url: route.path,
      handler: async (request, reply) => {
        const caller = request.caller!;
        checkTokenKey(route, caller, request);
        const fields = route.method === 'POST' ? request.body : request.query;
        if (route.method === 'POST' && Object.keys(request.query as object).length > 0) {
          const [first] = Object.keys(request.query as object);
          throw new KessaiError('invalid_param_key', { param: first!, message: `unknown parameter ${first!}: POST parameters go in the form body` });
        }
        const input = decodeV1Input(request.params as Record<string, string>, fields);
        if (route.needsParams && Object.keys(input).length === Object.keys(request.params as object).length) {
          throw new KessaiError('no_param', { message: 'no parameter was set: an update needs at least one parameter to change' });
        }
        // Under an Idempotency-Key the operation runs in the request transaction (./idempotency.ts).
        const opCtx = await requestOnClock(operationContext(request, requestContext(ctx, request)), caller, route.operation, input);
        const result = await runOperation(opCtx, caller, route.operation, input);
        return reply.type('application/json; charset=utf-8').send(result);
      },
    });
  }
  return app;
}
