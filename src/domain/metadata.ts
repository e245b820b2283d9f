/**
 * Merchant metadata: the shape and limits of v1 §2.10 / §8 and v2 §2.6 / §8, and how an update
 * merges into what is stored. One set of rules for both API versions; they differ only in the value
 * types v1 accepts (strings) and in how v1 form syntax spells "clear everything".
 */
import { reject } from './errors';
import { METADATA_LIMITS } from './limits';


/** v1 §2.10: the v1 objects whose metadata can be set and updated. */
export const V1_METADATA_OBJECTS = ['charge', 'customer', 'card', 'plan', 'subscription'] as const;
export type V1MetadataObject = (typeof V1_METADATA_OBJECTS)[number];

export type MetadataFlavour = 'v1' | 'v2';

/** v2 §2.6: string, integer or boolean; v1 §2.10 allows strings only. */
export type MetadataValue = string | number | boolean;
export type Metadata = Readonly<Record<string, MetadataValue>>;

/** The parameter an error names: the whole object, or one key in form syntax (`metadata[order_id]`). */
export function metadataParam(key?: string): string {
  return key === undefined ? 'metadata' : `metadata[${key}]`;
}

// Square brackets would make the key ambiguous in v1 form syntax (`metadata[a[b]]=`) and in the
// `param` of an error; control characters (newlines, NUL) break form bodies and log lines.
const FORBIDDEN_KEY_CHARACTER = /[\p{Cc}[\]]/u;

/** Length in code points, so a Japanese or emoji key counts one per character, not per UTF-16 unit. */
function characterCount(text: string): number {
  let count = 0;
  for (const _ of text) count += 1;
  return count;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

function checkKey(key: string): void {
  if (key.length === 0) reject('invalid_metadata_key', metadataParam(key), 'metadata keys must not be empty');
  if (characterCount(key) > METADATA_LIMITS.maxKeyLength) {
    reject('invalid_metadata_key', metadataParam(key), `metadata keys must be at most ${METADATA_LIMITS.maxKeyLength} characters`);
  }
  if (FORBIDDEN_KEY_CHARACTER.test(key)) {
    reject('invalid_metadata_key', metadataParam(key), 'metadata keys must not contain square brackets or control characters');
  }
}

function checkValue(key: string, value: unknown, flavour: MetadataFlavour): MetadataValue {
  if (typeof value === 'string') {
    if (characterCount(value) > METADATA_LIMITS.maxValueLength) {
      reject('invalid_metadata_value', metadataParam(key), `metadata values must be at most ${METADATA_LIMITS.maxValueLength} characters`);
    }
    return value;
  }
  if (flavour === 'v2') {
    if (typeof value === 'boolean') return value;
    // Only integers JavaScript holds exactly, so what is stored is what is read back.
    if (typeof value === 'number' && Number.isSafeInteger(value)) return value;
    return reject('invalid_metadata_value', metadataParam(key), 'metadata values must be a string, an integer or a boolean (no arrays or nested objects)');
  }
  return reject('invalid_metadata_value', metadataParam(key), 'metadata values must be strings');
}

/**
 * Checks a `metadata` parameter as sent and returns it as plain data, in the order sent. Empty
 * string values are kept: in an update they mean "delete this key" (use `createMetadata` for
 * creation, `mergeMetadata` for updates).
 *
 * Checks run in a fixed order so the same bad request always gives the same error: the shape
 * (`invalid_metadata_value` on `metadata`), then the key count (`too_many_metadata_keys` on
 * `metadata`; a request may not carry more than 20 keys even if some are deletions), then each
 * entry in order, key before value (`invalid_metadata_key` / `invalid_metadata_value` on
 * `metadata[<key>]`).
 *
 * v1 only: the empty string as the whole `metadata` is read as the empty object, because form
 * syntax (`metadata=`) cannot spell `{}`.
 */
export function validateMetadata(input: unknown, flavour: MetadataFlavour): Metadata {
  if (flavour === 'v1' && input === '') return Object.freeze({});
  if (!isPlainObject(input)) return reject('invalid_metadata_value', metadataParam(), 'metadata must be an object of key-value pairs');
  const keys = Object.keys(input);
  if (keys.length > METADATA_LIMITS.maxKeys) {
    reject('too_many_metadata_keys', metadataParam(), `metadata may have at most ${METADATA_LIMITS.maxKeys} keys, got ${keys.length}`);
  }
  const entries: [string, MetadataValue][] = [];
  for (const key of keys) {
    checkKey(key);
    entries.push([key, checkValue(key, input[key], flavour)]);
  }
  // fromEntries defines own properties, so a key such as `__proto__` stays a plain key.
  return Object.freeze(Object.fromEntries(entries));
}

/**
 * Metadata of a newly created resource (v2 §2.6 rule 1): stored as sent, except that keys sent
 * with the empty string are left out, so that stored metadata never holds an empty value and
 * creating with `{ k: '' }` is the same as creating and then updating with it.
 */
export function createMetadata(input: unknown, flavour: MetadataFlavour): Metadata {
  return mergeMetadata(null, input, flavour);
}

/**
 * The stored metadata after an update (v2 §2.6 rules 3–5; v1 follows the same rules, since v1 §2.10
 * is silent and the real v1 service merges keys the same way):
 * a sent key overwrites its value (keeping its place), a new key is added at the end, keys not sent
 * are kept, a key sent with the empty string is deleted (deleting an absent key is not an error),
 * and an empty object clears everything.
 *
 * If the result would have more than 20 keys the update is refused with `too_many_metadata_keys`
 * on `metadata` and nothing changes: the function is pure, and the caller stores only what it returns.
 */
export function mergeMetadata(stored: Metadata | null | undefined, update: unknown, flavour: MetadataFlavour): Metadata {
  const sent = validateMetadata(update, flavour);
  const sentKeys = Object.keys(sent);
  if (sentKeys.length === 0) return Object.freeze({});
  const merged = new Map<string, MetadataValue>(Object.entries(stored ?? {}));
  for (const key of sentKeys) {
    const value = sent[key];
    if (value === undefined || value === '') merged.delete(key);
    else merged.set(key, value);
  }
  if (merged.size > METADATA_LIMITS.maxKeys) {
    reject('too_many_metadata_keys', metadataParam(), `metadata may have at most ${METADATA_LIMITS.maxKeys} keys; this update would leave ${merged.size}`);
  }
  return Object.freeze(Object.fromEntries(merged));
}
