/**
 * What an open database is to the rest of the engine: its Kysely handle and the few operations
 * that differ between PostgreSQL and PGlite. connect.ts opens one; migrate.ts runs migrations on
 * one without importing connect.ts (which imports the migrations for the PGlite template).
 */
import type { Kysely } from 'kysely';
import type { Database } from './schema';

export type StoreKind = 'postgres' | 'pglite';

export interface Store {
  readonly kind: StoreKind;
  readonly db: Kysely<Database>;
  /** Where the data lives, for messages: a redacted URL or a folder. */
  readonly location: string;
  /**
   * Runs a script of several SQL statements (a migration) on the given executor's session.
   * Kept apart from `db` because PGlite runs multi-statement text only through `exec`.
   */
  executeScript(executor: Kysely<Database>, script: string): Promise<void>;
  /**
   * PostgreSQL only: runs `COPY (…) TO STDOUT` on a connection of its own and hands its output to
   * `write` chunk by chunk, as the raw bytes the server sends (no text decoding in this process).
   */
  copyOut?(statement: string, write: (chunk: Buffer) => void | Promise<void>): Promise<void>;
  /**
   * Loads COPY text-format rows into `target` (`table (columns)`), set-based: `COPY … FROM STDIN`
   * on PostgreSQL, `COPY … FROM '/dev/blob'` on PGlite. Returns the number of rows loaded.
   */
  copyIn?(target: string, rows: AsyncIterable<Uint8Array>): Promise<number>;
  /** PostgreSQL only: the connection pool's connections now (the metrics' database pool gauges). */
  poolStats?(): { readonly total: number; readonly idle: number; readonly waiting: number };
  /** PGlite only: the whole database as a tarball (gzipped if asked), to start another one from. */
  snapshot?(compression?: 'none' | 'gzip'): Promise<Blob>;
  close(): Promise<void>;
}
