/**
 * Gives each test file its own database: on PostgreSQL a clone of the migrated template, on PGlite
 * a fresh in-memory instance, migrated. Set KESSAI_KEEP_TEST_DB=1 to keep PostgreSQL databases
 * for inspection after the run.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { openStore, type Store } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import { seededIds, type IdGenerator } from '../../src/domain/ids';
import { ManualClock } from '../../src/engine/clock';
import { createContext, type Context, type EngineConfig } from '../../src/engine/context';
import { silentLogger } from '../../src/engine/logger';
import type { CardNetwork } from '../../src/processor/card-network';
import { withDatabase } from './backend';

/** The one fixed reference instant tests set their clocks from: 2027-01-01 09:00 JST. */
export const REFERENCE_INSTANT = new Date('2027-01-01T00:00:00.000Z');

export interface TestDatabase {
  readonly store: Store;
  /** The connection string of this file's database (PostgreSQL only), for child processes. */
  readonly url: string | null;
  readonly kind: 'postgres' | 'pglite';
  /** Opens one more store on the same database (PostgreSQL only). */
  openAnother(): Promise<Store>;
  drop(): Promise<void>;
}

export function isPostgres(): boolean {
  return inject('kessaiBackend').kind === 'postgres';
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const backend = inject('kessaiBackend');
  if (backend.kind === 'pglite') {
    const store = await openStore({ dataDir: 'memory://' });
    await migrate(store);
    return {
      store,
      url: null,
      kind: 'pglite',
      openAnother: () => Promise.reject(new Error('PGlite is one in-process database; a second connection needs PostgreSQL')),
      drop: () => store.close(),
    };
  }
  const template = inject('kessaiTemplate')!;
  // The creation time in the name lets a later run tell an abandoned database from a live one.
  const name = `kessai_t_${Math.floor(Date.now() / 1000)}_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: backend.serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}" TEMPLATE "${template}"`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(backend.serverUrl, name);
  const store = await openStore({ databaseUrl: url });
  const others: Store[] = [];
  return {
    store,
    url,
    kind: 'postgres',
    async openAnother() {
      const another = await openStore({ databaseUrl: url });
      others.push(another);
      return another;
    },
    async drop() {
      await Promise.all([store, ...others].map((s) => s.close()));
      if (process.env.KESSAI_KEEP_TEST_DB) return;
      const cleanup = new pg.Client({ connectionString: backend.serverUrl });
      await cleanup.connect();
      try {
        await cleanup.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await cleanup.end();
      }
    },
  };
}

export interface TestContextOptions {
  readonly at?: Date;
  readonly seed?: number;
  readonly config?: Partial<EngineConfig>;
  readonly ids?: IdGenerator;
  /** The card network (the deterministic simulator when absent). */
  readonly processor?: CardNetwork;
}

/** A context on the test database with a manual clock at the reference instant and seeded ids. */
export function testContext(store: Store, options: TestContextOptions = {}): Context & { clock: ManualClock } {
  const clock = new ManualClock(options.at ?? REFERENCE_INSTANT);
  const ctx = createContext({ db: store.db, store, clock, ids: options.ids ?? seededIds(options.seed ?? 1), log: silentLogger(), config: options.config ?? {}, ...(options.processor ? { processor: options.processor } : {}) });
  return { ...ctx, clock };
}
