/**
 * Parameter checks at the boundary (pg-boss style `assert*`/`check*` helpers): an operation reads
 * its raw parameters here once and works with plain typed data afterwards.
 *
 * Parameters arrive as the v1 form body or query string would carry them, decoded into nested JSON:
 * `card[number]=4242…` is `{ card: { number: '4242…' } }`. Values are usually strings (form bodies
 * have no other type); scenarios and tests may pass numbers and booleans directly. Errors name the
 * parameter in form syntax (`card[number]`), as the v1 error's `param` does.
 */
import { reject, type ErrorCode } from '../domain/errors';

/** An operation's parameters after `readParams`: a plain object with only allowed keys. */
export type Params = Readonly<Record<string, unknown>>;

/** Where a parameter sits: top level (`email`) or inside a nested object (`card[number]`). */
export interface ParamOptions {
  /** The form name of the enclosing object, e.g. `card`. */
  readonly parent?: string;
  /** The catalogue code for a value of the wrong shape (default `invalid_param_key`, see below). */
  readonly code?: ErrorCode;
}

/**
 * The v1 catalogue has no generic "invalid value" code; where no specific code exists, a bad value
 * is `invalid_param_key` on the parameter, as accounts.ts already does for `term_cycle`.
 */
const DEFAULT_INVALID: ErrorCode = 'invalid_param_key';

/** The form-syntax name of a key: `paramName('number', 'card')` → `card[number]`. */
export function paramName(key: string, parent?: string): string {
  return parent === undefined ? key : `${parent}[${key}]`;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** A lone surrogate: a string that is not Unicode text (it has no UTF-8 encoding). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Refuses text no parameter may carry, wherever it sits in `value` (strings and the names of
 * nested parameters): a NUL character (PostgreSQL stores no NUL in text) or a lone surrogate (not
 * Unicode text). The one check of every request's parameters — form bodies and query strings,
 * JSON bodies, path parameters — made when they are read (src/api/v1/codec.ts, src/api/v2/codec.ts,
 * src/api/server.ts), so no operation meets such text. `invalid_querystring` naming the parameter
 * in form syntax (`card[name]`, `line_items[0][price]`). Recursion is bounded by the parsers'
 * nesting limits.
 */
export function checkParameterText(value: unknown, name?: string): void {
  if (typeof value === 'string') {
    if (value.includes('\0')) reject('invalid_querystring', name, `${name ?? 'a parameter'} contains a NUL character`);
    if (LONE_SURROGATE.test(value)) reject('invalid_querystring', name, `${name ?? 'a parameter'} is not valid Unicode text`);
    return;
  }
  if (Array.isArray(value)) {
    value.forEach((item, i) => checkParameterText(item, `${name ?? ''}[${i}]`));
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  for (const [key, item] of Object.entries(value)) {
    const itemName = paramName(key, name);
    checkParameterText(key, itemName);
    checkParameterText(item, itemName);
  }
}

/**
 * Checks that `input` is a plain object whose keys are all in `allowed` and returns it. Absent
 * parameters (undefined or null) read as `{}`, so operations without parameters accept no argument.
 * The first key not allowed, in the order sent, gives `invalid_param_key` naming it (v1 §7: "an
 * unknown parameter gives 400 invalid_param_key with param naming it"). Keys whose value is
 * undefined count as not sent.
 */
export function readParams(input: unknown, allowed: readonly string[], parent?: string): Params {
  if (input === undefined || input === null) return {};
  if (!isPlainObject(input)) {
    if (parent === undefined) return reject('invalid_querystring', undefined, 'parameters must be an object of names and values');
    return reject(DEFAULT_INVALID, parent, `${parent} must be given as nested parameters such as ${parent}[${allowed[0] ?? 'key'}]`);
  }
  for (const key of Object.keys(input)) {
    if (input[key] === undefined) continue;
    if (!allowed.includes(key)) reject('invalid_param_key', paramName(key, parent), `unknown parameter ${paramName(key, parent)}`);
  }
  return input;
}

/** True when the parameter was sent (with any value other than undefined or null). */
export function hasParam(params: Params, key: string): boolean {
  return params[key] !== undefined && params[key] !== null;
}

export function requireString(params: Params, key: string, options: ParamOptions = {}): string {
  const value = optionalString(params, key, options);
  if (value === undefined) return reject('missing_param', paramName(key, options.parent), `${paramName(key, options.parent)} is required`);
  return value;
}

export function optionalString(params: Params, key: string, options: ParamOptions = {}): string | undefined {
  const value = params[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') return reject(options.code ?? DEFAULT_INVALID, paramName(key, options.parent), `${paramName(key, options.parent)} must be a string`);
  return value;
}

export interface EnumOptions extends ParamOptions {
  /** The refusal's message (default: `<param> must be one of <allowed>, got <value>`). */
  readonly message?: string;
}

/**
 * An optional string that must be one of `allowed`: a value of the wrong shape or outside the
 * list is refused with `code` (default `invalid_param_key`), naming the parameter.
 */
export function optionalEnum<T extends string>(params: Params, key: string, allowed: readonly T[], options: EnumOptions = {}): T | undefined {
  const value = optionalString(params, key, options);
  if (value === undefined || (allowed as readonly string[]).includes(value)) return value as T | undefined;
  const name = paramName(key, options.parent);
  return reject(options.code ?? DEFAULT_INVALID, name, options.message ?? `${name} must be one of ${allowed.join(', ')}, got ${JSON.stringify(value)}`);
}

export interface IntegerOptions extends ParamOptions {
  readonly min?: number;
  readonly max?: number;
}

// Up to 15 digits: every such integer is exact in a JavaScript number.
const INTEGER_TEXT = /^-?\d{1,15}$/;

/** An integer given as a number or a string of digits, within [min, max] when given. */
export function optionalInteger(params: Params, key: string, options: IntegerOptions = {}): number | undefined {
  const raw = params[key];
  if (raw === undefined || raw === null) return undefined;
  const name = paramName(key, options.parent);
  let value: number | undefined;
  if (typeof raw === 'number' && Number.isSafeInteger(raw)) value = raw;
  else if (typeof raw === 'string' && INTEGER_TEXT.test(raw)) value = Number(raw);
  const range = `${options.min ?? '-∞'} to ${options.max ?? '∞'}`;
  if (value === undefined) return reject(options.code ?? DEFAULT_INVALID, name, `${name} must be an integer from ${range}, got ${JSON.stringify(raw)}`);
  if ((options.min !== undefined && value < options.min) || (options.max !== undefined && value > options.max)) {
    return reject(options.code ?? DEFAULT_INVALID, name, `${name} must be an integer from ${range}, got ${value}`);
  }
  return value;
}

/** Service rules §6: "Booleans in form bodies are accepted case-insensitively (true, True, false, False)." */
/** Service rules §6: booleans in form bodies are accepted case-insensitively (`true`, `TRUE`, `tRuE`, `False`). */
const BOOLEAN_TEXT: Readonly<Record<string, boolean>> = { true: true, false: false };

export function optionalBoolean(params: Params, key: string, options: Omit<ParamOptions, 'code'> = {}): boolean | undefined {
  const raw = params[key];
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw === 'boolean') return raw;
  // hasOwn, not `in`: "constructor" must not find Object.prototype's member.
  if (typeof raw === 'string' && Object.hasOwn(BOOLEAN_TEXT, raw.toLowerCase())) return BOOLEAN_TEXT[raw.toLowerCase()];
  return reject('invalid_boolean', paramName(key, options.parent), `${paramName(key, options.parent)} must be true or false, got ${JSON.stringify(raw)}`);
}

/**
 * A chosen id (`id` on create): half-width letters, digits, `_` and `-`, 1 to 100 characters
 * (docs/decisions/customers-and-cards.md), else `invalid_flexible_id` on `id`.
 */
export const FLEXIBLE_ID_PATTERN = /^[A-Za-z0-9_-]{1,100}$/;

export function optionalFlexibleId(params: Params, key = 'id'): string | undefined {
  const chosen = optionalString(params, key, { code: 'invalid_flexible_id' });
  if (chosen !== undefined && !FLEXIBLE_ID_PATTERN.test(chosen)) reject('invalid_flexible_id', key, `${key} must be 1 to 100 half-width letters, digits, underscores or hyphens`);
  return chosen;
}

/**
 * An optional free text of at most `maxLength` characters (code points): undefined when not sent,
 * null when sent empty (it clears the field), else the text; too long is `invalid_string_length`.
 */
export function optionalText(params: Params, key: string, maxLength: number): string | null | undefined {
  const text = optionalString(params, key, { code: 'invalid_string_length' });
  if (text === undefined) return undefined;
  if ([...text].length > maxLength) reject('invalid_string_length', key, `${key} must be at most ${maxLength} characters`);
  return text === '' ? null : text;
}

/** The changes an update sends: the fields that were sent (not undefined), for an UPDATE's SET. */
export function sentFields<T extends Record<string, unknown>>(fields: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) as { [K in keyof T]?: Exclude<T[K], undefined> };
}
