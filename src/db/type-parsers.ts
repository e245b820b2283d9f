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

/** The decimal number in text[start, end), or NaN if any character there is not a digit. */
function digitsAt(text: string, start: number, end: number): number {
  let value = 0;
  for (let i = start; i < end; i += 1) {
    const digit = text.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return Number.NaN;
    value = value * 10 + digit;
  }
  return value;
}

export function parseTimestamptz(text: string): Date {
  // The session time zone is UTC, so PostgreSQL prints "2027-01-01 00:00:00[.ffffff]+00". That
  // form is read field by field (a report reads hundreds of thousands of instants; rewriting each
  // to ISO 8601 for Date's parser was a visible share of a simulation, docs/decisions/performance.md). Anything
  // else (another offset, a year before 1000) goes through Date's parser.
  const n = text.length;
  if (n >= 22 && text.charCodeAt(10) === 32 && text.endsWith('+00') && (n === 22 || text.charCodeAt(19) === 46)) {
    const year = digitsAt(text, 0, 4);
    let ms = 0;
    if (n > 22) {
      // Fraction: 1–6 digits; Date keeps milliseconds, the rest is cut off as Date's parser does.
      const fraction = text.slice(20, n - 3);
      ms = digitsAt(fraction.padEnd(3, '0'), 0, 3);
      if (fraction.length > 6 || Number.isNaN(digitsAt(fraction, 0, fraction.length))) ms = Number.NaN;
    }
    const [month, day, hour, minute, second] = [digitsAt(text, 5, 7), digitsAt(text, 8, 10), digitsAt(text, 11, 13), digitsAt(text, 14, 16), digitsAt(text, 17, 19)];
    const value = new Date(Date.UTC(year, month - 1, day, hour, minute, second, ms));
    // Date.UTC rolls an out-of-range field over (February 30th → March 2nd): such text is left to Date's parser.
    const exact = value.getUTCMonth() === month - 1 && value.getUTCDate() === day && hour < 24 && minute < 60 && second < 60;
    if (year >= 1000 && exact && text[4] === '-' && text[7] === '-' && text[13] === ':' && text[16] === ':') return value;
  }
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
