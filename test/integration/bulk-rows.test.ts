/**
 * The bulk-row helper (src/db/bulk-rows.ts): a column the spec does not name is a type error and a
 * thrown error, never a silent NULL; instants (to the millisecond, far-future included), UTF-8 text
 * and NULLs come back from the server exactly as sent, on the test database (PostgreSQL when
 * DATABASE_URL is set) and on an in-memory PGlite.
 */
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bulkColumns, compositeKey, ROW_KEYS } from '../../src/db/bulk-rows';
import { openStore, type Store } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import type { Database } from '../../src/db/schema';
import { createTestDatabase, type TestDatabase } from '../support/database';

interface Sample {
  readonly id: string;
  readonly name: string | null;
  readonly ok: boolean;
  readonly amount: number;
  readonly rate: string;
  readonly day: string | null;
  readonly at: Date | null;
}

const SAMPLE = bulkColumns<Sample>()({
  id: ['text', 'id'],
  nm: ['text', 'name'],
  ok: ['boolean', 'ok'],
  amt: ['bigint', 'amount'],
  fr: ['numeric', 'rate'],
  d: ['date', 'day'],
  t: ['instant', 'at'],
  twice: ['bigint', (row) => row.amount * 2],
});

const ROWS: Sample[] = [
  { id: 'r1', name: 'Plan 月額 ¥1,000 — café ✓ 🎉', ok: true, amount: 1000, rate: '3.25', day: '2027-01-31', at: new Date('2027-01-01T00:00:00.001Z') },
  { id: 'r2', name: 'quotes " and \\ backslash, a\nnewline and a tab\t', ok: false, amount: -42, rate: '0.00', day: null, at: new Date('9999-12-31T23:59:59.999Z') },
  { id: 'r3', name: null, ok: true, amount: 2 ** 52 - 1, rate: '100.00', day: '1970-01-01', at: null },
  { id: 'r4', name: '', ok: false, amount: 0, rate: '2.59', day: '2027-02-28', at: new Date('1969-12-31T23:59:59.999Z') },
];

async function roundTrip(db: Kysely<Database>, rows: readonly Sample[]): Promise<Sample[]> {
  const x = SAMPLE.table('x', rows);
  const result = await sql<{ id: string; name: string | null; ok: boolean; amount: number; rate: string; day: string | null; at: Date | null; twice: number }>`
    SELECT ${x.col('id')} AS id, ${x.col('nm')} AS name, ${x.col('ok')} AS ok, ${x.col('amt')} AS amount, ${x.col('fr')}::text AS rate,
           ${x.col('d')}::text AS day, ${x.col('t')} AS at, ${x.col('twice')} AS twice
    FROM ${x.from} ORDER BY 1`.execute(db);
  for (const row of result.rows) expect(row.twice).toBe(row.amount * 2);
  return result.rows.map(({ twice: _twice, ...row }) => row);
}

let database: TestDatabase;
let pglite: Store;
beforeAll(async () => {
  database = await createTestDatabase();
  pglite = await openStore({ dataDir: 'memory://' });
  // Instants are rebuilt by kessai_instant_ms, a function of the migrations.
  await migrate(pglite);
});
afterAll(async () => {
  await database?.drop();
  await pglite?.close();
});

describe('bulk rows round-trip', () => {
  it('on the test database: instants, UTF-8 text, numerics, dates and NULLs come back as sent', async () => {
    expect(await roundTrip(database.store.db, ROWS)).toEqual(ROWS);
  });

  it('on PGlite: the same', async () => {
    expect(await roundTrip(pglite.db, ROWS)).toEqual(ROWS);
  });

  it('an empty batch is an empty table', async () => {
    expect(await roundTrip(pglite.db, [])).toEqual([]);
  });

  it('a document built ahead is sent as built', async () => {
    const document = SAMPLE.document(ROWS.slice(0, 2));
    expect(document.length).toBe(2);
    expect(JSON.parse(document.json.toString('utf8'))).toEqual([
      { id: 'r1', nm: ROWS[0]!.name, ok: true, amt: 1000, fr: '3.25', d: '2027-01-31', t: Date.parse('2027-01-01T00:00:00.001Z'), twice: 2000 },
      { id: 'r2', nm: ROWS[1]!.name, ok: false, amt: -42, fr: '0.00', d: null, t: Date.parse('9999-12-31T23:59:59.999Z'), twice: -84 },
    ]);
    const x = SAMPLE.table('x', document);
    const result = await sql<{ id: string }>`SELECT ${x.col('id')} AS id FROM ${x.from}`.execute(pglite.db);
    expect(result.rows.map((row) => row.id)).toEqual(['r1', 'r2']);
  });

  it('writes the column definition list from the spec (instants as bigint epoch milliseconds)', () => {
    expect(SAMPLE.definition.compile(pglite.db).sql).toBe('id text, nm text, ok boolean, amt bigint, fr numeric, d date, t bigint, twice bigint');
  });
});

describe('a column the spec does not name', () => {
  it('is a type error and a thrown error, not a NULL', () => {
    const x = ROW_KEYS.table('k', [{ accountId: 'acct_1', livemode: false, id: 'x_1' }]);
    // @ts-expect-error 'ids' is not a column of ROW_KEYS
    expect(() => x.col('ids')).toThrow('no bulk column "ids" (columns: a, l, id)');
    // @ts-expect-error 'ids' is not a column of ROW_KEYS
    expect(() => x.cols('a', 'ids')).toThrow('no bulk column "ids"');
  });

  it('a field the row does not have, or of another type, is a type error', () => {
    // @ts-expect-error Sample has no field 'nmae'
    bulkColumns<Sample>()({ nm: ['text', 'nmae'] });
    // @ts-expect-error 'at' is a Date: not a text column
    bulkColumns<Sample>()({ t: ['text', 'at'] });
    // @ts-expect-error 'amount' is a number: not an instant
    bulkColumns<Sample>()({ t: ['instant', 'amount'] });
    // @ts-expect-error a function's value must fit the column's type
    bulkColumns<Sample>()({ t: ['boolean', (row: Sample) => row.name] });
  });

  it('a name that is not a plain identifier is refused', () => {
    expect(() => bulkColumns<Sample>()({ 'id text); DROP TABLE x; --': ['text', 'id'] })).toThrow('is not a plain SQL identifier');
    expect(() => SAMPLE.table('x y', ROWS)).toThrow('is not a plain SQL identifier');
  });
});

describe('compositeKey', () => {
  it('joins parts by NUL, a boolean as 1 or 0, null as empty', () => {
    expect(compositeKey('acct_1', true, 'ch_1')).toBe('acct_1\u00001\u0000ch_1');
    expect(compositeKey('acct_1', false, null, 5)).toBe('acct_1\u00000\u0000\u00005');
  });

  it('tells apart keys whose parts would run together', () => {
    expect(compositeKey('ab', 'c')).not.toBe(compositeKey('a', 'bc'));
  });
});
