/**
 * compactJsonSql (src/events/outbox.ts) against PostgreSQL's own printers (jsonb's text and
 * json_build_object's): for the documents the engine stores, the compacted text of a stored
 * document is the document, and byte for byte what parsing it and JSON.stringify would give unless
 * a key looks like an array index (the report prints events this way).
 */
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { utf8Text } from '../../src/db/utf8-param';
import { compactJsonSql } from '../../src/events/outbox';
import { createTestDatabase, type TestDatabase } from '../support/database';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => database?.drop());

/** Integers, strings (quotes, backslashes, control characters, non-ASCII), booleans, null, arrays, objects. */
const documents = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.maxSafeInteger(),
    fc.string({ unit: 'binary-ascii' }),
    fc.string({ unit: 'grapheme' }),
    fc.constantFrom('a: b, c', '"', '\\', '\\"', ' ', '\n\t'),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    tie('object'),
  ),
  object: fc.dictionary(fc.string({ unit: 'binary-ascii', maxLength: 8 }), tie('value'), { maxKeys: 5 }),
})).object;

/** The given texts compacted by PostgreSQL, in order. */
async function compacted(texts: readonly string[]): Promise<string[]> {
  const result = await sql<{ text: string }>`SELECT ${compactJsonSql(sql`t.d`)} AS text FROM unnest(${texts}::text[]) WITH ORDINALITY AS t(d, n) ORDER BY t.n`.execute(database.store.db);
  return result.rows.map((row) => row.text);
}

describe('compactJsonSql', () => {
  it('prints every stored document as JSON.stringify prints it parsed', async () => {
    const docs = fc.sample(documents, { numRuns: 400, seed: 42 });
    // NUL cannot be stored in jsonb text; the engine never writes it.
    const storable = docs.map((doc) => JSON.stringify(doc)).filter((text) => !text.includes('\\u0000'));
    const result = await sql<{ text: string }>`SELECT d::jsonb::text AS text FROM unnest(${storable}::text[]) WITH ORDINALITY AS t(d, n) ORDER BY n`.execute(database.store.db);
    expect(result.rows).toHaveLength(storable.length);
    let integerKeyed = 0;
    const compacts = await compacted(result.rows.map((row) => row.text));
    for (const [i, { text }] of result.rows.entries()) {
      const compact = compacts[i]!;
      // The same document always; the same bytes unless a key looks like an array index, which
      // JavaScript objects move to the front while jsonb keeps its own order (shorter keys first).
      expect(JSON.parse(compact)).toEqual(JSON.parse(text));
      if (/"(0|[1-9][0-9]*)":/.test(text)) integerKeyed += 1;
      else expect(compact).toBe(JSON.stringify(JSON.parse(text)));
    }
    expect(integerKeyed).toBeLessThan(storable.length / 2);
  });

  it("compacts json_build_object's text (the SQL-side event renderer's) to JSON.stringify's", async () => {
    const result = await sql<{ text: string }>`SELECT json_build_object('id', 'ch_1', 'card', json_build_object('name', 'a : b, c', 'n', 3), 'metadata', '{"k": "v"}'::jsonb, 'nothing', NULL)::text AS text`.execute(database.store.db);
    const text = result.rows[0]!.text;
    expect(text).toContain(' : ');
    expect(await compacted([text])).toEqual([JSON.stringify({ id: 'ch_1', card: { name: 'a : b, c', n: 3 }, metadata: { k: 'v' }, nothing: null })]);
  });

  it("compacts a pretty printer's line breaks too (array_to_json(…, true))", async () => {
    const result = await sql<{ text: string }>`SELECT array_to_json(ARRAY[1, 2, 3], true)::text AS text`.execute(database.store.db);
    expect(result.rows[0]!.text).toContain('\n');
    expect(await compacted([result.rows[0]!.text, '{\r\n\t"a":\t"x\\ny"\n}'])).toEqual(['[1,2,3]', '{"a":"x\\ny"}']);
  });

  it('compacts the same with standard_conforming_strings off (its literals are escape strings)', async () => {
    const texts = ['{"q" : "say \\"hi, you\\" : ok", "p" : "a\\\\"}', '{\n"a":\t[1, 2]}'];
    const printed = await database.store.db.transaction().execute(async (trx) => {
      await sql`SET LOCAL standard_conforming_strings = off`.execute(trx);
      const result = await sql<{ text: string }>`SELECT ${compactJsonSql(sql`t.d`)} AS text FROM unnest(${texts}::text[]) WITH ORDINALITY AS t(d, n) ORDER BY t.n`.execute(trx);
      return result.rows.map((row) => row.text);
    });
    expect(printed).toEqual(texts.map((text) => JSON.stringify(JSON.parse(text))));
  });

  it('keeps blanks inside strings and drops those jsonb adds', async () => {
    expect(await compacted(['{"a": "x, y: z", "b": [1, 2, {"c": " "}]}', '{"q": "say \\"hi, you\\": ok"}'])).toEqual([
      '{"a":"x, y: z","b":[1,2,{"c":" "}]}',
      '{"q":"say \\"hi, you\\": ok"}',
    ]);
  });
});

describe('utf8Text', () => {
  it('sends text as UTF-8 bytes that the server reads back as the same text', async () => {
    const texts = [
      '',
      'ascii only',
      '請求 — 決済 ¥1,000',
      'emoji 🧾 and a pair of surrogates 𝄞',
      'quotes " \' backslash \\ newline \n tab \t',
      JSON.stringify({ name: '山田 太郎', note: 'a\nb' }) + '\n' + JSON.stringify({ id: 'ch_1' }),
      'x'.repeat(200_000),
    ];
    for (const text of texts) {
      const result = await sql<{ text: string; chars: number }>`SELECT t AS text, char_length(t) AS chars FROM (SELECT ${utf8Text(text)} AS t) s`.execute(database.store.db);
      expect(result.rows[0]!.text).toBe(text);
      expect(result.rows[0]!.chars).toBe([...text].length);
    }
  });
});
