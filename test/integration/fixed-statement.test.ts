/**
 * fixedStatement (src/db/fixed-statement.ts): a statement built by Kysely once per shape, then
 * only bound. The values of each call reach the database; the shape alone decides the text; a
 * value used at build time as anything but a parameter refuses to build, so no statement whose
 * text depends on a value can be kept and reused with another value.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixedStatement } from '../../src/db/fixed-statement';
import { createTestDatabase, type TestDatabase } from '../support/database';

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database.drop();
});

describe('fixedStatement', () => {
  it('binds each call its own values, builds once per shape, and the shape decides the text', async () => {
    const builds: string[] = [];
    const statement = fixedStatement((db, shape: { readonly doubled: boolean }, v: { readonly n: number; readonly label: string }) => {
      // Counted when built with slots (the suite's check also builds each call from its values).
      if (typeof v.n !== 'number') builds.push(JSON.stringify(shape));
      return (shape.doubled ? sql<{ n: number; label: string }>`SELECT ${v.n}::int * 2 AS n, ${v.label}::text AS label` : sql<{ n: number; label: string }>`SELECT ${v.n}::int AS n, ${v.label}::text AS label`).compile(db);
    });
    const db = database.store.db;
    expect((await statement(db, { doubled: false }, { n: 3, label: 'a' })).rows).toEqual([{ n: 3, label: 'a' }]);
    expect((await statement(db, { doubled: false }, { n: 5, label: 'b' })).rows).toEqual([{ n: 5, label: 'b' }]);
    expect((await statement(db, { doubled: true }, { n: 5, label: 'c' })).rows).toEqual([{ n: 10, label: 'c' }]);
    expect((await statement(db, { doubled: true }, { n: 7, label: 'd' })).rows).toEqual([{ n: 14, label: 'd' }]);
    expect(builds).toEqual(['{"doubled":false}', '{"doubled":true}']);
  });

  it('binds the properties of an object value by their paths (a row passed as it is)', async () => {
    const statement = fixedStatement((db, shape: { readonly columns: readonly ('amount' | 'currency')[] }, v: { readonly row: { readonly amount: number; readonly currency: string | null } }) =>
      sql<Record<string, unknown>>`SELECT ${sql.join(shape.columns.map((column) => sql`${v.row[column]}::text AS ${sql.ref(column)}`))}`.compile(db),
    );
    const db = database.store.db;
    expect((await statement(db, { columns: ['amount', 'currency'] }, { row: { amount: 1000, currency: 'jpy' } })).rows).toEqual([{ amount: '1000', currency: 'jpy' }]);
    expect((await statement(db, { columns: ['amount', 'currency'] }, { row: { amount: 50, currency: null } })).rows).toEqual([{ amount: '50', currency: null }]);
    expect((await statement(db, { columns: ['currency'] }, { row: { amount: 50, currency: 'usd' } })).rows).toEqual([{ currency: 'usd' }]);
  });

  it('runs in a transaction of the caller', async () => {
    const statement = fixedStatement((db, _shape: null, v: { readonly name: string }) => sql<{ name: string }>`SELECT ${v.name}::text AS name`.compile(db));
    const names = await database.store.db.transaction().execute(async (trx) => (await statement(trx, null, { name: 'in a transaction' })).rows);
    expect(names).toEqual([{ name: 'in a transaction' }]);
  });

  it('refuses a value used at build time as anything but a parameter', async () => {
    const concatenated = fixedStatement((db, _shape: null, v: { readonly id: string }) => sql`SELECT ${`charge:${v.id}`}::text AS key`.compile(db));
    await expect(concatenated(database.store.db, null, { id: 'ch_1' })).rejects.toThrow(/the value id was used at build time/);
    const formatted = fixedStatement((db, _shape: null, v: { readonly at: Date }) => sql`SELECT ${JSON.stringify({ at: v.at })}::jsonb AS body`.compile(db));
    await expect(formatted(database.store.db, null, { at: new Date(0) })).rejects.toThrow(/the value at was used at build time/);
    const computed = fixedStatement((db, _shape: null, v: { readonly at: Date }) => sql`SELECT ${new Date(v.at.getTime() + 1000)} AS later`.compile(db));
    await expect(computed(database.store.db, null, { at: new Date(0) })).rejects.toThrow(TypeError);
  });

  it('refuses to list the keys of the values at build time (a spread would bind nothing)', async () => {
    const spread = fixedStatement((db, _shape: null, v: { readonly row: { readonly amount: number } }) => sql`SELECT ${{ ...v.row }.amount}::int AS amount`.compile(db));
    await expect(spread(database.store.db, null, { row: { amount: 5 } })).rejects.toThrow(/the keys of row were listed at build time/);
  });

  it('with the suite\'s check on, refuses a call whose own values would build another text (a branch on a value)', async () => {
    const before = process.env.KESSAI_CHECK_FIXED_STATEMENTS;
    process.env.KESSAI_CHECK_FIXED_STATEMENTS = '1';
    try {
      // A slot is an object, so the branch takes its first arm at build time, whatever the value.
      const branching = fixedStatement((db, _shape: null, v: { readonly label: string | null }) => (v.label ? sql`SELECT ${v.label}::text AS label` : sql`SELECT 'none'::text AS label`).compile(db));
      expect((await branching(database.store.db, null, { label: 'a' })).rows).toEqual([{ label: 'a' }]);
      await expect(branching(database.store.db, null, { label: null })).rejects.toThrow(/differs from the one kept for its shape/);
    } finally {
      if (before === undefined) delete process.env.KESSAI_CHECK_FIXED_STATEMENTS;
      else process.env.KESSAI_CHECK_FIXED_STATEMENTS = before;
    }
  });

  it('refuses a call that leaves a bound value undefined', async () => {
    const statement = fixedStatement((db, _shape: null, v: { readonly id: string | undefined }) => sql`SELECT ${v.id}::text AS id`.compile(db));
    await expect(statement(database.store.db, null, { id: undefined })).rejects.toThrow(/no value for id/);
  });
});
