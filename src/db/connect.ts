/**
 * Opens the engine's storage: PostgreSQL through pg when a connection string is given, otherwise
 * embedded PGlite in a local data folder. Both speak the same SQL and return the same values
 * (see type-parsers.ts); callers see one `Store`.
 */
import { existsSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { PGliteDialect } from 'kysely-pglite-dialect';
import pg from 'pg';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import type { Database } from './schema';
import type { Store } from './store';
import { PG_VERSION_FILE, pgliteTemplateFile, unpackPgliteTemplate } from './pglite-template';
import { CitusStore } from './citus-shape';
import { PreparingClient } from './prepared';
import { SHARED_PARSERS } from './type-parsers';
import { PGLITE_SERIALIZERS } from './utf8-param';

export type { Store, StoreKind } from './store';

export interface OpenStoreOptions {
  /** PostgreSQL connection string; when absent, embedded PGlite is used. */
  readonly databaseUrl?: string | undefined;
  /** PGlite data folder (default `.kessai/` in the working directory); `memory://` keeps it in memory. */
  readonly dataDir?: string | undefined;
  /** Pool size for PostgreSQL (default 10). */
  readonly poolSize?: number;
  /** Application name shown in pg_stat_activity. */
  readonly applicationName?: string;
  /** PGlite only: start from this snapshot (see `Store.snapshot`) instead of an empty database. */
  readonly pgliteSnapshot?: Blob;
}

export const DEFAULT_DATA_DIR = '.kessai';

/** `postgres://user:secret@host/db` → `postgres://user:***@host/db`, for logs and errors. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '<unparseable database url>';
  }
}

export async function openStore(options: OpenStoreOptions = {}): Promise<Store> {
  return options.databaseUrl ? openPostgres(options.databaseUrl, options) : openPglite(options.dataDir ?? DEFAULT_DATA_DIR, options.pgliteSnapshot);
}

async function openPostgres(url: string, options: OpenStoreOptions): Promise<Store> {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize ?? 10,
    application_name: options.applicationName ?? 'kessai',
    // Instants are stored and read in UTC, whatever the server's default.
    options: '-c TimeZone=UTC',
    connectionTimeoutMillis: 10_000,
    // Statements marked `prepared(name)` are prepared once per connection (./prepared.ts).
    Client: PreparingClient,
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
        const shared = SHARED_PARSERS[oid];
        if (shared && format !== 'binary') return shared;
        return pg.types.getTypeParser(oid, format as 'text');
      }) as typeof pg.types.getTypeParser,
    },
  });
  // An idle client that loses its server must not crash the process; the next query reports it.
  pool.on('error', () => {});
  // Fail fast with a clear message when the server is unreachable.
  const client = await pool.connect().catch(async (error: unknown) => {
    await pool.end().catch(() => {});
    throw new Error(`cannot connect to PostgreSQL at ${redactUrl(url)}: ${(error as Error).message}`, { cause: error });
  });
  // A Citus coordinator's database (citus-shape.ts): its stores write in statements routed whole.
  const citus = await client
    .query<{ citus: boolean }>(`SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus`)
    .then((result) => result.rows[0]!.citus)
    .finally(() => client.release());
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }), plugins: citus ? [new CitusStore()] : [] });
  return {
    kind: 'postgres',
    db,
    location: redactUrl(url),
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    async executeScript(executor, script) {
      // Without parameters pg uses the simple query protocol, which accepts several statements.
      await sql.raw(script).execute(executor);
    },
    async copyOut(statement, write) {
      const client = await pool.connect();
      try {
        for await (const chunk of client.query(copyTo(statement))) await write(chunk as Buffer);
        client.release();
      } catch (error) {
        // A COPY left half read cannot go back to the pool: the connection is closed.
        client.release(true);
        throw error;
      }
    },
    async copyIn(target, rows) {
      const client = await pool.connect();
      try {
        const stream = client.query(copyFrom(`COPY ${target} FROM STDIN`));
        await pipeline(Readable.from(rows), stream);
        client.release();
        return Number(stream.rowCount);
      } catch (error) {
        client.release(true);
        throw error;
      }
    },
    close: () => db.destroy(),
  };
}

/**
 * PGlite is a database inside one process: a second process opening the same folder would
 * silently lose writes. A lock file naming the owning process keeps the folder to one process at a
 * time; a lock left by a process that no longer exists is taken over.
 */
function lockDataDir(location: string): () => void {
  const lockFile = join(location, 'kessai.lock');
  const mine = String(process.pid);
  for (let attempt = 0; attempt < 2; attempt += 1) {
    try {
      writeFileSync(lockFile, mine, { flag: 'wx' });
      return () => {
        try {
          if (readFileSync(lockFile, 'utf8') === mine) unlinkSync(lockFile);
        } catch {
          // Already gone: nothing to release.
        }
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = Number(readFileSync(lockFile, 'utf8'));
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && processExists(owner)) {
        throw new Error(`the embedded database at ${location} is in use by process ${owner}; stop it first, or set DATABASE_URL to share a PostgreSQL server between processes`);
      }
      unlinkSync(lockFile);
    }
  }
  throw new Error(`cannot lock the embedded database at ${location}`);
}

type MemFile = { contents: Uint8Array | null; usedBytes: number };

/**
 * An in-memory PGlite keeps each database file in one Uint8Array (Emscripten's MEMFS), which grows
 * by 12.5 % once past 1 MB, copying the whole file each time: a 400 MB events table is copied some
 * 50 times as it grows (profiled cost: docs/decisions/performance.md). Here a file
 * doubles up to 64 MB and then grows 64 MB at a time, the same contents in fewer, larger copies.
 * Left alone if this PGlite's file system is not the one this was written for.
 */
function growFilesGeometrically(pglite: PGlite): void {
  const memfs = (pglite as unknown as { Module?: { FS?: { filesystems?: { MEMFS?: { expandFileStorage?: unknown } } } } }).Module?.FS?.filesystems?.MEMFS;
  if (memfs === undefined || typeof memfs.expandFileStorage !== 'function' || memfs.expandFileStorage.length !== 2) return;
  memfs.expandFileStorage = (node: MemFile, wanted: number): void => {
    const capacity = node.contents ? node.contents.length : 0;
    if (capacity >= wanted) return;
    const contents = new Uint8Array(grownFileCapacity(capacity, wanted));
    if (node.contents && node.usedBytes > 0) contents.set(node.contents.subarray(0, node.usedBytes), 0);
    node.contents = contents;
  };
}

const FILE_GROWTH_STEP = 64 * 1024 * 1024;

/** The new capacity of an in-memory file of `capacity` bytes that must hold `wanted` (> capacity). */
export function grownFileCapacity(capacity: number, wanted: number): number {
  const grown = capacity < FILE_GROWTH_STEP ? Math.max(capacity * 2, 256) : capacity + FILE_GROWTH_STEP;
  return Math.max(wanted, grown);
}

/** Whether a process with this id exists (one owned by another user counts). */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** PostgreSQL's shared_buffers for an embedded database in a data folder (see openPglite). */
export const DATA_FOLDER_SHARED_BUFFERS = '16MB';

async function openPglite(dataDir: string, snapshot?: Blob): Promise<Store> {
  const inMemory = dataDir.startsWith('memory://');
  const location = inMemory ? dataDir : resolve(dataDir);
  if (!inMemory) mkdirSync(location, { recursive: true });
  const unlock = inMemory ? () => {} : lockDataDir(location);
  let pglite: PGlite;
  try {
    // A new folder starts from the build's migrated database instead of initdb (./pglite-template.ts).
    const template = inMemory || snapshot || existsSync(join(location, PG_VERSION_FILE)) ? undefined : pgliteTemplateFile();
    if (template !== undefined) unpackPgliteTemplate(template, location);
    pglite = await PGlite.create(inMemory ? dataDir : location, {
      parsers: SHARED_PARSERS as Record<number, (text: string) => unknown>,
      serializers: PGLITE_SERIALIZERS,
      ...(snapshot ? { loadDataDir: snapshot } : {}),
      // A data folder's pages are also in the operating system's file cache: a smaller buffer pool
      // than PostgreSQL's 128 MB, which PGlite touches whole at start-up (memory and time of every
      // command). An in-memory database (simulations, tests) keeps the default: its pages are
      // nowhere else.
      ...(inMemory ? {} : { startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${DATA_FOLDER_SHARED_BUFFERS}`] }),
    });
  } catch (error) {
    unlock();
    throw error;
  }
  if (inMemory) growFilesGeometrically(pglite);
  await pglite.exec(`SET TIME ZONE 'UTC'`);
  const db = new Kysely<Database>({ dialect: new PGliteDialect(pglite) });
  return {
    kind: 'pglite',
    db,
    location,
    async executeScript(_executor, script) {
      // PGlite is a single session, so `exec` runs inside whatever transaction the executor opened.
      await pglite.exec(script);
    },
    async copyIn(target, rows) {
      const chunks: Uint8Array[] = [];
      for await (const chunk of rows) chunks.push(chunk);
      const result = await pglite.query(`COPY ${target} FROM '/dev/blob'`, [], { blob: new Blob(chunks) });
      return result.affectedRows ?? 0;
    },
    snapshot: (compression = 'none') => pglite.dumpDataDir(compression),
    close: async () => {
      await db.destroy();
      unlock();
    },
  };
}
