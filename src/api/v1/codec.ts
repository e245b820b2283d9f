/**
 * The v1 codec: the wire format of the v1 API on one side, operations on the other.
 *
 * - decoding: a form body (POST) or query string (GET, DELETE), bracketed keys nested as the SDK
 *   encodes them (`card[number]`, `metadata[k]`), plus the path parameters → the operation's input;
 * - encoding: the operation's result → the v1 JSON object (operations already return v1 objects);
 * - errors: any thrown value → a KessaiError of the catalogue → the v1 error body (§7).
 *
 * The v2 API adds its own codec beside this one; the operations stay the same.
 */
import { isUtf8 } from 'node:buffer';
import qs from 'qs';
import { isDatabaseUnavailable, unavailableRefusal } from '../../db/errors';
import { KessaiError, reject } from '../../domain/errors';
import { PAGINATION_PARAMS, readPage, type Page } from '../../operations/pagination';
import { checkParameterText, isPlainObject, readParams, requireString } from '../../operations/params';

/**
 * Form and query decoding: nested keys, no arrays (`a[0]` stays a key), no prototype keys; every
 * name and value percent-encoded UTF-8 (qs would keep `%ED%A0%80` as that text) and without NUL
 * (checkParameterText), else `invalid_querystring` naming the parameter.
 */
export function parseForm(text: string): Record<string, unknown> {
  let parsed: Record<string, unknown>;
  try {
    parsed = qs.parse(text, { depth: 5, parseArrays: false, plainObjects: true, allowPrototypes: false, parameterLimit: 1000, throwOnLimitExceeded: true, strictDepth: true }) as Record<string, unknown>;
  } catch (error) {
    return reject('invalid_querystring', undefined, `the parameters could not be read: ${(error as Error).message}`);
  }
  checkPercentEncoding(text);
  checkParameterText(parsed);
  return parsed;
}

/** A request body as text: UTF-8, else refused (decoding would replace the bad bytes silently). */
export function bodyText(body: Buffer): string {
  if (!isUtf8(body)) reject('invalid_querystring', undefined, 'the request body is not valid UTF-8');
  return body.toString('utf8');
}

/** Decoded form text (`+` is a space), or undefined when the escapes are not UTF-8. */
function decodeFormText(text: string): string | undefined {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    return undefined;
  }
}

/** Every name and value of a form decodes as UTF-8, else `invalid_querystring` naming the parameter. */
function checkPercentEncoding(text: string): void {
  // Most forms have no escape that could be wrong.
  if (!text.includes('%')) return;
  for (const part of text.split('&')) {
    const equals = part.indexOf('=');
    const name = decodeFormText(equals === -1 ? part : part.slice(0, equals));
    if (name === undefined) reject('invalid_querystring', undefined, 'a parameter name is not valid percent-encoded UTF-8');
    if (equals !== -1 && decodeFormText(part.slice(equals + 1)) === undefined) reject('invalid_querystring', name, `${name} is not valid percent-encoded UTF-8`);
  }
}

/** Where a query string's refusal waits for the request's hooks (see parseQuery). */
const QUERY_REFUSAL = Symbol('query refusal');

/**
 * The server's query string parser: parseForm, except that it never throws. Fastify parses the
 * query while it routes, outside every hook and handler, where a throw would stop the process;
 * the refusal is kept on the (otherwise empty) result and thrown by `throwQueryRefusal` in the
 * request's first hook, so it leaves as any other refusal.
 */
export function parseQuery(text: string): Record<string, unknown> {
  try {
    return parseForm(text);
  } catch (error) {
    return { [QUERY_REFUSAL]: error };
  }
}

/** Throws the refusal parseQuery kept for this query, if any. */
export function throwQueryRefusal(query: unknown): void {
  if (query !== null && typeof query === 'object' && QUERY_REFUSAL in query) throw (query as { [QUERY_REFUSAL]: unknown })[QUERY_REFUSAL];
}

/**
 * The operation's input from the decoded body or query and the path parameters. A parameter sent
 * both in the path and in the body is refused (`invalid_param_key` naming it): the path names the
 * object, the body cannot rename it.
 */
export function decodeV1Input(pathParams: Readonly<Record<string, string>>, fields: unknown): Record<string, unknown> {
  const given = fields === undefined || fields === null || fields === '' ? {} : fields;
  if (!isPlainObject(given)) return reject('invalid_querystring', undefined, 'the request body must be a form (application/x-www-form-urlencoded)');
  for (const key of Object.keys(pathParams)) {
    if (Object.hasOwn(given, key)) reject('invalid_param_key', key, `unknown parameter ${key}`);
  }
  return { ...pathParams, ...given };
}

/** Fastify's own refusals (routing, body reading) in the catalogue's terms. */
const FRAMEWORK_ERRORS: Readonly<Record<string, (error: Error) => KessaiError>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: () => new KessaiError('payload_too_large', { message: 'the request body is too large' }),
  FST_ERR_CTP_INVALID_MEDIA_TYPE: () => new KessaiError('invalid_querystring', { message: 'the request body must be a form (application/x-www-form-urlencoded)' }),
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: () => new KessaiError('invalid_querystring', { message: 'the request body does not match its Content-Length' }),
  FST_ERR_CTP_EMPTY_TYPE: () => new KessaiError('invalid_querystring', { message: 'the request body has an empty Content-Type' }),
  FST_ERR_CTP_INVALID_TYPE: () => new KessaiError('invalid_querystring', { message: 'the request body has an invalid Content-Type' }),
  FST_ERR_BAD_URL: () => new KessaiError('not_found', { message: 'Unrecognized request URL.' }),
  FST_ERR_MAX_PARAM_LENGTH: () => new KessaiError('not_found', { message: 'Unrecognized request URL.' }),
};

/**
 * Any thrown value as a catalogue error: a database that could not be reached is 503
 * `service_unavailable` (db/errors.ts); anything else unforeseen is `payjp_wrong` with no internals.
 */
export function toV1Error(error: unknown): KessaiError {
  if (error instanceof KessaiError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && Object.hasOwn(FRAMEWORK_ERRORS, code)) return FRAMEWORK_ERRORS[code]!(error as Error);
  const status = (error as { statusCode?: unknown } | null)?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) return new KessaiError('invalid_querystring', { message: 'the request could not be read' });
  if (isDatabaseUnavailable(error)) return unavailableRefusal(error);
  return new KessaiError('payjp_wrong', { message: 'An unexpected error occurred.' });
}

/** The input of an operation that names one object and takes nothing else (retrieve, delete). */
export function decodeId(input: unknown): { readonly id: string } {
  return { id: requireString(readParams(input, ['id']), 'id') };
}

/** The input of a list operation that takes the pagination parameters only (v1 §4.1). */
export function decodePage(input: unknown): Page {
  return readPage(readParams(input, PAGINATION_PARAMS));
}

