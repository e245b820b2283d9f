/**
 * The database error policy (src/db/errors.ts) against a real database: a unique violation is
 * recognised, and a real serialization failure (SQLSTATE 40001, a concurrent update under
 * repeatable read) is retried to success in a new transaction, or, when the attempts run out,
 * surfaces as a retryable server error whose cause is the driver's original error.
 * The race needs a second connection, so those cases run on PostgreSQL only (PGlite is one
 * in-process connection and cannot lose a race).
 */
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inRetriedTransaction, isRetryableTransactionError, isUniqueViolation, sqlState, SQLSTATE } from '../../src/db/errors';
import type { Store } from '../../src/db/connect';
import { KessaiError } from '../../src/domain/errors';
import { createTestDatabase, isPostgres, type TestDatabase } from '../support/database';

let database: TestDatabase;
let db: Kysely<unknown>;
beforeAll(async () => {
  database = await createTestDatabase();
  db = database.store.db as unknown as Kysely<unknown>;
  await sql`CREATE TABLE policy_probe (id int CONSTRAINT policy_probe_pk PRIMARY KEY, n int NOT NULL)`.execute(db);
});
afterAll(async () => database?.drop());

async function valueOf(id: number): Promise<number> {
  const result = await sql<{ n: number }>`SELECT n FROM policy_probe WHERE id = ${id}`.execute(db);
  return result.rows[0]!.n;
}

describe('SQLSTATE groups', () => {
  it('a duplicate key is a unique violation, not a retryable error', async () => {
    await sql`INSERT INTO policy_probe (id, n) VALUES (1, 0)`.execute(db);
    const error = await sql`INSERT INTO policy_probe (id, n) VALUES (1, 0)`.execute(db).then(() => undefined, (e: unknown) => e);
    expect(sqlState(error)).toBe(SQLSTATE.uniqueViolation);
    expect(isUniqueViolation(error)).toBe(true);
    expect(isRetryableTransactionError(error)).toBe(false);
  });

  it('codes that are not SQLSTATEs are ignored', () => {
    expect(sqlState(Object.assign(new Error('x'), { code: 'ECONNREFUSED' }))).toBeUndefined();
    expect(sqlState('40001')).toBeUndefined();
    expect(isRetryableTransactionError({ code: '40P01' })).toBe(true);
  });

  it('a non-retryable error in the body is rethrown as it is, after one attempt', async () => {
    let attempts = 0;
    const failure = new Error('not a database error');
    await expect(
      inRetriedTransaction(db, async () => {
        attempts += 1;
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(attempts).toBe(1);
  });
});

describe.skipIf(!isPostgres())('a real serialization failure (PostgreSQL: needs a second connection)', () => {
  let other: Store;
  beforeAll(async () => {
    other = await database.openAnother();
  });

  /**
   * Reads row `id` under repeatable read; on the attempts listed in `interfere`, another
   * connection commits an update of the row between the read and this transaction's own update,
   * which then fails with 40001.
   */
  async function increment(id: number, interfere: ReadonlySet<number>, attempts: number): Promise<{ seen: number[]; result: Promise<number> }> {
    const seen: number[] = [];
    let attempt = 0;
    const result = inRetriedTransaction(
      db,
      async (trx) => {
        attempt += 1;
        const read = await sql<{ n: number }>`SELECT n FROM policy_probe WHERE id = ${id}`.execute(trx);
        const n = read.rows[0]!.n;
        seen.push(n);
        if (interfere.has(attempt)) await sql`UPDATE policy_probe SET n = n + 100 WHERE id = ${id}`.execute(other.db);
        await sql`UPDATE policy_probe SET n = ${n + 1} WHERE id = ${id}`.execute(trx);
        return n + 1;
      },
      { attempts, isolation: 'repeatable read' },
    );
    return { seen, result };
  }

  it('is retried in a new transaction and succeeds; the racing update is kept', async () => {
    await sql`INSERT INTO policy_probe (id, n) VALUES (2, 0)`.execute(db);
    const { seen, result } = await increment(2, new Set([1]), 3);
    await expect(result).resolves.toBe(101);
    // The first attempt read 0 and lost; the second read the committed 100.
    expect(seen).toEqual([0, 100]);
    expect(await valueOf(2)).toBe(101);
  });

  it('when every attempt loses, a retryable server error carries the original 40001 as its cause and nothing is written', async () => {
    await sql`INSERT INTO policy_probe (id, n) VALUES (3, 0)`.execute(db);
    const { seen, result } = await increment(3, new Set([1, 2]), 2);
    const error = await result.then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(KessaiError);
    expect((error as KessaiError).retryable).toBe(true);
    expect((error as KessaiError).message).toMatch(/2 times \(SQLSTATE 40001\)/);
    expect(sqlState((error as KessaiError).cause)).toBe(SQLSTATE.serializationFailure);
    expect(seen).toEqual([0, 100]);
    // Only the two racing updates were committed.
    expect(await valueOf(3)).toBe(200);
  });
});
