/**
 * `kessai serve`: the v1 HTTP API (src/api/server.ts) on PostgreSQL when DATABASE_URL is set, on
 * the embedded database otherwise, where this process owns the data and also runs the worker's
 * scheduler (`--no-worker` turns it off). A composition root: it reads the real clock, files and
 * the environment.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { InvalidArgumentError, type Command } from 'commander';
import { ALL_JOBS } from '../../jobs/index';
import { checkoutPageBaseOf } from '../checkout/checkout-sessions';
import { createLogger } from '../engine/logger';
import { randomIds } from '../engine/random-ids';
import { openRuntime, workerName } from '../engine/runtime';
import { Scheduler } from '../engine/scheduler';
import { listenForStop } from '../engine/stop-signal';
import { systemClock } from '../engine/system-clock';
import { environmentConfig } from './environment';
import { startWorkerLoop, type WorkerLoop } from './worker-loop';
import { operatorSetup } from './serve-operator';
import { KessaiMetrics } from '../metrics/metrics';
import { startMetricsServer } from '../metrics/metrics-server';

interface ServeOptions {
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

function portArg(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65_535) throw new InvalidArgumentError(`expected a port from 0 to 65535, got ${JSON.stringify(value)}`);
  return n;
}

function secondsArg(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 3_600) throw new InvalidArgumentError(`expected a whole number of seconds from 1 to 3600, got ${JSON.stringify(value)}`);
  return n;
}

function bytesArg(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1_024) throw new InvalidArgumentError(`expected a whole number of bytes, at least 1024, got ${JSON.stringify(value)}`);
  return n;
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

/** Loopback addresses: the only ones served without TLS unless --insecure-http says so (v1 §5). */
export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('serve the v1 HTTP API (and, on the embedded database, run the worker in the same process)')
    .option('--port <n>', 'TCP port', portArg, 4010)
    .option('--host <address>', 'address to bind', '127.0.0.1')
    .option('--no-worker', 'on the embedded database: do not run the scheduler in this process')
    .option('--cert <file>', 'TLS certificate (PEM): serve HTTPS')
    .option('--key <file>', 'TLS private key (PEM)')
    .option('--insecure-http', 'allow plain HTTP on a non-loopback address')
    .option('--public-url <url>', 'the address buyers reach this server at (hosted checkout page URLs; default KESSAI_PUBLIC_URL, else the address each request came to)')
    .option('--body-limit <bytes>', 'largest request body accepted (default 65536)', bytesArg)
    .option('--metrics-port <n>', 'also serve Prometheus metrics at /metrics on this port, without the operator token (they are always at /metrics here with it)', portArg)
    .option('--metrics-host <address>', 'address of --metrics-port', '127.0.0.1')
    .option('--request-timeout <seconds>', 'longest time a client may take to send a whole request, headers and body; its headers get at most 10 s (default 30)', secondsArg)
    .action(async (options: ServeOptions, command: Command) => {
      const g = command.optsWithGlobals() as { databaseUrl?: string; dataDir?: string; verbose?: boolean; logLevel: string };
      if ((options.cert === undefined) !== (options.key === undefined)) throw new Error('--cert and --key go together');
      const tls = options.cert !== undefined && options.key !== undefined;
      if (!tls && !isLoopback(options.host) && !options.insecureHttp) {
        throw new Error(`binding ${options.host} without TLS: give --cert and --key (all traffic must use HTTPS, v1 §5), or --insecure-http behind a TLS proxy`);
      }
      // Refused before anything opens, like the other arguments.
      const checkoutPageBaseUrl = options.publicUrl === undefined ? undefined : checkoutPageBaseOf(options.publicUrl);
      const https = tls ? { cert: readFileSync(options.cert!), key: readFileSync(options.key!) } : undefined;
      const log = createLogger({ level: g.verbose ? 'debug' : g.logLevel === 'warn' ? 'info' : g.logLevel });
      // Loaded here, not at the top: every other kessai command starts without the HTTP stack.
      const { buildServer } = await import('../api/server');
      const { serverPolicies, rateLimitsFromText, openRateLimitRedis } = await import('../api/request-policies');
      const { FAULT_POINTS } = await import('../api/idempotency');
      const { NETWORK_FAULT_POINTS, networkWithFault } = await import('../processor/network-faults');
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
    });
}
