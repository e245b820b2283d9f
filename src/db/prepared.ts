/**
 * Prepared statements for the hottest fixed statements (an API read of one object by id): a
 * statement marked with `prepared(name)` is parsed and planned once per connection, then only
 * bound and executed. On this machine PostgreSQL spent ~0.2 ms planning the charge-with-its-card
 * read, four times what executing it takes (docs/decisions/performance.md, "Prepared hot statements").
 *
 *     sql`${prepared('charges.retrieve')} SELECT … WHERE c.charge_id = ${id}`
 *
 * The mark is a comment the SQL carries (harmless wherever it is not understood: PGlite runs the
 * statement as before); PreparingClient (the pg client of connect.ts) reads it. Only for
 * statements whose text is fixed (values as parameters): each distinct text is one prepared
 * statement per connection, named after the mark and a digest of the text.
 */
import { createHash } from 'node:crypto';
import { sql, type RawBuilder } from 'kysely';
import pg from 'pg';

const MARK = '/* prepared ';
const NAME = /^[a-z][a-z0-9_.]*$/;

/** The mark of a prepared statement, to put anywhere in its SQL (first, by habit). */
export function prepared(name: string): RawBuilder<unknown> {
  if (!NAME.test(name)) throw new Error(`prepared statement name ${JSON.stringify(name)}: lower-case letters, digits, '_' and '.'`);
  return sql.raw(`${MARK}${name} */ `);
}

/** Names of the marked texts seen, so a text is digested once (bounded: emptied when full). */
const named = new Map<string, string>();

/** The name a marked statement is prepared under (mark + digest of the text), or undefined when unmarked. */
export function preparedNameOf(text: string): string | undefined {
  const known = named.get(text);
  if (known !== undefined) return known;
  const at = text.indexOf(MARK);
  if (at === -1) return undefined;
  const end = text.indexOf(' */', at + MARK.length);
  const mark = text.slice(at + MARK.length, end);
  if (end === -1 || !NAME.test(mark)) return undefined;
  const name = `${mark}_${createHash('sha1').update(text).digest('hex').slice(0, 12)}`;
  if (named.size >= 1_000) named.clear();
  named.set(text, name);
  return name;
}

/** PostgreSQL's refusal of a prepared statement whose result columns changed under it (a migration added one). */
const isStalePlan = (error: unknown): boolean => (error as { code?: string }).code === '0A000' && /cached plan must not change result type/.test(String((error as Error).message));

/**
 * The pg client of the engine's pool: runs marked statements (`prepared`) as named statements, so
 * each connection prepares them once. When a migration changed a prepared statement's tables so
 * that its result columns differ, PostgreSQL refuses it; the client then prepares the statement
 * afresh under a new name and, outside a transaction, runs it again at once (inside one the
 * transaction has failed and the caller sees the error; the next use prepares afresh).
 */
export class PreparingClient extends pg.Client {
  /** Per statement name: how many times it was prepared afresh on this connection. */
  readonly #generation = new Map<string, number>();

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  constructor(config?: any) {
    super(config);
    // A connection the server drops while it is checked out (the pool listens only to idle ones)
    // emits 'error' besides failing its query: without a listener that event would end the
    // process, where the failed query is already the caller's answer (db/errors.ts: 503).
    this.on('error', () => {});
  }

  // pg's overloads (callback, config object, submittable) pass through untouched; kysely calls
  // query(text, values) and takes the promise.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override query(config: any, values?: any, callback?: any): any {
    const base = typeof config === 'string' && callback === undefined && Array.isArray(values) && values.length > 0 ? preparedNameOf(config) : undefined;
    if (base === undefined) return super.query(config, values, callback);
    const text = config as string;
    const run = (): Promise<pg.QueryResult> => {
      const generation = this.#generation.get(base) ?? 0;
      return super.query({ name: generation === 0 ? base : `${base}_${generation}`, text, values });
    };
    const idle = this.getTransactionStatus() === 'I';
    return run().catch((error: unknown) => {
      if (!isStalePlan(error)) throw error;
      this.#generation.set(base, (this.#generation.get(base) ?? 0) + 1);
      if (!idle) throw error;
      return run();
    });
  }
}
