/**
 * How a management command reaches the operator's actions (src/api/admin/operator.ts): on the
 * embedded database held by a running `kessai serve`, through that server's operator API (its
 * address and a token for this machine's CLI are in `<data dir>/serve.json`, readable by its owner
 * only); otherwise on the database directly, audited as `cli`. The output is the same either way.
 */
import { ALL_JOBS } from '../../jobs/index';
import { localOperator, type Operator } from '../api/admin/operator';
import { remoteOperator } from '../api/admin/operator-client';
import type { EngineConfig } from '../engine/context';
import type { Logger } from '../engine/logger';
import { randomIds } from '../engine/random-ids';
import { openRuntime, workerName } from '../engine/runtime';
import { systemClock } from '../engine/system-clock';
import { environmentConfig } from './environment';
import { readServeFile } from './operator-files';

export interface OperatorAccess {
  readonly databaseUrl?: string | undefined;
  readonly dataDir?: string | undefined;
  readonly log: Logger;
  readonly config?: Partial<EngineConfig>;
  readonly stopSignal?: AbortSignal;
}

/** Runs `action` with the operator: the running server's, or one on the database itself. */
export async function withOperator<T>(access: OperatorAccess, action: (operator: Operator) => Promise<T>): Promise<T> {
  const running = access.databaseUrl ? undefined : readServeFile(access.dataDir ?? '.kessai');
  if (running !== undefined) {
    access.log.debug({ server: running.url }, 'the embedded database is held by kessai serve: going through its operator API');
    return action(remoteOperator(running.url, running.token));
  }
  const rt = await openRuntime({ databaseUrl: access.databaseUrl, dataDir: access.dataDir, clock: systemClock, ids: randomIds(), log: access.log, config: { ...environmentConfig(), ...access.config } });
  try {
    return await action(localOperator({ ctx: rt.ctx, who: 'cli', jobs: ALL_JOBS, owner: workerName(), ledgerClock: systemClock, futureSlots: true, ...(access.stopSignal ? { stopSignal: access.stopSignal } : {}) }));
  } finally {
    await rt.close();
  }
}
