/**
 * Large text parameters (the JSON document of a whole batch, the documents of a batch's events)
 * travel as UTF-8 bytes: a bytea parameter in binary format, turned back into text by the server
 * (`convert_from`, which also checks the encoding). Both drivers send a string parameter through
 * JavaScript: PGlite measures its UTF-8 length character by character and encodes it again
 * (a large share of a simulated year, profiled: docs/decisions/performance.md); Buffer.from encodes it natively once.
 * PGlite must pass bytes through unchanged (its default bytea serializer writes hex): see
 * PGLITE_SERIALIZERS. node-postgres sends a Buffer in binary format by itself.
 */
import { sql, type RawBuilder } from 'kysely';

/** `text` (or text already encoded as UTF-8 bytes) as a parameter expression of type text, sent as UTF-8 bytes. */
export function utf8Text(text: string | Buffer): RawBuilder<string> {
  return sql<string>`convert_from(${typeof text === 'string' ? Buffer.from(text, 'utf8') : text}::bytea, 'UTF8')`;
}

/** PGlite parameter serializers: bytea (oid 17) values go to the wire as they are, in binary format. */
export const PGLITE_SERIALIZERS: Record<number, (value: unknown) => string> = {
  17: (value) => value as string,
};
