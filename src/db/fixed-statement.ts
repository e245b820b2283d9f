/**
 * Statements built and compiled by Kysely once per shape, then only bound: the seam of the
 * hottest statements (a `charges.create` on a customer's card), where building a statement with
 * Kysely's builders and compiling it cost the server more CPU than PostgreSQL takes to run it
 * (docs/decisions/performance.md, "Hot statements built and compiled once per shape"; guarded by `npm run bench:api`).
 *
 *     const read = fixedStatement((db, shape: null, v: { readonly accountId: string }) =>
 *       db.selectFrom('accounts').selectAll().where('account_id', '=', v.accountId).compile());
 *     await read(executor, null, { accountId });
 *
 * `build` gets a Slot in place of every value (`v.accountId` is a Slot named `accountId`); the
 * compiled text and parameters are kept per shape, and each call puts the values into the slots'
 * places. What decides the SQL text (a branch, a column list) belongs in `shape`, which build
 * reads as plain data. Two guards against a text that a value decides:
 * - at build time a slot has no primitive value, no JSON and no own keys: concatenating,
 *   formatting, spreading or listing it throws, and calling a method of it is a TypeError;
 * - a branch on a slot (`v.x ? … : …`, `v.x === null`, `??`) cannot be caught by a Proxy, so the
 *   test suite checks every call: with KESSAI_CHECK_FIXED_STATEMENTS=1 (vitest.config.ts sets it,
 *   for the servers the tests start too) each call also builds the statement from its real values
 *   and refuses to run if that text or those parameters differ from the kept ones.
 */
import type { CompiledQuery, Kysely, QueryResult } from 'kysely';
import type { Database } from './schema';
import { CitusStore } from './citus-shape';

const PATH = Symbol('slot path');

/** A value's place in a statement built once (fixedStatement): bound at each call from the values at its path. */
class Slot {
  readonly [PATH]: readonly string[];
  constructor(path: readonly string[]) {
    this[PATH] = path;
  }
  [Symbol.toPrimitive](): never {
    throw new Error(`fixedStatement: the value ${this[PATH].join('.')} was used at build time (only Kysely may take it, as a parameter); put what decides the SQL text in the shape`);
  }
  toJSON(): never {
    return this[Symbol.toPrimitive]();
  }
}

/**
 * The slots of a statement's values, typed as the values they stand for: `v.accountId` is the
 * Slot of `values.accountId`, and `v.row.amount` of `values.row.amount` (a row is passed as it is,
 * not copied into the values). Reading a property of a slot gives the slot of a longer path.
 */
function slotsAt<V extends object>(path: readonly string[]): V {
  return new Proxy(new Slot(path), {
    // JSON.stringify asks for toJSON: the slot's own, which refuses. Any other method of the value
    // is a slot too, which throws when called (it is not a function).
    get: (target, name) => (typeof name === 'string' && name !== 'toJSON' ? slotsAt([...path, name]) : (Reflect.get(target, name) as unknown)),
    // `{ ...v }` or Object.keys(v) would read no values and bind none (Kysely's `values(v.row)`, say).
    ownKeys: () => {
      throw new Error(`fixedStatement: the keys of ${path.join('.') || 'the values'} were listed at build time; name each value (v.row.amount), and put a column list in the shape`);
    },
  }) as unknown as V;
}

/** Shapes kept per statement; a statement has a handful (its branches), this only bounds a mistake. */
const MAX_SHAPES = 64;

/**
 * A statement built by `build` once per `shape` (keyed by its JSON) and run with `values` bound
 * into its slots. Every executor of the engine compiles alike (PostgreSQL's dialect, no plugins but the Citus mark:
 * connect.ts), so one compilation serves the pool and every transaction.
 */
export function fixedStatement<S, V extends object, R>(build: (db: Kysely<Database>, shape: S, v: V) => CompiledQuery<R>): (executor: Kysely<Database>, shape: S, values: V) => Promise<QueryResult<R>> {
  const compiled = new Map<string, { readonly query: CompiledQuery<R>; readonly paths: readonly (readonly string[] | undefined)[] }>();
  return async (executor, shape, values) => {
    const key = JSON.stringify(shape);
    let entry = compiled.get(key);
    if (entry === undefined) {
      // A plugin's transformQuery would run at build time only: the engine's executors have none
      // but the Citus mark (citus-shape.ts), which changes no query.
      if (executor.getExecutor().plugins.some((plugin) => !(plugin instanceof CitusStore))) throw new Error('fixedStatement: an executor with Kysely plugins cannot share a compiled statement');
      const query = build(executor, shape, slotsAt<V>([]));
      entry = { query, paths: query.parameters.map((parameter) => (parameter instanceof Slot ? parameter[PATH] : undefined)) };
      if (compiled.size >= MAX_SHAPES) compiled.clear();
      compiled.set(key, entry);
    }
    const { paths } = entry;
    const parameters = entry.query.parameters.map((constant, i) => {
      const path = paths[i];
      if (path === undefined) return constant;
      let value: unknown = values;
      for (const name of path) value = (value as Record<string, unknown> | undefined)?.[name];
      if (value === undefined) throw new Error(`fixedStatement: no value for ${path.join('.')}`);
      return value;
    });
    if (process.env.KESSAI_CHECK_FIXED_STATEMENTS === '1') checkAgainstDirectBuild(build(executor, shape, values), entry.query.sql, parameters, key);
    return executor.executeQuery<R>({ ...entry.query, parameters });
  };
}

/** The test suite's check of a call (see the header): the statement built from the call's own values is the one about to run. */
function checkAgainstDirectBuild(direct: CompiledQuery<unknown>, sql: string, parameters: readonly unknown[], shape: string): void {
  const same = (a: unknown, b: unknown): boolean => Object.is(a, b) || (a instanceof Date && b instanceof Date && a.getTime() === b.getTime()) || (typeof a === 'object' && a !== null && JSON.stringify(a) === JSON.stringify(b));
  if (direct.sql !== sql || direct.parameters.length !== parameters.length || direct.parameters.some((value, i) => !same(value, parameters[i]))) {
    throw new Error(`fixedStatement: built from this call's values the statement differs from the one kept for its shape ${shape}: a value decides its text; put it in the shape`);
  }
}
