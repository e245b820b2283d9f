/**
 * One set of column parsers for both backends, so that a query returns the same JavaScript values
 * on PostgreSQL (through pg) and on embedded PGlite. pg and PGlite disagree out of the box: pg
 * returns bigint as a string and date as a local-time Date, PGlite returns bigint as a BigInt or a
 * number and date as a Date at UTC midnight.
 *
 * - bigint (int8)  → number, refusing values past 2^53 (yen amounts and counts stay far below it)
 * - date           → 'YYYY-MM-DD' string (a calendar date has no time zone)
 * - numeric        → string (rates are decimal strings; code turns them into Dec on purpose)
 * - timestamptz    → Date
 */

export const OID = {
  int8: 20,
  int8Array: 1016,
  date: 1082,
  dateArray: 1182,
  numeric: 1700,
  numericArray: 1231,
  timestamptz: 1184,
  timestamptzArray: 1185,
} as const;

export function parseInt8(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new RangeError(`bigint value ${text} is past 2^53 and cannot be read exactly`);
  return value;
}

export function parseDate(text: string): string {
  return text;
}

export function parseNumeric(text: string): string {
  return text;
}

export function parseTimestamptz(text: string): Date {
  // PostgreSQL prints "2027-01-01 00:00:00+00" (session time zone is UTC); make it ISO 8601.
  const iso = text.replace(' ', 'T').replace(/([+-]\d{2})$/, '$1:00');
  const value = new Date(iso);
  if (Number.isNaN(value.getTime())) throw new RangeError(`unreadable timestamptz ${text}`);
  return value;
}

/**
 * Parses a one-dimensional PostgreSQL array literal of simple values ("{1,2,NULL}"), which is all
 * the engine selects: arrays of ids, amounts, dates and instants.
 */
export function parseSimpleArray<T>(text: string, element: (value: string) => T): (T | null)[] {
  if (text === '{}') return [];
  const inner = text.slice(1, -1);
  const out: (T | null)[] = [];
  let i = 0;
  while (i <= inner.length) {
    let raw: string;
    let quoted = false;
    if (inner[i] === '"') {
      quoted = true;
      let j = i + 1;
      raw = '';
      while (j < inner.length && inner[j] !== '"') {
        if (inner[j] === '\\') j += 1;
        raw += inner[j];
        j += 1;
      }
      i = j + 2;
    } else {
      const comma = inner.indexOf(',', i);
      const end = comma === -1 ? inner.length : comma;
      raw = inner.slice(i, end);
      i = end + 1;
    }
    out.push(!quoted && raw === 'NULL' ? null : element(raw));
  }
  return out;
}

/** The parser table, keyed by type OID, shared by both backends. */
export const SHARED_PARSERS: Readonly<Record<number, (text: string) => unknown>> = {
  [OID.int8]: parseInt8,
  [OID.int8Array]: (text) => parseSimpleArray(text, parseInt8),
  [OID.date]: parseDate,
  [OID.dateArray]: (text) => parseSimpleArray(text, parseDate),
  [OID.numeric]: parseNumeric,
  [OID.numericArray]: (text) => parseSimpleArray(text, parseNumeric),
  [OID.timestamptz]: parseTimestamptz,
  [OID.timestamptzArray]: (text) => parseSimpleArray(text, parseTimestamptz),
};
