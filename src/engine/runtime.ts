/**
 * Builds a running engine from configuration: opens the store, checks or applies migrations, and
 * assembles the context. Shared by the CLI, the worker and the simulator.
 */
import { hostname } from 'node:os';
import { openStore, type Store } from '../db/connect';
import { migrate, readMigrations } from '../db/migrate';
import type { IdGenerator } from '../domain/ids';
import type { Clock } from './clock';
import { createContext, type Context, type EngineConfig, type EngineObserver } from './context';
import type { Logger } from './logger';

export interface RuntimeOptions {
  readonly databaseUrl?: string | undefined;
  readonly dataDir?: string | undefined;
  readonly clock: Clock;
  readonly ids: IdGenerator;
  readonly log: Logger;
  readonly config?: Partial<EngineConfig>;
  /**
   * Apply pending migrations on open. The CLI does this for the embedded database it owns; a
   * shared PostgreSQL is migrated on purpose, with `kessai migrate`.
   */
  readonly autoMigrate?: boolean;
  /** Reports of the engine's work (the process's metrics). */
  readonly observer?: EngineObserver;
  /** Released before the store when the runtime closes (the webhook transport's keep-alive connections). */
  readonly release?: () => Promise<void>;
}

export class NotMigratedError extends Error {
  constructor(pending: readonly string[], location: string) {
    super(`the database at ${location} is missing migrations (${pending.join(', ')}): run \`kessai migrate\` first`);
    this.name = 'NotMigratedError';
  }
}

export async function openRuntime(options: RuntimeOptions): Promise<{ ctx: Context; store: Store; close(): Promise<void> }> {
  const store = await openStore({ databaseUrl: options.databaseUrl, dataDir: options.dataDir });
  try {
    if (options.autoMigrate ?? store.kind === 'pglite') {
      await migrate(store);
    } else {
      await assertMigrated(store);
    }
  } catch (error) {
    await store.close();
    throw error;
  }
  const ctx = createContext({ db: store.db, store, clock: options.clock, ids: options.ids, log: options.log, config: options.config ?? {}, ...(options.observer ? { observer: options.observer } : {}) });
  const release = options.release ?? (() => Promise.resolve());
  return { ctx, store, close: () => release().finally(() => store.close()) };
}

export async function assertMigrated(store: Store): Promise<void> {
  const files = readMigrations();
  const applied = await store.db
    .selectFrom('kessai_migrations')
    .select('name')
    .execute()
    .catch(() => [] as { name: string }[]);
  const names = new Set(applied.map((row) => row.name));
  const pending = files.filter((file) => !names.has(file.name)).map((file) => file.name);
  if (pending.length > 0) throw new NotMigratedError(pending, store.location);
}

/** How this process names itself in the run ledger. */
export function workerName(): string {
  return `${hostname()}:${process.pid}`;
}
