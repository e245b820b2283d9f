/**
 * What `kessai serve` runs once its arguments are checked (serve.ts): the HTTP server on
 * PostgreSQL, or on the embedded database together with the worker's scheduler. Loaded only by
 * `serve`: every other command starts without the HTTP stack. A composition root: it reads the
 * real clock, files and the environment.
 */
import { readFileSync } from 'node:fs';
import { ALL_JOBS } from '../../jobs/index';
import { buildServer } from '../api/server';
import { FAULT_POINTS } from '../api/idempotency';
import { openRateLimitRedis, rateLimitsFromText, serverPolicies } from '../api/request-policies';
import { checkoutPageBaseOf } from '../checkout/checkout-sessions';
import { createLogger } from '../engine/logger';
import { randomIds } from '../engine/random-ids';
import { openRuntime, workerName } from '../engine/runtime';
import { Scheduler } from '../engine/scheduler';
import { listenForStop } from '../engine/stop-signal';
import { systemClock } from '../engine/system-clock';
import { KessaiMetrics } from '../metrics/metrics';
import { startMetricsServer } from '../metrics/metrics-server';
import { NETWORK_FAULT_POINTS, networkWithFault } from '../processor/network-faults';
import type { GlobalOptions } from './command-runtime';
import { environmentConfig } from './environment';
import { operatorSetup } from './serve-operator';
import { startWorkerLoop, type WorkerLoop } from './worker-loop';

export interface ServeOptions {
  readonly port: number;
  readonly host: string;
  readonly worker: boolean;
  readonly cert?: string;
  readonly key?: string;
  readonly insecureHttp?: boolean;
  readonly bodyLimit?: number;
  readonly requestTimeout?: number;
  readonly publicUrl?: string;
  readonly metricsPort?: number;
  readonly metricsHost: string;
}

/**
 * KESSAI_FAULT (crash tests only): a fault point of the Idempotency-Key handling
 * (src/api/idempotency.ts, `before-operation-commit` or `after-operation-commit`) or of the card
 * network (src/processor/network-faults.ts, `after-authorization`) at which the process kills
 * itself with SIGKILL, as a crash would. Unset or empty: no fault. Another value is refused at
 * start-up.
 */
export function faultFromText<P extends string>(text: string | undefined, points: readonly P[]): { readonly point: P; readonly act: () => void } | undefined {
  if (text === undefined || text.trim() === '') return undefined;
  const point = points.find((p) => p === text.trim());
  if (point === undefined) throw new Error(`KESSAI_FAULT must be one of ${points.join(', ')}; got ${JSON.stringify(text)}`);
  return { point, act: () => process.kill(process.pid, 'SIGKILL') };
}

export async function runServe(options: ServeOptions, g: GlobalOptions): Promise<void> {
  const tls = options.cert !== undefined && options.key !== undefined;
  // Refused before anything opens, like the other arguments.
  const checkoutPageBaseUrl = options.publicUrl === undefined ? undefined : checkoutPageBaseOf(options.publicUrl);
  const https = tls ? { cert: readFileSync(options.cert!), key: readFileSync(options.key!) } : undefined;
  const log = createLogger({ level: g.verbose ? 'debug' : g.logLevel === 'warn' ? 'info' : g.logLevel });
  // Refused before anything opens: a bad KESSAI_RATE_LIMITS names what is wrong.
  const rateLimits = rateLimitsFromText(process.env.KESSAI_RATE_LIMITS);
  const fault = faultFromText(process.env.KESSAI_FAULT, [...FAULT_POINTS, ...NETWORK_FAULT_POINTS]);
  if (fault !== undefined) log.warn({ fault: fault.point }, 'KESSAI_FAULT is set: this process kills itself (SIGKILL) at that point (of the next keyed POST, or of the next authorization); for crash tests only');
  const networkFault = NETWORK_FAULT_POINTS.find((point) => point === fault?.point);
  const idempotencyFault = FAULT_POINTS.find((point) => point === fault?.point);
  // First, before the database is opened: until the handlers exist, a signal kills the process.
  const stop = listenForStop(log);
  try {
    const metrics = new KessaiMetrics({ jobs: ALL_JOBS });
    const opened = await openRuntime({ databaseUrl: g.databaseUrl, dataDir: g.dataDir, clock: systemClock, ids: randomIds(), log, observer: metrics.observer, config: { ...environmentConfig(), ...(checkoutPageBaseUrl === undefined ? {} : { checkoutPageBaseUrl }) } });
    const rt = networkFault === undefined ? opened : { ...opened, ctx: { ...opened.ctx, processor: networkWithFault(opened.ctx.processor, networkFault, fault!.act) } };
    if (rt.ctx.config.statementUrlSecret === undefined) log.warn('KESSAI_STATEMENT_URL_SECRET is not set: statement_urls and application_urls answer 500 until it is');
    // Rate-limit counters in Redis when one is given (PostgreSQL only: the embedded database's
    // one process counts in memory).
    const redisUrl = process.env.KESSAI_REDIS_URL?.trim() || undefined;
    if (redisUrl !== undefined && rt.store.kind === 'pglite') log.warn('KESSAI_REDIS_URL is ignored on the embedded database: rate limits are counted in memory');
    let redis: Awaited<ReturnType<typeof openRateLimitRedis>> | undefined;
    try {
      redis = redisUrl !== undefined && rt.store.kind === 'postgres' ? await openRateLimitRedis(redisUrl, log) : undefined;
    } catch (error) {
      await rt.close();
      throw error;
    }
    const requestPolicies = serverPolicies({ ctx: rt.ctx, storeKind: rt.store.kind, rateLimits, ...(redis === undefined ? {} : { redis }), ...(idempotencyFault === undefined ? {} : { idempotency: { fault: { point: idempotencyFault, act: fault!.act } } }) });
    const operator = operatorSetup(rt.ctx, rt.store.kind, g.dataDir ?? '.kessai', stop.signal, metrics);
    const app = await buildServer({ ctx: rt.ctx, log, requestPolicies, operate: operator.surfaces, ...(options.bodyLimit === undefined ? {} : { bodyLimit: options.bodyLimit }), ...(options.requestTimeout === undefined ? {} : { requestTimeoutMs: options.requestTimeout * 1000 }), ...(https ? { https } : {}) });
    let loop: WorkerLoop | null = null;
    try {
      await app.listen({ port: options.port, host: options.host });
    } catch (error) {
      redis?.disconnect();
      await rt.close();
      throw error;
    }
    if (rt.store.kind === 'pglite' && options.worker) {
      loop = startWorkerLoop(new Scheduler(rt.ctx, ALL_JOBS, { owner: workerName(), ledgerClock: systemClock, stopSignal: stop.signal }), log);
    }
    const address = app.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : options.port;
    const origin = `${tls ? 'https' : 'http'}://${options.host.includes(':') ? `[${options.host}]` : options.host}:${port}`;
    console.log(`kessai v1 API on ${origin}/v1 (${rt.store.kind} ${rt.store.location}${loop ? ', worker in this process' : ''})`);
    const serveFile = operator.started(origin);
    const metricsServer = options.metricsPort === undefined ? undefined : await startMetricsServer({ metrics, ctx: rt.ctx, clock: systemClock, host: options.metricsHost, port: options.metricsPort });
    if (metricsServer) console.log(`metrics on ${metricsServer.url}`);
    const signal = await stop.stopped;
    log.info({ signal }, 'stopping: finishing in-flight requests and the current batch');
    // Fastify stops accepting, answers what is in flight, then closes; the worker finishes its batch.
    serveFile?.remove();
    await metricsServer?.close();
    await Promise.all([app.close(), loop?.stop()]);
    await redis?.quit();
    await rt.close();
    log.info('server stopped');
  } finally {
    stop.dispose();
  }
}
