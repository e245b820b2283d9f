/**
 * Applies the numbered SQL migrations in sql/ (graphile-worker style): files named
 * `NNNNNN_name.sql`, applied in order, each recorded with a checksum. A landed migration is never
 * edited; if its text no longer matches what was applied, migrating stops with a clear error.
 *
 * Everything happens in one transaction under an advisory lock, so concurrent migrators queue up:
 * the first applies, the others find nothing left to do.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { sql } from 'kysely';
import { packagePath } from '../package-root';
import type { Store } from './store';
import { splitStatements } from './sql-statements';

export const SQL_DIR = packagePath('sql/');

const MIGRATION_FILE = /^(\d{6})_[a-z0-9_]+\.sql$/;
/** Arbitrary, fixed: the advisory lock key that serialises migrators. */
const MIGRATION_LOCK_KEY = 7_305_101;

export interface MigrationFile {
  readonly name: string;
  readonly text: string;
  readonly checksum: string;
}

export interface MigrationResult {
  readonly applied: readonly string[];
  readonly alreadyApplied: number;
}

export class MigrationError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'MigrationError';
  }
}

export function checksumOf(text: string): string {
  // Line endings are normalised so a checkout with CRLF is not mistaken for an edit.
  return createHash('sha256').update(text.replace(/\r\n/g, '\n')).digest('hex');
}

export function readMigrations(dir: string = SQL_DIR): MigrationFile[] {
  const names = readdirSync(dir).filter((name) => name.endsWith('.sql')).sort();
  const seen = new Set<string>();
  return names.map((name) => {
    const match = MIGRATION_FILE.exec(name);
    if (!match) throw new MigrationError(`sql/${name}: migration files are named NNNNNN_lower_snake.sql`);
    const number = match[1]!;
    if (seen.has(number)) throw new MigrationError(`sql/${name}: migration number ${number} is used twice`);
    seen.add(number);
    const text = readFileSync(`${dir}/${name}`, 'utf8');
    return { name, text, checksum: checksumOf(text) };
  });
}

export async function migrate(store: Store, dir: string = SQL_DIR): Promise<MigrationResult> {
  const files = readMigrations(dir);
  return store.db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`.execute(trx);
    // On a Citus coordinator: DDL on distributed tables over one connection per worker, so that a
    // file may also create functions (Citus refuses those after parallel shard DDL in a transaction).
    const citus = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_extension WHERE extname = 'citus'`.execute(trx);
    if (citus.rows[0]!.n > 0) await sql`SET LOCAL citus.multi_shard_modify_mode TO 'sequential'`.execute(trx);
    await sql`CREATE TABLE IF NOT EXISTS kessai_migrations (
      name       text PRIMARY KEY,
      checksum   text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`.execute(trx);
    const applied = await trx.selectFrom('kessai_migrations').select(['name', 'checksum']).orderBy('name').execute();
    const byName = new Map(files.map((file) => [file.name, file]));
    for (const row of applied) {
      const file = byName.get(row.name);
      if (!file) throw new MigrationError(`migration ${row.name} was applied to this database but is missing from sql/`);
      if (file.checksum !== row.checksum) {
        throw new MigrationError(
          `sql/${row.name} was edited after it was applied (checksum ${file.checksum.slice(0, 12)} ≠ applied ${row.checksum.slice(0, 12)}); ` +
            'landed migrations are immutable: restore the file and add a new numbered migration instead',
        );
      }
    }
    const lastApplied = applied.at(-1)?.name;
    const pending = files.filter((file) => !applied.some((row) => row.name === file.name));
    for (const file of pending) {
      if (lastApplied !== undefined && file.name < lastApplied) {
        throw new MigrationError(`sql/${file.name} sorts before the already applied ${lastApplied}; number new migrations after the last one`);
      }
    }
    for (const file of pending) {
      // Statement by statement (see sql-statements.ts). All pending files share one transaction, so
      // the server's error alone does not say which failed.
      for (const statement of splitStatements(file.text)) {
        await store.executeScript(trx, statement).catch((error: unknown) => {
          throw new MigrationError(`sql/${file.name} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
        });
      }
      await trx.insertInto('kessai_migrations').values({ name: file.name, checksum: file.checksum, applied_at: sql<Date>`now()` }).execute();
    }
    return { applied: pending.map((file) => file.name), alreadyApplied: applied.length };
  });
}
