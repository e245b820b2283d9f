/**
 * Bulk rows, typed once: the one way a batch sends many rows to the server. The rows travel as one
 * JSON document (one text parameter, sent as UTF-8 bytes: see utf8Text) expanded server-side by
 * `json_to_recordset(…) AS x(col type, …)`. One text parameter instead of a typed array per column,
 * which node-postgres escaped element by element and the server parsed again in BIND (see
 * docs/decisions/database.md, "Bulk rows typed once, rules apart from I/O").
 *
 * A column spec names each column once: its short name (the JSON key and the record column), its
 * SQL type, and where its value comes from (a field of the row, checked against the row's type, or
 * a function of the row). The document and the column definition list are both derived from the
 * spec, so they cannot disagree (a key written one way in the document and another in the column
 * list was a silent NULL), and a column the spec does not name is a type error (and a thrown one
 * for an untyped caller).
 *
 * Instants (`instant`) travel as epoch milliseconds (Date's toJSON/toISOString cost several times a
 * number in Node), declared `bigint` in the record and rebuilt
 * exactly by `col` (instantFromEpochMs: whole seconds and milliseconds apart).
 */
import { sql, type RawBuilder } from 'kysely';
import { instantFromEpochMs } from './epoch-ms';
import { utf8Text } from './utf8-param';

/** The SQL types a bulk column can have, each with the JavaScript value it is built from. */
interface BulkTypes {
  text: string;
  boolean: boolean;
  bigint: number;
  int: number;
  smallint: number;
  numeric: string;
  date: string;
  /** A timestamptz, sent as epoch milliseconds (a `bigint` in the record). */
  instant: Date;
}
export type BulkType = keyof BulkTypes;

type FieldsOf<Row, V> = { [K in keyof Row]-?: Row[K] extends V ? K : never }[keyof Row] & string;

/** One column: its SQL type and its value, a field of the row (of a fitting type) or a function of the row. */
export type BulkColumn<Row> = {
  [T in BulkType]: readonly [T, FieldsOf<Row, BulkTypes[T] | null> | ((row: Row) => BulkTypes[T] | null)];
}[BulkType];

export type BulkSpec<Row> = Readonly<Record<string, BulkColumn<Row>>>;

/**
 * A batch's JSON document, built by BulkColumns.document (possibly ahead of the statement that
 * sends it, and then encoded ahead of it too: a caller may build it while another statement runs).
 */
export interface BulkDocument<K extends string> {
  /** The document as UTF-8 bytes (utf8Text). */
  readonly json: Buffer;
  readonly length: number;
  /** Only to tie a document to its spec's column names. */
  readonly columns?: K;
}

/** The rows of one statement: the FROM item and its columns. */
export interface BulkTable<K extends string> {
  /** `json_to_recordset(<document>::json) AS alias(col type, …)`: a FROM item. */
  readonly from: RawBuilder<unknown>;
  /** `alias.col`, an instant rebuilt as timestamptz. */
  col(name: K): RawBuilder<unknown>;
  /** Several columns, comma-separated (the SELECT list of an INSERT … SELECT). */
  cols(...names: K[]): RawBuilder<unknown>;
}

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

export class BulkColumns<Row, K extends string> {
  private readonly names: readonly K[];
  private readonly types: ReadonlyMap<string, BulkType>;
  private readonly toObject: (row: Row) => unknown;
  /** The column definition list, `a text, l boolean, …` (instants as bigint). */
  readonly definition: RawBuilder<unknown>;

  constructor(spec: Readonly<Record<K, BulkColumn<Row>>>) {
    const entries = Object.entries(spec) as [K, BulkColumn<Row>][];
    if (entries.length === 0) throw new Error('a bulk column spec needs at least one column');
    for (const [name] of entries) if (!IDENTIFIER.test(name)) throw new Error(`bulk column name ${JSON.stringify(name)} is not a plain SQL identifier`);
    this.names = entries.map(([name]) => name);
    this.types = new Map(entries.map(([name, [type]]) => [name, type]));
    // The row's object is built by a function made for this spec (an object literal of its
    // columns): JSON.stringify of such objects runs at the speed of a hand-written literal, where
    // a loop over the columns ran at half of it. The generated text holds only the spec's names
    // (checked plain identifiers, JSON-quoted) and positions: no value ever reaches it.
    const getters = entries.map(([, [, source]]) => (typeof source === 'function' ? source : (row: Row) => (row as Record<string, unknown>)[source]));
    const fields = entries.map(([name, [type]], i) => {
      const value = `(g[${i}](r) ?? null)`;
      return `${JSON.stringify(name)}: ${type === 'instant' ? `(${value}?.getTime() ?? null)` : value}`;
    });
    this.toObject = new Function('g', `return (r) => ({ ${fields.join(', ')} });`)(getters) as (row: Row) => unknown;
    this.definition = sql.raw(entries.map(([name, [type]]) => `${name} ${type === 'instant' ? 'bigint' : type}`).join(', '));
  }

  /** The JSON document of `rows` (an array of objects keyed by the spec's column names). */
  document(rows: readonly Row[]): BulkDocument<K> {
    return { json: Buffer.from(JSON.stringify(rows.map(this.toObject)), 'utf8'), length: rows.length };
  }

  /** `json_to_recordset(<document>::json)`, without an alias (for ROWS FROM; see `definition`). */
  recordset(rows: readonly Row[] | BulkDocument<K>): RawBuilder<unknown> {
    const document = isDocument(rows) ? rows : this.document(rows);
    return sql`json_to_recordset(${utf8Text(document.json)}::json)`;
  }

  /** The rows as a FROM item named `alias`, and its columns. */
  table(alias: string, rows: readonly Row[] | BulkDocument<K>): BulkTable<K> {
    if (!IDENTIFIER.test(alias)) throw new Error(`bulk table alias ${JSON.stringify(alias)} is not a plain SQL identifier`);
    const col = (name: K): RawBuilder<unknown> => {
      const type = this.types.get(name);
      if (type === undefined) throw new Error(`no bulk column ${JSON.stringify(name)} (columns: ${this.names.join(', ')})`);
      return type === 'instant' ? instantFromEpochMs(`${alias}.${name}`) : sql.raw(`${alias}.${name}`);
    };
    return {
      from: sql`${this.recordset(rows)} AS ${sql.raw(alias)}(${this.definition})`,
      col,
      cols: (...names) => sql.join(names.map(col)),
    };
  }
}

/** The column names of a spec. */
export type ColumnsOf<C> = C extends BulkColumns<infer _Row, infer K> ? K : never;

function isDocument<K extends string>(value: readonly unknown[] | BulkDocument<K>): value is BulkDocument<K> {
  return !Array.isArray(value);
}

/**
 * A column spec for rows of type `Row`: `bulkColumns<BalanceRow>()({ a: ['text', 'account_id'], dl: ['instant', 'deadline'], … })`.
 * Curried so that `Row` is given and the column names are inferred.
 */
export function bulkColumns<Row>(): <S extends BulkSpec<Row>>(spec: S) => BulkColumns<Row, keyof S & string> {
  return (spec) => new BulkColumns(spec);
}

/** The rows' key columns (account, mode, id): the spec of most lookups by primary key. */
export type RowKey = { readonly accountId: string; readonly livemode: boolean; readonly id: string };
export const ROW_KEYS = bulkColumns<RowKey>()({ a: ['text', 'accountId'], l: ['boolean', 'livemode'], id: ['text', 'id'] });
/** Rows by key, each with an instant (the instant a batch writes for that row). */
export const ROW_KEYS_AT = bulkColumns<RowKey & { readonly at: Date }>()({ a: ['text', 'accountId'], l: ['boolean', 'livemode'], id: ['text', 'id'], t: ['instant', 'at'] });

/**
 * One map key for a composite key (account, mode, id, …): the parts joined by NUL (which no id
 * contains), a boolean as 1 or 0, null as the empty string.
 */
export function compositeKey(...parts: readonly (string | number | boolean | null)[]): string {
  let key = '';
  for (let i = 0; i < parts.length; i += 1) {
    const part = parts[i];
    key += (i === 0 ? '' : '\u0000') + (part === null ? '' : part === true ? '1' : part === false ? '0' : String(part));
  }
  return key;
}
