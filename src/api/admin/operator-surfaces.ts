/**
 * The operator surfaces of `kessai serve`, in one place: the operator API (/admin), the operations
 * console (/console) and the Prometheus metrics (/metrics, with the API's request metrics). Passed
 * to buildServer as its `operate` option by `kessai serve` and by the HTTP tests alike.
 */
import type { FastifyInstance } from 'fastify';
import fastifyPlugin from 'fastify-plugin';
import { METRICS_CONTENT_TYPE, type KessaiMetrics } from '../../metrics/metrics';
import { defaultZoneOf } from '../rate-limits';
import type { Context } from '../../engine/context';
import type { JobDefinition } from '../../engine/job';
import type { Clock } from '../../engine/clock';
import { ADMIN_PREFIX, registerOperatorApi } from './admin-routes';
import { CONSOLE_PREFIX, registerConsole } from './console';
import { localOperator, type Operator } from './operator';
import { operatorOf, type OperatorTokens } from './operator-tokens';

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
  /** The process's metrics: the API's request metrics are recorded, and served at /metrics (operator token). */
  readonly metrics?: KessaiMetrics;
}

/** The API's request metrics: one observation per answered request, by route template (never the URL, which carries ids). */
const requestMetrics = fastifyPlugin(
  async (app: FastifyInstance, options: { metrics: KessaiMetrics }) => {
    app.addHook('onResponse', async (request, reply) => {
      const status = reply.statusCode;
      options.metrics.observeRequest({
        method: request.method,
        route: request.routeOptions.url ?? 'unmatched',
        status,
        seconds: reply.elapsedTime / 1000,
        ...(status === 429 && request.caller ? { refusedZone: defaultZoneOf(request, request.caller) } : {}),
        replayed: reply.getHeader('idempotent-replayed') === 'true',
      });
    });
  },
  { name: 'kessai-request-metrics', fastify: '5.x' },
);

/** The operator of a named operator token on this server. */
export function serverOperator(options: OperatorSurfaceOptions, who: string): Operator {
  return localOperator({ ctx: options.ctx, who, jobs: options.jobs, owner: options.owner, ledgerClock: options.ledgerClock, ...(options.stopSignal ? { stopSignal: options.stopSignal } : {}) });
}

export function operatorSurfaces(options: OperatorSurfaceOptions): (app: FastifyInstance) => Promise<void> {
  return async (app) => {
    const { metrics } = options;
    if (metrics) {
      await app.register(requestMetrics, { metrics });
      app.get('/metrics', { config: { public: true } }, async (request, reply) => {
        operatorOf(options.tokens, request);
        return reply.type(METRICS_CONTENT_TYPE).send(await metrics.render(options.ctx, options.ledgerClock.now()));
      });
    }
    await app.register(registerOperatorApi, { prefix: ADMIN_PREFIX, tokens: options.tokens, operatorFor: (who) => serverOperator(options, who) });
    await app.register(registerConsole, { prefix: CONSOLE_PREFIX, tokens: options.tokens, operatorFor: (who) => serverOperator(options, who) });
  };
}
