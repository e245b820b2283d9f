/**
 * Instants sent to the server as epoch milliseconds (a number in a batch's JSON document or a
 * bigint array): Date's toISOString costs several times a number in Node. The server rebuilds the
 * exact instant from whole seconds plus milliseconds; to_timestamp of a fractional double would
 * round far-future instants. The arithmetic lives in the IMMUTABLE SQL function kessai_instant_ms
 * (sql/000040, body 000260): Citus evaluates it on its workers inside distributed UPDATEs, which it
 * refuses for the STABLE `timestamptz + interval` written out inline. Its body uses only immutable
 * operators, so PostgreSQL inlines it into the calling statement instead of running an SQL
 * function per row.
 */
import { sql, type RawBuilder } from 'kysely';

/** The timestamptz of an epoch-milliseconds column or expression (`column` is written as given: SQL, not a value). */
export function instantFromEpochMs(column: string): RawBuilder<Date> {
  return sql.raw<Date>(`kessai_instant_ms(${column})`);
}
