/**
 * Runs once per test run: builds dist/ when it is not a build of the current sources (the tests
 * that spawn bin/kessai.mjs run the built command, as users do; scripts/build.ts), picks the
 * backend (backend.ts) and, on PostgreSQL, prepares a migrated
 * template database that every test file clones (CREATE DATABASE … TEMPLATE is much faster than
 * migrating each time). The template's name carries the migrations' checksum, so an added
 * migration makes a new template.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { ensureBuilt } from '../../scripts/build';
import { openStore } from '../../src/db/connect';
import { migrate, readMigrations } from '../../src/db/migrate';
import { containerRuntimeAnswers, withDatabase, type TestBackend } from './backend';

export const TEST_DB_PREFIX = 'kessai_t_';

async function pickBackend(): Promise<{ backend: TestBackend; teardown?: () => Promise<void> }> {
  if (process.env.DATABASE_URL) return { backend: { kind: 'postgres', serverUrl: process.env.DATABASE_URL, source: 'DATABASE_URL' } };
  if (await containerRuntimeAnswers()) {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
    const container = await new PostgreSqlContainer('postgres:16-alpine').start();
    return {
      backend: { kind: 'postgres', serverUrl: container.getConnectionUri(), source: 'testcontainers' },
      teardown: async () => {
        await container.stop();
      },
    };
  }
  return { backend: { kind: 'pglite' } };
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if ((await ensureBuilt()) === 'built') console.log('[kessai tests] built dist/ (bin/kessai.mjs) from the current sources');
  const { backend, teardown } = await pickBackend();
  project.provide('kessaiBackend', backend);
  if (backend.kind === 'pglite') {
    project.provide('kessaiTemplate', null);
    console.log('[kessai tests] database: PGlite (no DATABASE_URL, no container runtime)');
    return async () => {};
  }
  const checksum = createHash('sha256').update(readMigrations().map((file) => `${file.name}:${file.checksum}`).join('\n')).digest('hex').slice(0, 16);
  const template = `kessai_tpl_${checksum}`;
  const admin = new pg.Client({ connectionString: backend.serverUrl });
  await admin.connect();
  try {
    // One setup at a time on this server prepares templates (two runs may start together).
    await admin.query('SELECT pg_advisory_lock(7305102)');
    // Test databases of interrupted runs: named kessai_t_<unix seconds>_…, dropped once they are
    // six hours old and nobody is connected; a run in progress elsewhere is left alone.
    const stale = await admin.query<{ datname: string }>(
      `SELECT datname FROM pg_database d
       WHERE datname ~ '^${TEST_DB_PREFIX}[0-9]+_'
         AND split_part(substr(datname, ${TEST_DB_PREFIX.length + 1}), '_', 1)::bigint < extract(epoch FROM now()) - 6 * 3600
         AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)`,
    );
    for (const row of stale.rows) await admin.query(`DROP DATABASE IF EXISTS "${row.datname}"`);
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [template]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE "${template}"`);
    // Always migrate: a no-op when the template is complete, a repair when a setup died midway.
    const store = await openStore({ databaseUrl: withDatabase(backend.serverUrl, template), poolSize: 1 });
    try {
      await migrate(store);
    } finally {
      await store.close();
    }
  } finally {
    await admin.end();
  }
  project.provide('kessaiTemplate', template);
  console.log(`[kessai tests] database: PostgreSQL from ${backend.source}, template ${template}`);
  return async () => {
    await teardown?.();
  };
}
