/**
 * A webhook delivery worker in its own process (SIGKILL and two-worker tests): one delivery pass
 * against DATABASE_URL at a fixed instant, printing a line per recorded flush and a final JSON
 * line with its counts.
 *
 * Env: DATABASE_URL, KESSAI_AT (ISO instant), KESSAI_OWNER, KESSAI_LEASE_MS, KESSAI_CONCURRENCY.
 */
import { openStore } from '../../src/db/connect';
import { seededIds } from '../../src/domain/ids';
import { FixedClock } from '../../src/engine/clock';
import { createContext } from '../../src/engine/context';
import { silentLogger } from '../../src/engine/logger';
import { deliverDueWebhooks } from '../../src/webhooks/delivery';
import { httpWebhookTransport } from '../../src/webhooks/transport';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};

const owner = env('KESSAI_OWNER');
const store = await openStore({ databaseUrl: env('DATABASE_URL'), poolSize: 2 });
const transport = httpWebhookTransport({ timeoutMs: 5_000 });
const ctx = createContext({
  db: store.db,
  store,
  clock: new FixedClock(new Date(env('KESSAI_AT'))),
  ids: seededIds(7),
  log: silentLogger(),
  config: { leaseMs: Number(process.env.KESSAI_LEASE_MS ?? 300_000) },
  webhookTransport: transport,
});
const concurrency = Number(process.env.KESSAI_CONCURRENCY ?? 8);
const counts = await deliverDueWebhooks(ctx, {
  owner,
  concurrency,
  perEndpoint: concurrency,
  claimSize: 20,
  onRecorded: (recorded) => process.stdout.write(`recorded ${recorded.length}\n`),
});
process.stdout.write(`${JSON.stringify({ owner, counts })}\n`);
await transport.close();
await store.close();
