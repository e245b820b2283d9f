/**
 * How fast the scheduler turns slots over: a no-op job due every minute, with a worker that was
 * down for a week, backfills 10,080 slots through the run ledger (schedule, claim, record), on a
 * scratch database created and dropped on the PostgreSQL server of DATABASE_URL (default: the
 * local server), or on in-memory PGlite with --pglite. Prints slots per second.
 *
 *   npm run bench:scheduler [-- --days 7] [-- --pglite]
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { openStore, type Store } from '../../src/db/connect';
import { migrate } from '../../src/db/migrate';
import { seededIds } from '../../src/domain/ids';
import { ManualClock } from '../../src/engine/clock';
import { createContext } from '../../src/engine/context';
import { silentLogger } from '../../src/engine/logger';
import { Scheduler } from '../../src/engine/scheduler';

const args = process.argv.slice(2);
const days = Number(args[args.indexOf('--days') + 1] ?? 7) || 7;
const usePglite = args.includes('--pglite');
const serverUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const scratch = `kessai_bench_scheduler_${process.pid}`;

async function scratchStore(): Promise<{ store: Store; drop(): Promise<void> }> {
  if (usePglite) {
    const store = await openStore({ dataDir: 'memory://' });
    return { store, drop: () => store.close() };
  }
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${scratch}`);
  const url = new URL(serverUrl);
  url.pathname = `/${scratch}`;
  const store = await openStore({ databaseUrl: url.toString() });
  return {
    store,
    drop: async () => {
      await store.close();
      await admin.query(`DROP DATABASE ${scratch} WITH (FORCE)`);
      await admin.end();
    },
  };
}

const { store, drop } = await scratchStore();
try {
  await migrate(store);
  const start = new Date('2027-01-01T00:00:00Z');
  const clock = new ManualClock(start);
  const ctx = createContext({ db: store.db, store, clock, ids: seededIds(1), log: silentLogger(), config: { backfillWindowMs: (days + 1) * 86_400_000 } });
  let runs = 0;
  const scheduler = new Scheduler(ctx, [{ name: 'bench.noop', schedule: '* * * * *', description: 'does nothing', run: async () => ({ runs: ++runs }) }], { owner: 'bench' });
  await scheduler.tick(); // first sight: the current slot only
  clock.set(new Date(start.getTime() + days * 86_400_000));
  const t0 = performance.now();
  const outcomes = await scheduler.tick();
  const seconds = (performance.now() - t0) / 1000;
  const ok = outcomes.filter((o) => o.status === 'succeeded').length;
  if (ok !== days * 1440) throw new Error(`expected ${days * 1440} slots, ran ${ok}`);
  console.log(`backend: ${store.kind}`);
  console.log(`slots backfilled: ${ok} in ${seconds.toFixed(2)} s = ${Math.round(ok / seconds)} slots/s`);
} finally {
  await drop();
}
