/**
 * The operator surfaces of `kessai serve`, in one place: the operator API (/admin), the operations
 * console (/console) and the Prometheus metrics (/metrics, with the API's request metrics). Passed
 * to buildServer as its `operate` option by `kessai serve` and by the HTTP tests alike.
 */
import type { FastifyInstance } from 'fastify';
import type { Context } from '../../engine/context';
import type { JobDefinition } from '../../engine/job';
import type { Clock } from '../../engine/clock';
import { ADMIN_PREFIX, registerOperatorApi } from './admin-routes';
import { localOperator, type Operator } from './operator';
import type { OperatorTokens } from './operator-tokens';

export interface OperatorSurfaceOptions {
  readonly ctx: Context;
  readonly tokens: OperatorTokens;
  readonly jobs: readonly JobDefinition[];
  /** Names this process in the run ledger (`host:pid`). */
  readonly owner: string;
  /** The run ledger's clock (the real one). */
  readonly ledgerClock: Clock;
  /** Stops slot runs when the server stops. */
  readonly stopSignal?: AbortSignal;
}

/** The operator of a named operator token on this server. */
export function serverOperator(options: OperatorSurfaceOptions, who: string): Operator {
  return localOperator({ ctx: options.ctx, who, jobs: options.jobs, owner: options.owner, ledgerClock: options.ledgerClock, ...(options.stopSignal ? { stopSignal: options.stopSignal } : {}) });
}

export function operatorSurfaces(options: OperatorSurfaceOptions): (app: FastifyInstance) => Promise<void> {
  return async (app) => {
    await app.register(registerOperatorApi, { prefix: ADMIN_PREFIX, tokens: options.tokens, operatorFor: (who) => serverOperator(options, who) });
  };
}
