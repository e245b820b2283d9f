/**
 * The source of `kessai simulate --source`: one consistent, read-only snapshot of a
 * live kessai database (a PostgreSQL URL, or an embedded PGlite data folder), copied account by
 * account into the simulation's own database so the worker's jobs can run forward on the real book.
 *
 * Read-only, three ways over: the source is read in one `REPEATABLE READ READ ONLY` transaction on
 * a session whose default is read-only too, and only `SELECT` and `COPY … TO STDOUT` run in it. An
 * embedded folder is never opened in place (PGlite writes its files when it starts and stops): a
 * copy of the folder, taken while no process holds it, is opened instead and deleted afterwards.
 *
 * What is copied: the rows of the chosen accounts in every table with an `account_id` column, the
 * list read from the source's catalogue, not written down here, so a table added by a later
 * migration is copied without a change. The run ledger (`job_runs`, `job_schedule`), the migration
 * log and the other engine-wide tables have no `account_id` and are not copied.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'kysely';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { processExists, type Store } from '../db/connect';
import { readMigrations } from '../db/migrate';

/** A source that cannot be forecast from: one line, said before anything is written. */
export class SourceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SourceError';
  }
}

/** One read-only session on the source, inside its snapshot transaction. */
interface SourceSession {
  query<R>(text: string): Promise<R[]>;
  /** `COPY (…) TO STDOUT` (text format), chunk by chunk. */
  copyOut(select: string): AsyncIterable<Uint8Array>;
  close(): Promise<void>;
}

export interface SourceSnapshot {
  /** What the report names: `host:port/database` or `embedded <folder>`; never a password. */
  readonly name: string;
  /**
   * The source's newest instant: the latest of every `created_at` / `updated_at` of the copied
   * accounts' rows and of the job ledger's latest slot. `--from now` starts there.
   */
  readonly instant: Date;
  readonly accounts: readonly string[];
  /** The chosen accounts' subscriptions: the book's size, which decides where the simulation's embedded database lives (simulate.ts). */
  readonly subscriptions: number;
  /** Copies the snapshot's rows into a freshly migrated store; returns rows copied by table. */
  copyInto(target: Store): Promise<Record<string, number>>;
  /** Ends the read-only transaction and the session (and deletes an embedded folder's copy). */
  close(): Promise<void>;
}

const URL_PATTERN = /^postgres(?:ql)?:\/\//i;

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function quoteLiteral(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

/** `host:port/database` of a connection string, without user or password. */
export function sourceNameOf(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}${parsed.port ? `:${parsed.port}` : ''}${parsed.pathname || '/'}`;
  } catch {
    return '<unparseable database url>';
  }
}

async function postgresSession(url: string): Promise<{ name: string; session: SourceSession }> {
  const name = sourceNameOf(url);
  const client = new pg.Client({
    connectionString: url,
    application_name: 'kessai simulate --source',
    // Instants in UTC and ISO text whatever the server's defaults; every transaction read-only.
    options: '-c TimeZone=UTC -c DateStyle=ISO -c IntervalStyle=postgres -c extra_float_digits=3 -c default_transaction_read_only=on',
    connectionTimeoutMillis: 10_000,
  });
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => {});
    throw new SourceError(`cannot connect to the source ${name}: ${(error as Error).message}`);
  }
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  return {
    name,
    session: {
      query: async <R>(text: string) => (await client.query(text)).rows as R[],
      copyOut: (select) => client.query(copyTo(`COPY (${select}) TO STDOUT`)) as AsyncIterable<Uint8Array>,
      async close() {
        await client.query('ROLLBACK').catch(() => {});
        await client.end().catch(() => {});
      },
    },
  };
}

async function pgliteSession(dir: string): Promise<{ name: string; session: SourceSession }> {
  const location = resolve(dir);
  const name = `embedded ${location}`;
  if (!existsSync(join(location, 'PG_VERSION'))) throw new SourceError(`the source ${location} is neither a postgres:// URL nor an embedded kessai data folder`);
  const lock = join(location, 'kessai.lock');
  if (existsSync(lock)) {
    const owner = Number(readFileSync(lock, 'utf8'));
    if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && processExists(owner)) {
      throw new SourceError(`the source ${location} is in use by process ${owner}: an embedded database cannot be read while another process writes it; stop it, or run the worker on PostgreSQL`);
    }
  }
  const copy = mkdtempSync(join(tmpdir(), 'kessai-source-'));
  let pglite: PGlite;
  try {
    cpSync(location, copy, { recursive: true, filter: (path) => !path.endsWith('kessai.lock') });
    pglite = await PGlite.create(copy);
    await pglite.exec(`SET TIME ZONE 'UTC'; SET DateStyle = ISO; SET extra_float_digits = 3; BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`);
  } catch (error) {
    rmSync(copy, { recursive: true, force: true });
    throw new SourceError(`cannot open the embedded source ${location}: ${(error as Error).message}`);
  }
  return {
    name,
    session: {
      query: async <R>(text: string) => (await pglite.query<R>(text)).rows,
      async *copyOut(select) {
        const result = await pglite.query(`COPY (${select}) TO '/dev/blob'`);
        if (result.blob) yield new Uint8Array(await result.blob.arrayBuffer());
      },
      async close() {
        await pglite.exec('ROLLBACK').catch(() => {});
        await pglite.close().catch(() => {});
        rmSync(copy, { recursive: true, force: true });
      },
    },
  };
}

/** Compares the source's migration log with this kessai's sql/ folder. */
async function checkMigrations(session: SourceSession, name: string): Promise<void> {
  const known = await session.query<{ n: string }>(`SELECT count(*)::text AS n FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'kessai_migrations'`);
  if (known[0]?.n !== '1') throw new SourceError(`the source ${name} is not a kessai database (it has no migration log)`);
  const applied = await session.query<{ name: string; checksum: string }>(`SELECT name, checksum FROM kessai_migrations ORDER BY name`);
  const mine = readMigrations();
  const ours = new Map(mine.map((file) => [file.name, file.checksum]));
  const theirs = new Map(applied.map((row) => [row.name, row.checksum]));
  const newer = applied.filter((row) => !ours.has(row.name)).map((row) => row.name);
  const older = mine.filter((file) => !theirs.has(file.name)).map((file) => file.name);
  const edited = applied.filter((row) => ours.has(row.name) && ours.get(row.name) !== row.checksum).map((row) => row.name);
  if (newer.length > 0) throw new SourceError(`the source ${name} is newer than this kessai: it has migrations this kessai lacks (${newer.join(', ')}); forecast with the kessai that migrated it`);
  if (older.length > 0) throw new SourceError(`the source ${name} is older than this kessai: migrations ${older.join(', ')} are not applied there; migrate it first, or forecast with the kessai that migrated it`);
  if (edited.length > 0) throw new SourceError(`the source ${name} applied other versions of migrations ${edited.join(', ')} than this kessai has`);
}

interface TableColumns {
  readonly table: string;
  readonly columns: readonly string[];
  /** Columns whose newest value is part of the source's newest instant. */
  readonly instants: readonly string[];
  /** Columns filled from a sequence: the target's sequence is moved past the copied values. */
  readonly serials: readonly string[];
}

/** Every table of the current schema with an `account_id` column, its columns in table order. */
async function accountTables(session: SourceSession): Promise<TableColumns[]> {
  const rows = await session.query<{ table_name: string; column_name: string; data_type: string; column_default: string | null }>(`
    SELECT c.table_name, c.column_name, c.data_type, c.column_default
    FROM information_schema.columns c
    JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'
    WHERE c.table_schema = current_schema()
      AND c.table_name IN (SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = 'account_id')
    ORDER BY c.table_name, c.ordinal_position`);
  const tables = new Map<string, { columns: string[]; instants: string[]; serials: string[] }>();
  for (const row of rows) {
    let entry = tables.get(row.table_name);
    if (!entry) tables.set(row.table_name, (entry = { columns: [], instants: [], serials: [] }));
    entry.columns.push(row.column_name);
    if (row.data_type === 'timestamp with time zone' && (row.column_name === 'created_at' || row.column_name === 'updated_at')) entry.instants.push(row.column_name);
    if (row.column_default?.startsWith('nextval(')) entry.serials.push(row.column_name);
  }
  return [...tables].map(([table, entry]) => ({ table, ...entry }));
}

/**
 * Opens the source and takes its snapshot: connects, starts the read-only transaction, checks the
 * migrations, the accounts and reads the newest instant. Every refusal is a SourceError, raised
 * before the caller has written anything.
 */
export async function openSource(source: string, options: { accounts?: readonly string[] } = {}): Promise<SourceSnapshot> {
  const { name, session } = URL_PATTERN.test(source) ? await postgresSession(source) : await pgliteSession(source);
  try {
    await checkMigrations(session, name);
    const existing = (await session.query<{ account_id: string }>(`SELECT account_id FROM accounts ORDER BY account_id`)).map((row) => row.account_id);
    const requested = options.accounts?.length ? [...new Set(options.accounts)] : existing;
    const unknown = requested.filter((id) => !existing.includes(id));
    if (unknown.length > 0) throw new SourceError(`the source ${name} has no account ${unknown.map((id) => JSON.stringify(id)).join(', ')}`);
    if (requested.length === 0) throw new SourceError(`the source ${name} has no accounts to forecast`);
    const tables = await accountTables(session);
    const filter = options.accounts?.length ? ` WHERE account_id IN (${requested.map(quoteLiteral).join(', ')})` : '';
    const newest = [
      ...tables.flatMap(({ table, instants }) => instants.map((column) => `(SELECT max(${quoteIdent(column)}) FROM ${quoteIdent(table)}${filter})`)),
      `(SELECT max(slot) FROM job_runs)`,
    ];
    const [row] = await session.query<{ instant: Date | string | null }>(`SELECT GREATEST(${newest.join(', ')}) AS instant`);
    if (!row?.instant) throw new SourceError(`the source ${name} holds no dated rows for the chosen accounts`);
    const instant = new Date(row.instant);
    const [book] = await session.query<{ subscriptions: number | string }>(`SELECT count(*) AS subscriptions FROM subscriptions${filter}`);
    let closing: Promise<void> | undefined;
    return {
      name,
      instant,
      accounts: requested,
      subscriptions: Number(book?.subscriptions ?? 0),
      async copyInto(target) {
        if (!target.copyIn) throw new Error(`the simulation's database (${target.kind}) cannot load copied rows`);
        const copied: Record<string, number> = {};
        // The target is a fresh database of this simulation: its indexes that back no constraint
        // are built once after a table's load rather than row by row during it (docs/decisions/simulation.md).
        // One catalogue read for every table.
        const indexes = new Map<string, { name: string; definition: string }[]>();
        const rows = await sql<{ table: string; name: string; definition: string }>`
          SELECT t.relname AS table, quote_ident(i.relname) AS name, pg_get_indexdef(i.oid) AS definition
          FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
          WHERE t.relnamespace = current_schema()::regnamespace AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)
          ORDER BY t.relname, i.relname`.execute(target.db);
        for (const row of rows.rows) indexes.set(row.table, [...(indexes.get(row.table) ?? []), row]);
        // Read-ahead of one table: the source's rows of the next table are read (the one session
        // reads its tables one after another) while the target loads this one and builds its
        // indexes, so the source's COPY and the target's load overlap instead of taking turns.
        // (An in-process target blocks the event loop while it loads; the socket's buffers hold
        // what the source sends meanwhile.)
        const read = async (table: TableColumns): Promise<Uint8Array[]> => {
          const chunks: Uint8Array[] = [];
          for await (const chunk of session.copyOut(`SELECT ${table.columns.map(quoteIdent).join(', ')} FROM ${quoteIdent(table.table)}${filter}`)) chunks.push(chunk);
          return chunks;
        };
        let next = tables.length > 0 ? read(tables[0]!) : undefined;
        try {
          for (const [k, { table, columns, serials }] of tables.entries()) {
            const chunks = await next!;
            next = k + 1 < tables.length ? read(tables[k + 1]!) : undefined;
            // An empty table is left as migrated (most of the source's tables, in a typical book).
            if (chunks.length === 0) {
              copied[table] = 0;
              continue;
            }
            const built = indexes.get(table) ?? [];
            if (built.length > 0) await target.executeScript(target.db, built.map((index) => `DROP INDEX ${index.name};`).join('\n'));
            copied[table] = await target.copyIn(`${quoteIdent(table)} (${columns.map(quoteIdent).join(', ')})`, (async function* () { yield* chunks; })());
            chunks.length = 0;
            if (built.length > 0) await target.executeScript(target.db, built.map((index) => `${index.definition};`).join('\n'));
            for (const column of serials) {
              await target.executeScript(
                target.db,
                `SELECT setval(pg_get_serial_sequence('${quoteIdent(table)}', '${column}'), GREATEST((SELECT max(${quoteIdent(column)}) FROM ${quoteIdent(table)}), 1))`,
              );
            }
          }
        } finally {
          // A load that failed leaves the read-ahead unawaited: its failure is the same session's.
          next?.catch(() => {});
        }
        return copied;
      },
      close: () => (closing ??= session.close()),
    };
  } catch (error) {
    await session.close();
    throw error;
  }
}
