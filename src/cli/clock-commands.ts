/**
 * `kessai clocks …`: a test-mode account's test clocks from the command line (the API's routes are
 * src/api/test-clock-routes.ts), loaded by main.ts only when one of them runs. The commands open the
 * database themselves: on PostgreSQL beside any number of servers and workers; on the embedded
 * database only while no `serve` holds it (then the HTTP API is the way).
 */
import { ALL_JOBS } from '../../jobs/index';
import type { Caller } from '../accounts/accounts';
import { formatJst } from '../domain/time';
import { workerName } from '../engine/runtime';
import { systemClock } from '../engine/system-clock';
import { claimAdvance, runAdvance } from '../test-clocks/advance';
import { createTestClock, deleteTestClock, listTestClocks, type TestClockObject } from '../test-clocks/test-clocks';
import { logger, runtime, type GlobalOptions } from './command-runtime';

const testCaller = (accountId: string): Caller => ({ accountId, livemode: false, kind: 'secret' });

function describe(clock: TestClockObject): string {
  const at = formatJst(new Date(clock.frozen_time * 1000));
  const moving = clock.advancing_to === null ? '' : ` → ${formatJst(new Date(clock.advancing_to * 1000))}`;
  return `${clock.id}  ${clock.status}  ${at}${moving}${clock.name === null ? '' : `  ${clock.name}`}`;
}

async function withRuntime<T>(g: GlobalOptions, work: (rt: Awaited<ReturnType<typeof runtime>>) => Promise<T>): Promise<T> {
  const rt = await runtime(g, logger(g), systemClock);
  try {
    return await work(rt);
  } finally {
    await rt.close();
  }
}

export async function createClockCommand(options: { account: string; frozenTime: Date; name?: string; json?: boolean }, g: GlobalOptions): Promise<void> {
  await withRuntime(g, async (rt) => {
    const clock = await createTestClock(rt.ctx, testCaller(options.account), { frozenTime: options.frozenTime, name: options.name });
    console.log(options.json ? JSON.stringify(clock, null, 2) : describe(clock));
  });
}

export async function listClocksCommand(options: { account: string; json?: boolean }, g: GlobalOptions): Promise<void> {
  await withRuntime(g, async (rt) => {
    const list = await listTestClocks(rt.ctx, testCaller(options.account));
    if (options.json) console.log(JSON.stringify(list, null, 2));
    else for (const clock of list.data) console.log(describe(clock));
  });
}

export async function deleteClockCommand(id: string, options: { account: string }, g: GlobalOptions): Promise<void> {
  await withRuntime(g, async (rt) => {
    await deleteTestClock(rt.ctx, testCaller(options.account), id);
    console.log(`${id} deleted, with every object on it`);
  });
}

/** Advances the clock and waits until it is ready (or resumes an advance whose process died). */
export async function advanceClockCommand(id: string, options: { account: string; to: Date; json?: boolean }, g: GlobalOptions): Promise<void> {
  await withRuntime(g, async (rt) => {
    const claim = await claimAdvance(rt.ctx, systemClock, testCaller(options.account), id, Math.floor(options.to.getTime() / 1000), workerName());
    if (claim.resumed) console.error(`resuming the advance of ${id} to ${formatJst(claim.row.advancing_to!)} whose process stopped`);
    const clock = await runAdvance(rt.ctx, systemClock, claim, ALL_JOBS);
    console.log(options.json ? JSON.stringify(clock, null, 2) : describe(clock));
  });
}
