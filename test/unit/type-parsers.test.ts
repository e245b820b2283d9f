import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { OID, SHARED_PARSERS, parseDate, parseInt8, parseNumeric, parseSimpleArray, parseTimestamptz } from '../../src/db/type-parsers';

const identity = (value: string): string => value;

describe('bigint (int8) → number, refusing values past 2^53', () => {
  it('reads small, negative and zero values exactly', () => {
    expect(parseInt8('0')).toBe(0);
    expect(parseInt8('123456789')).toBe(123_456_789);
    expect(parseInt8('-42')).toBe(-42);
  });

  it('reads the largest safe integer, 2^53 − 1, exactly', () => {
    expect(parseInt8('9007199254740991')).toBe(Number.MAX_SAFE_INTEGER);
    expect(parseInt8('-9007199254740991')).toBe(Number.MIN_SAFE_INTEGER);
  });

  it('refuses 2^53 and beyond, which a number cannot hold exactly', () => {
    expect(() => parseInt8('9007199254740992')).toThrow(RangeError);
    // 2^53 + 1 would silently round to 2^53 as a number.
    expect(() => parseInt8('9007199254740993')).toThrow('bigint value 9007199254740993 is past 2^53 and cannot be read exactly');
    expect(() => parseInt8('9223372036854775807')).toThrow(RangeError);
    expect(() => parseInt8('-9007199254740993')).toThrow(RangeError);
  });
});

describe('timestamptz → Date', () => {
  it("reads PostgreSQL's UTC text '2027-01-01 00:00:00+00'", () => {
    expect(parseTimestamptz('2027-01-01 00:00:00+00').toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });

  it('reads fractional seconds (PostgreSQL prints up to microseconds; milliseconds are kept)', () => {
    expect(parseTimestamptz('2027-01-01 00:00:00.5+00').toISOString()).toBe('2027-01-01T00:00:00.500Z');
    expect(parseTimestamptz('2027-01-01 00:00:00.123456+00').toISOString()).toBe('2027-01-01T00:00:00.123Z');
  });

  it("applies an hours-only offset such as '+09'", () => {
    expect(parseTimestamptz('2027-01-01 09:00:00+09').toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(parseTimestamptz('2027-01-01 09:00:00.25+09').toISOString()).toBe('2027-01-01T00:00:00.250Z');
    expect(parseTimestamptz('2026-12-31 19:00:00-05').toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });

  it("applies an offset with minutes such as '+05:30'", () => {
    expect(parseTimestamptz('2027-01-01 05:30:00+05:30').toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });

  it('refuses unreadable text', () => {
    expect(() => parseTimestamptz('not a time')).toThrow('unreadable timestamptz not a time');
    expect(() => parseTimestamptz('2027-13-01 00:00:00+00')).toThrow('unreadable timestamptz');
    expect(() => parseTimestamptz('2027-01-01 00:00:0x+00')).toThrow('unreadable timestamptz');
  });

  it('reads every UTC text exactly as the ISO 8601 parser does (the field-by-field fast path agrees)', () => {
    fc.assert(
      fc.property(fc.integer({ min: Date.UTC(1000, 0, 1), max: Date.UTC(9999, 11, 31) }), fc.integer({ min: 0, max: 999_999 }), fc.integer({ min: 0, max: 6 }), (ms, micros, digits) => {
        const base = new Date(ms - (ms % 1000)).toISOString().slice(0, 19).replace('T', ' ');
        const fraction = digits === 0 ? '' : `.${String(micros).padStart(6, '0').slice(0, digits)}`;
        const text = `${base}${fraction}+00`;
        expect(parseTimestamptz(text).getTime()).toBe(new Date(`${text.replace(' ', 'T')}:00`).getTime());
      }),
      { numRuns: 2000 },
    );
  });
});

describe('date and numeric stay strings', () => {
  it('a date is its calendar text, with no time zone', () => {
    expect(parseDate('2027-01-31')).toBe('2027-01-31');
  });

  it('a numeric keeps every digit', () => {
    expect(parseNumeric('3.25')).toBe('3.25');
    expect(parseNumeric('12345678901234567890.01')).toBe('12345678901234567890.01');
  });
});

describe('one-dimensional array literals', () => {
  it("'{}' is an empty array", () => {
    expect(parseSimpleArray('{}', identity)).toEqual([]);
  });

  it("'{1,2,NULL}' reads elements and an unquoted NULL as null", () => {
    expect(parseSimpleArray('{1,2,NULL}', parseInt8)).toEqual([1, 2, null]);
  });

  it('a single element', () => {
    expect(parseSimpleArray('{7}', parseInt8)).toEqual([7]);
    expect(parseSimpleArray('{NULL}', parseInt8)).toEqual([null]);
  });

  it('a quoted element may contain commas', () => {
    expect(parseSimpleArray('{"a,b",c}', identity)).toEqual(['a,b', 'c']);
  });

  it('a quoted element may contain escaped quotes and backslashes', () => {
    expect(parseSimpleArray(String.raw`{"say \"hi\"","back\\slash"}`, identity)).toEqual(['say "hi"', 'back\\slash']);
  });

  it('a quoted "NULL" is the string NULL, not null', () => {
    expect(parseSimpleArray('{"NULL",NULL}', identity)).toEqual(['NULL', null]);
  });

  it('a quoted empty string is an empty string', () => {
    expect(parseSimpleArray('{"",x}', identity)).toEqual(['', 'x']);
  });

  it('quoted and unquoted elements mix, in order', () => {
    expect(parseSimpleArray('{a,"b,c",d,"e"}', identity)).toEqual(['a', 'b,c', 'd', 'e']);
  });

  it('does not call the element parser for NULL', () => {
    const seen: string[] = [];
    parseSimpleArray('{1,NULL,3}', (value) => {
      seen.push(value);
      return value;
    });
    expect(seen).toEqual(['1', '3']);
  });
});

describe('the shared parser table, keyed by type OID', () => {
  it('reads a timestamptz array as Dates', () => {
    const parse = SHARED_PARSERS[OID.timestamptzArray]!;
    const values = parse('{"2027-01-01 00:00:00+00","2027-01-02 09:00:00.5+09",NULL}') as (Date | null)[];
    expect(values.map((v) => v?.toISOString() ?? null)).toEqual(['2027-01-01T00:00:00.000Z', '2027-01-02T00:00:00.500Z', null]);
  });

  it('reads int8, date and numeric arrays', () => {
    expect(SHARED_PARSERS[OID.int8Array]!('{10,-20}')).toEqual([10, -20]);
    expect(SHARED_PARSERS[OID.dateArray]!('{2027-01-01,2027-02-28}')).toEqual(['2027-01-01', '2027-02-28']);
    expect(SHARED_PARSERS[OID.numericArray]!('{3.25,NULL}')).toEqual(['3.25', null]);
  });

  it('an int8 array refuses an element past 2^53', () => {
    expect(() => SHARED_PARSERS[OID.int8Array]!('{1,9007199254740993}')).toThrow(RangeError);
  });

  it('uses the PostgreSQL type OIDs', () => {
    expect(OID).toEqual({ int8: 20, int8Array: 1016, date: 1082, dateArray: 1182, numeric: 1700, numericArray: 1231, timestamptz: 1184, timestamptzArray: 1185 });
  });
});
