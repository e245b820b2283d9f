/**
 * A new embedded data folder starts from the build's migrated database (src/db/pglite-template.ts)
 * instead of PGlite's initdb and the migrations: the build wrote it for the installed PGlite and the
 * current sql/, a folder opened empty is a migrated database at once, and a folder left half
 * unpacked (no PG_VERSION) is unpacked again rather than opened broken.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { sql } from 'kysely';
import { afterAll, expect, it } from 'vitest';
import { openStore } from '../../src/db/connect';
import { migrate, readMigrations } from '../../src/db/migrate';
import { PG_VERSION_FILE, pgliteTemplateFile, pgliteTemplateName, pgliteVersion, unpackPgliteTemplate } from '../../src/db/pglite-template';

const scratch = mkdtempSync(join(tmpdir(), 'kessai-template-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

it('the build wrote the template of the installed PGlite and the current migrations; another set of migrations has another name', () => {
  const file = pgliteTemplateFile();
  expect(file).toMatch(new RegExp(`pglite-${pgliteVersion().replaceAll('.', '\\.')}-[0-9a-f]{16}\\.tar\\.gz$`));
  const migrations = readMigrations();
  expect(pgliteTemplateName(pgliteVersion(), migrations.slice(0, -1))).not.toBe(pgliteTemplateName(pgliteVersion(), migrations));
  expect(pgliteTemplateName(pgliteVersion(), [{ ...migrations[0]!, checksum: 'edited' }, ...migrations.slice(1)])).not.toBe(pgliteTemplateName(pgliteVersion(), migrations));
});

it('a folder opened empty is a migrated database at once: migrate finds nothing to apply, and it takes writes', async () => {
  const dir = join(scratch, 'fresh');
  const store = await openStore({ dataDir: dir });
  try {
    const result = await migrate(store);
    expect(result).toEqual({ applied: [], alreadyApplied: readMigrations().length });
    const settings = await sql<{ encoding: string; zone: string }>`SELECT current_setting('server_encoding') AS encoding, current_setting('TimeZone') AS zone`.execute(store.db);
    expect(settings.rows[0]).toEqual({ encoding: 'UTF8', zone: 'UTC' });
    await sql`INSERT INTO kessai_migrations (name, checksum) VALUES ('probe', 'probe')`.execute(store.db);
  } finally {
    await store.close();
  }
  // What it wrote is kept: the folder is a database of its own now.
  const again = await openStore({ dataDir: dir });
  try {
    const probe = await sql<{ n: number }>`SELECT count(*)::int AS n FROM kessai_migrations WHERE name = 'probe'`.execute(again.db);
    expect(probe.rows[0]!.n).toBe(1);
  } finally {
    await again.close();
  }
});

it('unpacks every entry, PG_VERSION last; a folder without PG_VERSION is unpacked again and opens', async () => {
  const file = pgliteTemplateFile()!;
  const tar = gunzipSync(readFileSync(file));
  let files = 0;
  for (let offset = 0; offset + 512 <= tar.length && tar[offset] !== 0; ) {
    const size = parseInt(tar.subarray(offset + 124, offset + 136).toString('latin1').replace(/\0.*$/s, '').trim() || '0', 8);
    if (String.fromCharCode(tar[offset + 156]!) === '0') files += 1;
    offset += 512 + Math.ceil(size / 512) * 512;
  }
  const dir = join(scratch, 'unpacked');
  unpackPgliteTemplate(file, dir);
  const count = (folder: string): number => readdirSync(folder, { withFileTypes: true }).reduce((n, entry) => n + (entry.isDirectory() ? count(join(folder, entry.name)) : 1), 0);
  expect(count(dir)).toBe(files);
  expect(existsSync(join(dir, PG_VERSION_FILE))).toBe(true);
  // As a process killed before the last file leaves it.
  unlinkSync(join(dir, PG_VERSION_FILE));
  const store = await openStore({ dataDir: dir });
  try {
    expect(await migrate(store)).toEqual({ applied: [], alreadyApplied: readMigrations().length });
  } finally {
    await store.close();
  }
});
