/**
 * Store.copyOut (PostgreSQL only; the report streams its events section through it): COPY's bytes
 * arrive as the server sends them, and a COPY that fails leaves the pool usable.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, isPostgres, type TestDatabase } from '../support/database';

describe.runIf(isPostgres())('Store.copyOut', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => database?.drop());

  it('hands over the raw bytes of COPY … TO STDOUT, chunk by chunk', async () => {
    const values = ['{"a":"x, y"}', '{"q":"say \\"hi\\" \\\\ ok"}', '{"jp":"請求 ¥1,000 — 決済"}', 'plain'];
    const chunks: Buffer[] = [];
    await database.store.copyOut!(
      `COPY (SELECT v FROM unnest(ARRAY[${values.map((v) => `'${v.replace(/'/g, "''")}'`).join(', ')}]) WITH ORDINALITY AS t(v, n) ORDER BY n)
       TO STDOUT WITH (FORMAT csv, DELIMITER E'\\x02', QUOTE E'\\x01')`,
      (chunk) => void chunks.push(chunk),
    );
    expect(Buffer.concat(chunks).toString('utf8')).toBe(values.map((v) => `${v}\n`).join(''));
  });

  it('rejects with the server\'s error and gives the pool back in working order', async () => {
    await expect(database.store.copyOut!('COPY (SELECT 1 / 0) TO STDOUT', () => undefined)).rejects.toThrow(/division by zero/);
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => sql<{ n: number }>`SELECT ${i}::int AS n`.execute(database.store.db)));
    expect(results.map((r) => r.rows[0]!.n)).toEqual(Array.from({ length: 12 }, (_, i) => i));
  });

  it('a write that fails stops the COPY and rejects with that failure', async () => {
    const failure = new Error('disk full');
    await expect(
      database.store.copyOut!('COPY (SELECT g FROM generate_series(1, 200000) g) TO STDOUT', () => {
        throw failure;
      }),
    ).rejects.toBe(failure);
    const after = await sql<{ ok: number }>`SELECT 1 AS ok`.execute(database.store.db);
    expect(after.rows).toEqual([{ ok: 1 }]);
  });
});
