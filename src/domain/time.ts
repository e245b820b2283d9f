/**
 * Instants and the business calendar. Storage and arithmetic are in UTC; the business calendar is
 * Japan time, UTC+9 all year (no daylight saving), so JST conversions are a fixed offset.
 */

export const JST_OFFSET_MS = 9 * 60 * 60 * 1000;
export const MS_PER_DAY = 24 * 60 * 60 * 1000;

/** v1 renders instants as UNIX seconds. */
export function toUnixSeconds(instant: Date): number {
  return Math.floor(instant.getTime() / 1000);
}

export function fromUnixSeconds(seconds: number): Date {
  return new Date(seconds * 1000);
}

/** v2 renders instants as ISO 8601 UTC strings without milliseconds. */
export function toIsoSeconds(instant: Date): string {
  // toISOString always ends in `.sssZ` (also for years past 9999): cut, not a regular expression,
  // which cost three times the formatting (the report prints two per charge).
  const iso = instant.toISOString();
  return `${iso.slice(0, -5)}Z`;
}

/** The JST calendar date of an instant, as `YYYY-MM-DD`. */
export function jstDate(instant: Date): string {
  return new Date(instant.getTime() + JST_OFFSET_MS).toISOString().slice(0, 10);
}

/**
 * An instant as people in Japan read it: `2027-01-01 00:00 +09:00` (seconds shown only when not
 * zero). For headers, errors, tables and progress; API-shaped output keeps UNIX seconds or UTC ISO.
 */
export function formatJst(instant: Date): string {
  const iso = new Date(instant.getTime() + JST_OFFSET_MS).toISOString();
  const seconds = iso.slice(16, 23) === ':00.000' ? '' : iso.slice(19, 23) === '.000' ? iso.slice(16, 19) : iso.slice(16, 23);
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)}${seconds} +09:00`;
}

/** An instant as ISO 8601 in JST, to the second: `2027-01-01T00:00:00+09:00` (CSV exports). */
export function toJstIso(instant: Date): string {
  return `${new Date(instant.getTime() + JST_OFFSET_MS).toISOString().slice(0, 19)}+09:00`;
}

/** 00:00 JST of a calendar date `YYYY-MM-DD`, as an instant. */
export function jstMidnight(date: string): Date {
  assertCalendarDate(date);
  return new Date(Date.parse(`${date}T00:00:00Z`) - JST_OFFSET_MS);
}

const DATE_PATTERN = /^(\d{4})-(\d{2})-(\d{2})$/;

export function assertCalendarDate(date: string): void {
  const match = DATE_PATTERN.exec(date);
  if (!match) throw new RangeError(`expected a date YYYY-MM-DD, got ${JSON.stringify(date)}`);
  const parsed = new Date(`${date}T00:00:00Z`);
  if (Number.isNaN(parsed.getTime()) || parsed.toISOString().slice(0, 10) !== date) {
    throw new RangeError(`no such calendar date: ${date}`);
  }
}

const INSTANT_WITH_ZONE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/;
const LOCAL_DATE_TIME = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?)?$/;

/**
 * Reads an instant as a person types it on the command line: an ISO instant with a zone is taken
 * as is; a date or a date-time without a zone is read in JST (the business calendar).
 */
export function parseInstant(text: string): Date {
  const trimmed = text.trim();
  if (INSTANT_WITH_ZONE.test(trimmed)) {
    // Date() would roll 2027-02-30 over into March; an impossible date is an error instead.
    assertCalendarDate(trimmed.slice(0, 10));
    const value = new Date(trimmed);
    if (!Number.isNaN(value.getTime())) return value;
  } else if (LOCAL_DATE_TIME.test(trimmed)) {
    const [date, time = '00:00:00'] = trimmed.split('T') as [string, string?];
    assertCalendarDate(date);
    const value = new Date(`${date}T${time.length === 5 ? `${time}:00` : time}+09:00`);
    if (!Number.isNaN(value.getTime())) return value;
  }
  throw new RangeError(`not an instant: ${JSON.stringify(text)} (use 2027-01-01, 2027-01-01T09:00 in JST, or an ISO instant with Z or an offset)`);
}
