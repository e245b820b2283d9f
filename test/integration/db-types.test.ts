/**
 * src/db/schema.ts is generated (scripts/db-types.ts, kysely-codegen) and `db:types:check` fails
 * when it is stale: the committed file equals what the migrations generate, and a migrations
 * folder with one more migration generates a different file, which the check names line by line
 * and rejects with a non-zero exit. The generator migrates a scratch database on a PostgreSQL
 * server, so this file runs only when the tests have one (PGlite has no server to create it on).
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { SQL_DIR } from '../../src/db/migrate';
import { describeDifference, generateSchemaText, HEADER, SCHEMA_FILE } from '../../scripts/db-types';
import { isPostgres } from '../support/database';

const run = promisify(execFile);

describe.skipIf(!isPostgres())('generated schema types (PostgreSQL server needed for the scratch database)', () => {
  const backend = inject('kessaiBackend');
  const serverUrl = backend.kind === 'postgres' ? backend.serverUrl : '';
  let dir: string;
  let extraSql: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'kessai-db-types-'));
    extraSql = join(dir, 'sql');
    cpSync(SQL_DIR, extraSql, { recursive: true });
    writeFileSync(join(extraSql, '999999_probe_extra_column.sql'), 'ALTER TABLE charges ADD COLUMN probe_note text;\n');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the committed src/db/schema.ts is what the migrations generate, header included', async () => {
    const generated = await generateSchemaText({ serverUrl });
    expect(generated.startsWith(HEADER)).toBe(true);
    expect(describeDifference(readFileSync(SCHEMA_FILE, 'utf8'), generated)).toEqual([]);
  }, 60_000);

  it('one more migration makes the file stale: the difference names the new column', async () => {
    const generated = await generateSchemaText({ serverUrl, migrationsDir: extraSql });
    const difference = describeDifference(readFileSync(SCHEMA_FILE, 'utf8'), generated);
    expect(difference.some((line) => /^\d+\+ {3}probe_note: string \| null;$/.test(line))).toBe(true);
  }, 60_000);

  it('db:types:check exits non-zero on a stale file and names the difference; zero on a current one', async () => {
    const env = { ...process.env, DATABASE_URL: serverUrl };
    const stale = join(dir, 'stale-schema.ts');
    writeFileSync(stale, readFileSync(SCHEMA_FILE, 'utf8'));
    const failed = await run('npx', ['tsx', 'scripts/db-types.ts', '--check', '--out', stale, '--migrations', extraSql], { env }).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed?.code).toBe(1);
    expect(failed?.stderr).toContain('is stale');
    expect(failed?.stderr).toMatch(/probe_note: string \| null;/);
    const current = await run('npx', ['tsx', 'scripts/db-types.ts', '--check', '--out', stale], { env });
    expect(current.stdout).toContain('matches the migrations');
  }, 120_000);
});
