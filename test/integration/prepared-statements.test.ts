/**
 * Statements marked `prepared(name)` (src/db/prepared.ts): prepared once per connection on
 * PostgreSQL, and still right when a migration changes the columns under them; on PGlite the mark
 * is only a comment.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createAccount } from '../../src/accounts/accounts';
import { openStore, type Store } from '../../src/db/connect';
import { prepared, preparedNameOf } from '../../src/db/prepared';
import { runOperation } from '../../src/api/operations';
import { TEST_CARDS } from '../../src/processor/test-cards';
import { createTestDatabase, isPostgres, testContext, type TestDatabase } from '../support/database';

let database: TestDatabase;
/** One connection, so what it prepared can be read back from pg_prepared_statements. */
let single: Store | undefined;

beforeAll(async () => {
  database = await createTestDatabase();
  if (isPostgres()) single = await openStore({ databaseUrl: database.url!, poolSize: 1 });
  await sql`CREATE TABLE prepared_probe (id text PRIMARY KEY, amount integer NOT NULL)`.execute(database.store.db);
  await sql`INSERT INTO prepared_probe VALUES ('a', 100), ('b', 200)`.execute(database.store.db);
});
afterAll(async () => {
  await single?.close();
  await database?.drop();
});

const probe = (store: Store, id: string) => sql<Record<string, unknown>>`${prepared('test.probe')} SELECT * FROM prepared_probe WHERE id = ${id}`.execute(store.db).then((r) => r.rows);
const preparedNames = async (store: Store) => (await sql<{ name: string }>`SELECT name FROM pg_prepared_statements ORDER BY name`.execute(store.db)).rows.map((r) => r.name);

it('names a marked statement after its mark and text, and leaves unmarked ones alone', () => {
  const text = '/* prepared charges.retrieve */ SELECT 1 WHERE $1::int = 1';
  expect(preparedNameOf(text)).toMatch(/^charges\.retrieve_[0-9a-f]{12}$/);
  expect(preparedNameOf(`${text} `)).not.toBe(preparedNameOf(text)); // another text, another statement
  expect(preparedNameOf('SELECT 1 /* a comment */')).toBeUndefined();
  expect(() => prepared('Bad Name')).toThrow(/lower-case/);
});

it('answers a marked statement as an unmarked one (PGlite runs it as before)', async () => {
  expect(await probe(database.store, 'a')).toEqual([{ id: 'a', amount: 100 }]);
  expect(await probe(database.store, 'b')).toEqual([{ id: 'b', amount: 200 }]);
  expect(await probe(database.store, 'none')).toEqual([]);
});

it.runIf(isPostgres())('prepares a marked statement once per connection; statements without the mark are not prepared', async () => {
  const store = single!;
  await sql`SELECT * FROM prepared_probe WHERE id = ${'a'}`.execute(store.db);
  expect(await preparedNames(store)).toEqual([]);
  for (const id of ['a', 'b', 'a']) await probe(store, id);
  expect(await preparedNames(store)).toEqual([expect.stringMatching(/^test\.probe_[0-9a-f]{12}$/)]);
});

it.runIf(isPostgres())('charges.retrieve reads the charge with its card through one prepared statement', async () => {
  const store = single!;
  const ctx = testContext(store, { seed: 81 });
  await createAccount(ctx, { name: 'Prepared Shop', id: 'acct_prepared' });
  const caller = { accountId: 'acct_prepared', livemode: false, kind: 'secret' } as const;
  const token = (await runOperation(ctx, { ...caller, kind: 'public' }, 'tokens.create', { card: { number: TEST_CARDS.visa.number, exp_month: '12', exp_year: '2035', cvc: '123' } })) as { id: string };
  const charge = (await runOperation(ctx, caller, 'charges.create', { amount: '700', currency: 'jpy', card: token.id })) as { id: string; amount: number; card: { last4: string } };
  const retrieved = (await runOperation(ctx, caller, 'charges.retrieve', { id: charge.id })) as typeof charge;
  expect(retrieved).toEqual(charge);
  expect(retrieved.card.last4).toBe('4242');
  expect((await preparedNames(store)).filter((n) => n.startsWith('charges.retrieve_'))).toHaveLength(1);
});

it.runIf(isPostgres())('a migration that adds a column: the next use prepares afresh (at once outside a transaction)', async () => {
  const store = single!;
  expect(await probe(store, 'a')).toEqual([{ id: 'a', amount: 100 }]);
  await sql`ALTER TABLE prepared_probe ADD COLUMN note text NOT NULL DEFAULT 'n1'`.execute(database.store.db);
  // PostgreSQL refuses the statement prepared before (its result columns changed); it is prepared again and answers.
  expect(await probe(store, 'a')).toEqual([{ id: 'a', amount: 100, note: 'n1' }]);

  await sql`ALTER TABLE prepared_probe ADD COLUMN other text NOT NULL DEFAULT 'o1'`.execute(database.store.db);
  // Inside a transaction the refusal fails the transaction: the caller sees it, the next use is fresh.
  await expect(store.db.transaction().execute((trx) => sql`${prepared('test.probe')} SELECT * FROM prepared_probe WHERE id = ${'a'}`.execute(trx))).rejects.toThrow(/cached plan must not change result type/);
  expect(await probe(store, 'b')).toEqual([{ id: 'b', amount: 200, note: 'n1', other: 'o1' }]);
});
