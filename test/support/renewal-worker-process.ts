/**
 * A worker of one real job in its own process, for the tests that need real concurrency or a real
 * crash: one scheduler tick of `subscriptions.renew` (or the job named by KESSAI_JOB) against
 * DATABASE_URL at a fixed instant. It prints `batch N authorizing` (or `batch N releasing`) when
 * a batch — its transaction open, its rows locked — calls the card network, then waits
 * KESSAI_PAUSE_MS, so a test can kill it in the middle of a batch; and a final JSON line with its
 * outcomes.
 *
 * KESSAI_RENDEZVOUS=<dir>:<n> gates the first batch: it leaves a file named by the owner in <dir>
 * and waits, its rows locked, until <n> owners have (so <n> processes are in a batch at once).
 *
 * KESSAI_FAIL_CARD=<card number> makes every authorization batch that holds a card of that number
 * throw (its transaction rolls back), with KESSAI_FAIL_CODE as the error's code when set (`08006`:
 * as a database node that cannot be reached).
 *
 * Env: DATABASE_URL, KESSAI_AT (ISO instant), KESSAI_OWNER, KESSAI_BATCH_SIZE, KESSAI_PAUSE_MS,
 * KESSAI_LEASE_MS, KESSAI_JOB (a job of the registry, default subscriptions.renew), KESSAI_RENDEZVOUS,
 * KESSAI_FAIL_CARD, KESSAI_FAIL_CODE, KESSAI_DEBUG (logs at debug level on stderr).
 */
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ALL_JOBS } from '../../jobs/index';
import { openStore } from '../../src/db/connect';
import { seededIds } from '../../src/domain/ids';
import { FixedClock } from '../../src/engine/clock';
import { createContext } from '../../src/engine/context';
import { createLogger, silentLogger } from '../../src/engine/logger';
import { Scheduler } from '../../src/engine/scheduler';
import { simulatedCardNetwork, type CardNetwork } from '../../src/processor/card-network';
import { cardFingerprint } from '../../src/processor/test-cards';
import { requiredEnv } from './env';

const env = requiredEnv;

const owner = env('KESSAI_OWNER');
const jobName = process.env.KESSAI_JOB ?? 'subscriptions.renew';
const job = ALL_JOBS.find((candidate) => candidate.name === jobName);
if (!job) throw new Error(`no job named ${jobName}`);
const pauseMs = Number(process.env.KESSAI_PAUSE_MS ?? 0);
const network = simulatedCardNetwork();
let batch = 0;
const rendezvous = process.env.KESSAI_RENDEZVOUS?.split(':');
/** The first batch waits (a bounded number of looks) until the rendezvous has all its owners. */
const meet = async (): Promise<void> => {
  if (rendezvous === undefined) return;
  const [dir, count] = [rendezvous[0]!, Number(rendezvous[1])];
  writeFileSync(join(dir, owner), '');
  for (let i = 0; i < 4_500; i += 1) {
    if (readdirSync(dir).length >= count) return;
    await sleep(10);
  }
  throw new Error(`rendezvous: ${count} owners never met in ${dir}`);
};
const announce = async (what: string, requests: readonly unknown[]): Promise<void> => {
  batch += 1;
  process.stdout.write(`batch ${batch} ${what} ${requests.length}\n`);
  if (batch === 1) await meet();
  if (pauseMs > 0) await sleep(pauseMs);
};
const failing = process.env.KESSAI_FAIL_CARD === undefined ? undefined : cardFingerprint(process.env.KESSAI_FAIL_CARD);
const failCode = process.env.KESSAI_FAIL_CODE;
const processor: CardNetwork = {
  ...network,
  async authorize(requests) {
    if (failing !== undefined && requests.some((request) => request.fingerprint === failing)) {
      throw Object.assign(new Error('injected failure of an authorization batch'), failCode === undefined ? {} : { code: failCode });
    }
    await announce('authorizing', requests);
    return network.authorize(requests);
  },
  async release(requests) {
    await announce('releasing', requests);
    return network.release(requests);
  },
};
const store = await openStore({ databaseUrl: env('DATABASE_URL'), poolSize: 2 });
const ctx = createContext({
  db: store.db,
  store,
  clock: new FixedClock(new Date(env('KESSAI_AT'))),
  // Ids differ per owner, as they do between real workers (two workers never share a stream).
  ids: seededIds([...owner].reduce((h, c) => h * 31 + c.charCodeAt(0), 7) % 1_000_000),
  processor,
  log: process.env.KESSAI_DEBUG ? createLogger({ level: 'debug' }) : silentLogger(),
  config: { batchSize: Number(process.env.KESSAI_BATCH_SIZE ?? 100), leaseMs: Number(process.env.KESSAI_LEASE_MS ?? 300_000) },
});
const scheduler = new Scheduler(ctx, [job], { owner });
const outcomes = await scheduler.tick();
process.stdout.write(`${JSON.stringify({ owner, outcomes })}\n`);
await store.close();
