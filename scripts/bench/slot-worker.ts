/**
 * One kessai worker of a benchmark that runs a slot with several worker processes
 * (runEngineAgainstCeiling with `workers`): wakes at the slot's instant (a scheduler tick with the
 * engine clock fixed there) until the slot is finished — the first to claim it leads, the others
 * take its account groups (src/engine/slot-groups.ts) — then prints its outcomes as one JSON line.
 *
 * Env: DATABASE_URL, KESSAI_AT (the slot), KESSAI_JOB (a job of the registry), KESSAI_OWNER,
 * KESSAI_BATCH_SIZE.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ALL_JOBS } from '../../jobs/index';
import { openStore } from '../../src/db/connect';
import { seededIds } from '../../src/domain/ids';
import { FixedClock } from '../../src/engine/clock';
import { createContext } from '../../src/engine/context';
import { silentLogger } from '../../src/engine/logger';
import { Scheduler, type SlotOutcome } from '../../src/engine/scheduler';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const owner = env('KESSAI_OWNER');
const slot = new Date(env('KESSAI_AT'));
const job = ALL_JOBS.find((candidate) => candidate.name === env('KESSAI_JOB'));
if (!job) throw new Error(`no job named ${env('KESSAI_JOB')}`);
const store = await openStore({ databaseUrl: env('DATABASE_URL'), poolSize: 2 });
try {
  const ctx = createContext({
    db: store.db,
    store,
    clock: new FixedClock(slot),
    // Ids differ per owner, as they do between real workers.
    ids: seededIds([...owner].reduce((h, c) => h * 31 + c.charCodeAt(0), 11) % 1_000_000),
    log: silentLogger(),
    config: { batchSize: Number(env('KESSAI_BATCH_SIZE')) },
  });
  const scheduler = new Scheduler(ctx, [job], { owner });
  const outcomes: SlotOutcome[] = [];
  for (;;) {
    outcomes.push(...(await scheduler.tick()));
    const row = await store.db.selectFrom('job_runs').select('status').where('job', '=', job.name).where('slot', '=', slot).executeTakeFirst();
    if (row !== undefined && row.status !== 'pending' && row.status !== 'running') break;
    // The slot is led elsewhere and has no group to take right now: look again shortly.
    await sleep(20);
  }
  process.stdout.write(`${JSON.stringify({ owner, outcomes })}\n`);
} finally {
  await store.close();
}
