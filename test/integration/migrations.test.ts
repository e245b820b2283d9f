import { cpSync, mkdtempSync, readdirSync, rmSync, appendFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/db/connect';
import { instantFromEpochMs } from '../../src/db/epoch-ms';
import { migrate, MigrationError, readMigrations, SQL_DIR } from '../../src/db/migrate';
import { createTestDatabase, isPostgres, type TestDatabase } from '../support/database';

const scratch: string[] = [];
afterAll(() => scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** A private copy of sql/ that a test may edit. */
function copyOfSqlDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'kessai-sql-'));
  cpSync(SQL_DIR, dir, { recursive: true });
  scratch.push(dir);
  return dir;
}

const ENGINE_TABLES = ['account_fee_rates', 'accounts', 'api_keys', 'events', 'job_runs', 'job_schedule', 'kessai_migrations'];

async function tables(store: Store): Promise<string[]> {
  const result = await sql<{ table_name: string }>`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`.execute(store.db);
  return result.rows.map((row) => row.table_name);
}

function migrationContract(name: string, open: () => Promise<{ store: Store; close(): Promise<void> }>) {
  describe(`migrations on ${name}`, () => {
    it('apply every file in order, and a second apply is a no-op', async () => {
      const { store, close } = await open();
      try {
        const dir = copyOfSqlDir();
        const first = await migrate(store, dir);
        expect(first.applied).toEqual(readdirSync(dir).filter((f) => f.endsWith('.sql')).sort());
        expect(await tables(store)).toEqual(expect.arrayContaining(ENGINE_TABLES));
        const second = await migrate(store, dir);
        expect(second).toEqual({ applied: [], alreadyApplied: first.applied.length });
      } finally {
        await close();
      }
    });

    it('a landed migration edited afterwards is detected with a clear error, and nothing is applied', async () => {
      const { store, close } = await open();
      try {
        const dir = copyOfSqlDir();
        await migrate(store, dir);
        const [firstFile] = readMigrations(dir);
        appendFileSync(join(dir, firstFile!.name), '\n-- an innocent-looking edit\n');
        writeFileSync(join(dir, '999999_later.sql'), 'CREATE TABLE should_not_exist (id integer);');
        const error = await migrate(store, dir).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(MigrationError);
        expect((error as Error).message).toMatch(new RegExp(`sql/${firstFile!.name} was edited after it was applied`));
        expect(await tables(store)).not.toContain('should_not_exist');
      } finally {
        await close();
      }
    });

    it('a new migration numbered before the last applied one is refused', async () => {
      const { store, close } = await open();
      try {
        const dir = copyOfSqlDir();
        writeFileSync(join(dir, '900000_late.sql'), 'CREATE TABLE late_one (id integer);');
        await migrate(store, dir);
        writeFileSync(join(dir, '500000_out_of_order.sql'), 'CREATE TABLE out_of_order (id integer);');
        await expect(migrate(store, dir)).rejects.toThrow(/sorts before the already applied 900000_late.sql/);
        expect(await tables(store)).not.toContain('out_of_order');
      } finally {
        await close();
      }
    });

    it('a migration that fails leaves the database as it was', async () => {
      const { store, close } = await open();
      try {
        const dir = copyOfSqlDir();
        writeFileSync(join(dir, '900001_broken.sql'), 'CREATE TABLE half_done (id integer);\nSELECT no_such_function();');
        // All pending files share one transaction: the error names the file that failed.
        await expect(migrate(store, dir)).rejects.toThrow(/^sql\/900001_broken\.sql failed: .*no_such_function/);
        expect(await tables(store)).not.toContain('half_done');
        expect(await tables(store)).not.toContain('accounts');
      } finally {
        await close();
      }
    });

    it('the epoch-milliseconds helper is an IMMUTABLE function giving exact instants (Citus runs it in distributed UPDATEs), inlined into its statement (000260)', async () => {
      const { store, close } = await open();
      try {
        await migrate(store, copyOfSqlDir());
        const volatility = await sql<{ provolatile: string }>`SELECT provolatile FROM pg_proc WHERE proname = 'kessai_instant_ms'`.execute(store.db);
        expect(volatility.rows).toEqual([{ provolatile: 'i' }]);
        const ms = [0, 1_799_999_999_999, 253_402_300_799_999, -1_500, -1, 999, -2_000_000_000_001, 1_798_761_600_123];
        // Whatever the session's time zone: the instant is the same.
        const result = await store.db.transaction().execute(async (trx) => {
          await sql`SET LOCAL TIME ZONE 'America/New_York'`.execute(trx);
          return sql<{ at: Date }>`SELECT ${instantFromEpochMs('x.ms')} AS at FROM unnest(${ms}::bigint[]) WITH ORDINALITY AS x(ms, n) ORDER BY n`.execute(trx);
        });
        expect(result.rows.map((row) => row.at.toISOString())).toEqual(ms.map((m) => new Date(m).toISOString()));
        // Inlined: the plan computes the expression itself, no call of the function per row (a call
        // is an SQL-function execution, several times the cost of the arithmetic).
        const plan = await sql<{ 'QUERY PLAN': string }>`EXPLAIN VERBOSE SELECT ${instantFromEpochMs('x.ms')} FROM unnest(${ms}::bigint[]) AS x(ms)`.execute(store.db);
        const text = plan.rows.map((row) => row['QUERY PLAN']).join('\n');
        expect(text).toMatch(/to_timestamp/);
        expect(text).not.toMatch(/kessai_instant_ms/);
      } finally {
        await close();
      }
    });

    it('constraints the landed files added inside ADD COLUMN carry names of their own (000040)', async () => {
      const { store, close } = await open();
      try {
        await migrate(store, copyOfSqlDir());
        const names = await sql<{ conname: string }>`SELECT conname FROM pg_constraint WHERE conrelid IN ('charges'::regclass, 'accounts'::regclass) AND contype = 'c' ORDER BY conname`.execute(store.db);
        expect(names.rows.map((row) => row.conname)).toEqual(
          expect.arrayContaining(['accounts_reauth_lead_hours_range', 'accounts_reauth_max_count_range', 'charges_amount_captured_positive', 'charges_expiry_days_range', 'charges_platform_fee_not_negative']),
        );
        await expect(sql`INSERT INTO accounts (account_id, name, created_at, reauth_lead_hours) VALUES ('acct_probe', 'Probe', now(), 0)`.execute(store.db)).rejects.toThrow(/accounts_reauth_lead_hours_range/);
      } finally {
        await close();
      }
    });
  });
}

migrationContract('PGlite', async () => {
  const store = await openStore({ dataDir: 'memory://' });
  return { store, close: () => store.close() };
});

describe.runIf(isPostgres())('migrations on PostgreSQL', () => {
  let database: TestDatabase;
  const freshDatabase = async () => {
    // The harness's databases come migrated; start from an empty schema in a fresh one.
    database = await createTestDatabase();
    await sql`DROP SCHEMA public CASCADE; CREATE SCHEMA public`.execute(database.store.db);
    return { store: database.store, close: () => database.drop() };
  };
  migrationContract('PostgreSQL', freshDatabase);

  it('concurrent migrators are safe: one applies, the others find nothing to do', async () => {
    const { store, close } = await freshDatabase();
    try {
      const others = await Promise.all([database.openAnother(), database.openAnother(), database.openAnother()]);
      const results = await Promise.all([store, ...others].map((s) => migrate(s)));
      const appliers = results.filter((r) => r.applied.length > 0);
      expect(appliers).toHaveLength(1);
      expect(appliers[0]!.applied).toEqual(readMigrations().map((m) => m.name));
      const count = await sql<{ n: number }>`SELECT count(*) AS n FROM kessai_migrations`.execute(store.db);
      expect(count.rows[0]!.n).toBe(readMigrations().length);
    } finally {
      await close();
    }
  });
});
