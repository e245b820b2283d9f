/**
 * The v2 codec (official-sdks.md §1): the wire format of the v2 API on one side,
 * operations on the other, as the `@payjp/payjpv2` SDK speaks it.
 *
 * - requests: JSON bodies (bounded by the server's body limit; anything but a JSON object is 422),
 *   query strings for GET and DELETE, path parameters renamed to the operation's (`{payment_flow_id}`
 *   → `id`); reference fields as the SDK sends them (`customer_id`, `payment_method_id`, `price_id`)
 *   or by the seed's names (`customer`, `line_items[].price`), both read as one;
 * - answers: 200 on every success, creates included, always `Content-Type: application/json` (the
 *   SDK returns a raw stream without it), the operation's v2 object with the `*_id` reference fields
 *   beside the seed's names; ISO 8601 UTC instants; cursor lists `{ object, url, has_more, data }`;
 * - errors: any thrown value → a catalogue KessaiError → a problem document
 *   (`application/problem+json`) through src/domain/problem-details.ts, the one v2 error policy,
 *   with the field named as the caller sent it.
 *
 * `registerV2Routes` mounts a route table under `/v2` with these conventions; the v2 route table is
 * ./routes.ts, and the hosted checkout page's client endpoints can use the same function.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { KessaiError, reject } from '../../domain/errors';
import { PROBLEM_MEDIA_TYPE, toProblemDocument } from '../../domain/problem-details';
import type { Context } from '../../engine/context';
import { runOperation } from '../operations';
import { checkParameterText, isPlainObject } from '../../operations/params';
import { bodyText, decodeV1Input, toV1Error } from '../v1/codec';
import { routePattern, type HttpMethod } from '../v1/routes';
import { withRetryAfter } from '../retry-after';

export const V2_PREFIX = '/v2';
export const V2_JSON = 'application/json; charset=utf-8';

/** Reference fields the SDK names `*_id` (official-sdks.md §1) → the operation's (seed's) names. */
export type FieldRenames = Readonly<Record<string, string>>;

export interface V2Route {
  readonly method: HttpMethod;
  /** Fastify pattern under /v2, with the SDK's path parameter names: `/payment_flows/:payment_flow_id`. */
  readonly path: string;
  readonly operation: string;
  /** Path parameters → the operation's parameters (default: every path parameter is the object's `id`). */
  readonly pathParams?: FieldRenames;
  /** Request fields the SDK names differently from the operation (`{ customer_id: 'customer' }`). */
  readonly renames?: FieldRenames;
  /** A further request translation, after the renames (nested fields such as `line_items[].price_id`). */
  readonly decode?: (input: Record<string, unknown>) => Record<string, unknown>;
  /** The operation's result as the v2 object (default: as it is). */
  readonly encode?: (result: object) => object;
  /** Error fields named by `decode`'s nested renames, back in the SDK's names (`line_items.0.price` → `line_items.0.price_id`). */
  readonly errorField?: (field: string) => string;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The v2 route a request runs (its renames name the fields of its errors). */
    readonly v2Route?: V2Route;
  }
}

/**
 * How deep a JSON body may nest (objects and arrays): far above any v2 request (a checkout
 * session's line items nest 4 levels), far below what would exhaust the stack of anything that
 * walks a body (the Idempotency-Key request hash, the parameter checks).
 */
export const MAX_JSON_DEPTH = 16;

/** True when `text` nests objects and arrays deeper than `limit` (brackets inside strings do not count). */
function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/**
 * A JSON body: empty is `{}`; anything but a JSON object is refused, naming no field, and so is
 * one nested deeper than MAX_JSON_DEPTH; its text is checked as every parameter is
 * (checkParameterText: no NUL, no lone surrogate).
 */
export function parseJsonBody(text: string): Record<string, unknown> {
  if (text.trim() === '') return {};
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) return reject('invalid_querystring', undefined, `the request body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return reject('invalid_querystring', undefined, `the request body is not valid JSON: ${(error as Error).message}`);
  }
  if (!isPlainObject(parsed)) return reject('invalid_querystring', undefined, 'the request body must be a JSON object');
  checkParameterText(parsed);
  return parsed;
}

/**
 * The SDK's name or the seed's name of one field, read as the seed's: `{ customer_id: 'customer' }`
 * takes `customer_id` or `customer`; both with different values is refused naming the SDK's.
 */
export function renameFields(input: Readonly<Record<string, unknown>>, renames: FieldRenames, parent?: string): Record<string, unknown> {
  const out: Record<string, unknown> = { ...input };
  for (const [sdkName, engineName] of Object.entries(renames)) {
    if (out[sdkName] === undefined) continue;
    if (out[engineName] !== undefined && out[engineName] !== out[sdkName]) {
      const name = parent === undefined ? sdkName : `${parent}[${sdkName}]`;
      reject('invalid_param_key', name, `${name} and ${engineName} name different objects; send one of them`);
    }
    out[engineName] = out[sdkName];
    delete out[sdkName];
  }
  return out;
}

/** The answer with each SDK reference field beside the seed's (`customer` → also `customer_id`). */
export function withSdkNames<T extends object>(object: T, renames: FieldRenames): T {
  const out: Record<string, unknown> = { ...(object as Record<string, unknown>) };
  for (const [sdkName, engineName] of Object.entries(renames)) {
    if (engineName in out && !(sdkName in out)) out[sdkName] = out[engineName];
  }
  return out as T;
}

/** The inverse renames for error fields: the operation's `customer` is reported as `customer_id`. */
function errorFieldOf(route: V2Route | undefined): (field: string) => string {
  if (route === undefined) return (field) => field;
  const inverse = new Map<string, string>();
  for (const [, name] of route.path.matchAll(/:([a-z_]+)/g)) inverse.set(route.pathParams?.[name!] ?? 'id', name!);
  for (const [sdkName, engineName] of Object.entries(route.renames ?? {})) inverse.set(engineName, sdkName);
  const nested = route.errorField ?? ((field: string) => field);
  return (field) => {
    const [head, ...rest] = field.split('.');
    const renamed = inverse.get(head!);
    return nested(renamed === undefined ? field : [renamed, ...rest].join('.'));
  };
}

/** The operation's input from the path, the body (POST) or query (GET, DELETE), renamed. */
export function decodeV2Input(route: V2Route, pathParams: Readonly<Record<string, string>>, fields: unknown): Record<string, unknown> {
  const given = fields === undefined || fields === null ? {} : fields;
  if (!isPlainObject(given)) return reject('invalid_querystring', undefined, 'the request body must be a JSON object');
  const renamedPath = Object.fromEntries(Object.entries(pathParams).map(([name, value]) => [route.pathParams?.[name] ?? 'id', value]));
  const renamed = renameFields(given, route.renames ?? {});
  const input = decodeV1Input(renamedPath, renamed);
  return route.decode ? route.decode(input) : input;
}

/** Any thrown value as a catalogue error (Fastify's own refusals in the v2 terms). */
export function toV2Error(error: unknown): KessaiError {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return new KessaiError('invalid_querystring', { message: 'the request body must be JSON (Content-Type: application/json)' });
  return toV1Error(error);
}

/** The problem document of any thrown value, logged as a refusal or a fault. */
export function problemOf(request: FastifyRequest, error: unknown): ReturnType<typeof toProblemDocument> {
  const refusal = toV2Error(error);
  const problem = toProblemDocument(refusal, errorFieldOf(request.routeOptions.config?.v2Route));
  if (problem.status >= 500) request.log.error({ err: error }, 'request failed');
  else request.log.info({ code: refusal.code, param: refusal.param }, 'request refused');
  return problem;
}

/** Sends the problem document of any thrown value. */
export function sendProblem(request: FastifyRequest, reply: FastifyReply, error: unknown): FastifyReply {
  const problem = problemOf(request, error);
  return withRetryAfter(reply, problem.status).status(problem.status).type(PROBLEM_MEDIA_TYPE).send(problem);
}

export interface V2RouteOptions {
  readonly ctx: Context;
  readonly routes: readonly V2Route[];
  /** The context an operation runs with, per request (the URLs kessai serves name this server). */
  readonly contextFor?: (route: V2Route, request: FastifyRequest, input: unknown) => Context | Promise<Context>;
}

/**
 * Mounts v2 routes in their own encapsulated context: JSON bodies only, problem documents for every
 * refusal (authentication, rate limits, idempotency and unknown URLs included), JSON answers.
 * Register with `app.register(registerV2Routes, { prefix: V2_PREFIX, ctx, routes })`.
 */
export async function registerV2Routes(app: FastifyInstance, options: V2RouteOptions): Promise<void> {
  const { ctx, routes } = options;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(bodyText(body as Buffer)));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
  app.setErrorHandler((error, request, reply) => sendProblem(request, reply, error));
  const patterns = routes.map((r) => ({ method: r.method, pattern: routePattern(`${V2_PREFIX}${r.path}`) }));
  app.setNotFoundHandler(async (request) => {
    const path = request.url.split('?')[0]!;
    if (patterns.some((p) => p.pattern.test(path))) throw new KessaiError('not_allowed_method', { message: `${request.method} is not allowed on this URL` });
    throw new KessaiError('not_found', { message: 'Unrecognized request URL.' });
  });
  for (const route of routes) {
    app.route({
      method: route.method,
      url: route.path,
      config: { v2Route: route },
      handler: async (request, reply) => {
        const fields = route.method === 'POST' ? request.body : request.query;
        if (route.method === 'POST' && Object.keys(request.query as object).length > 0) {
          const [first] = Object.keys(request.query as object);
          throw new KessaiError('invalid_param_key', { param: first!, message: `unknown parameter ${first!}: POST parameters go in the JSON body` });
        }
        const input = decodeV2Input(route, request.params as Record<string, string>, fields);
        const opCtx = options.contextFor ? await options.contextFor(route, request, input) : ctx;
        const result = await runOperation(opCtx, request.caller!, route.operation, input);
        return reply.code(200).type(V2_JSON).send(route.encode ? route.encode(result) : result);
      },
    });
  }
}
