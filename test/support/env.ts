/**
 * What the worker scripts of the tests share: their required variables, and a context at the fixed
 * instant KESSAI_AT on the database of DATABASE_URL (lease from KESSAI_LEASE_MS, owner KESSAI_OWNER).
 */
import { openStore } from '../../src/db/connect';
import { seededIds } from '../../src/domain/ids';
import { FixedClock } from '../../src/engine/clock';
import { createContext, type EngineConfig } from '../../src/engine/context';
import { silentLogger } from '../../src/engine/logger';
import type { WebhookTransport } from '../../src/engine/context';

/** A variable the worker scripts of the tests cannot run without. */
export function requiredEnv(name: string): string {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
}

export async function workerContext(options: { config?: Partial<EngineConfig>; webhookTransport?: WebhookTransport } = {}) {
  const owner = requiredEnv('KESSAI_OWNER');
  const store = await openStore({ databaseUrl: requiredEnv('DATABASE_URL'), poolSize: 2 });
  const ctx = createContext({
    db: store.db,
    store,
    clock: new FixedClock(new Date(requiredEnv('KESSAI_AT'))),
    ids: seededIds(7),
    log: silentLogger(),
    config: { leaseMs: Number(process.env.KESSAI_LEASE_MS ?? 300_000), ...options.config },
    ...(options.webhookTransport ? { webhookTransport: options.webhookTransport } : {}),
  });
  return { owner, store, ctx };
}
