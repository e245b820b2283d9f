/**
 * What `kessai serve` runs once its arguments are checked (serve.ts): the HTTP server on
 * PostgreSQL, or on the embedded database together with the worker's scheduler. Loaded only by
 * `serve`: every other command starts without the HTTP stack. A composition root: it reads the
 * real clock, files and the environment.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ALL_JOBS } from '../../jobs/index';
import { drainServer } from '../api/drain';
import { BROWSER_SCRIPT_PATH } from '../checkout/hosted-page';
import type { RateLimitProfile } from '../api/rate-limit-profiles';
import { buildServer } from '../api/server';
import { FAULT_POINTS } from '../api/idempotency';
import { openRateLimitRedis, rateLimitsFromText, serverPolicies } from '../api/request-policies';
import { CHECKOUT_PAGE_PATH, checkoutPageBaseOf } from '../checkout/checkout-sessions';
import { createLogger } from '../engine/logger';
import { randomIds } from '../engine/random-ids';
import { openRuntime, workerName } from '../engine/runtime';
import { Scheduler } from '../engine/scheduler';
import { listenForStop, STOP_SIGNALS } from '../engine/stop-signal';
import { systemClock } from '../engine/system-clock';
import { KessaiMetrics } from '../metrics/metrics';
import { startMetricsServer } from '../metrics/metrics-server';
import { NETWORK_FAULT_POINTS, networkWithFault, networkWithGate } from '../processor/network-faults';
import type { GlobalOptions } from './command-runtime';
import { closeDefaultWebhookTransport } from '../webhooks/delivery';
import { environmentConfig } from './environment';
import { operatorSetup } from './serve-operator';
import { startWebhookPoller } from './webhook-commands';
import { startWorkerLoop } from './worker-loop';

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
  /** The rate-limit profile; default `development` on the embedded database, `spec` on PostgreSQL. */
  readonly rateLimits?: RateLimitProfile;
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
  const rateLimitOverrides = rateLimitsFromText(process.env.KESSAI_RATE_LIMITS);
  const fault = faultFromText(process.env.KESSAI_FAULT, [...FAULT_POINTS, ...NETWORK_FAULT_POINTS]);
  if (fault !== undefined) log.warn({ fault: fault.point }, 'KESSAI_FAULT is set: this process kills itself (SIGKILL) at that point (of the next keyed POST, or of the next authorization); for crash tests only');
  const networkFault = NETWORK_FAULT_POINTS.find((point) => point === fault?.point);
  const idempotencyFault = FAULT_POINTS.find((point) => point === fault?.point);
  const gate = process.env.KESSAI_TEST_NETWORK_GATE?.trim() || undefined;
  if (gate !== undefined && !process.env.VITEST) throw new Error('KESSAI_TEST_NETWORK_GATE is for the test suite only (it holds every card authorization until a file exists)');
  // First, before the database is opened: until the handlers exist, a signal kills the process.
  // A second signal exits at once (the operator does not want to wait for slow requests).
  const stop = listenForStop(log, STOP_SIGNALS, { onRepeat: 'exit' });
  try {
    const metrics = new KessaiMetrics({ jobs: ALL_JOBS });
    const opened = await openRuntime({ databaseUrl: g.databaseUrl, dataDir: g.dataDir, clock: systemClock, ids: randomIds(), log, observer: metrics.observer, release: closeDefaultWebhookTransport, config: { ...environmentConfig(), ...(checkoutPageBaseUrl === undefined ? {} : { checkoutPageBaseUrl }) } });
    const faulty = networkFault === undefined ? opened : { ...opened, ctx: { ...opened.ctx, processor: networkWithFault(opened.ctx.processor, networkFault, fault!.act) } };
    const rt = gate === undefined ? faulty : { ...faulty, ctx: { ...faulty.ctx, processor: networkWithGate(faulty.ctx.processor, gate, existsSync, (line) => process.stderr.write(`${line}\n`)) } };
    if (rt.ctx.config.statementUrlSecret === undefined) log.warn('KESSAI_STATEMENT_URL_SECRET is not set: statement_urls and application_urls answer 500 until it is');
    const embedded = rt.store.kind === 'pglite';
    const profile: RateLimitProfile = options.rateLimits ?? (embedded ? 'development' : 'spec');
    // Rate-limit counters in Redis when one is given (PostgreSQL only: the embedded database's
    // one process counts in memory).
    const redisUrl = process.env.KESSAI_REDIS_URL?.trim() || undefined;
    if (redisUrl !== undefined && embedded) log.warn('KESSAI_REDIS_URL is ignored on the embedded database: rate limits are counted in memory');
    let redis: Awaited<ReturnType<typeof openRateLimitRedis>> | undefined;
    try {
      redis = redisUrl !== undefined && !embedded ? await openRateLimitRedis(redisUrl, log) : undefined;
    } catch (error) {
      await rt.close();
      throw error;
    }
    const requestPolicies = serverPolicies({
      ctx: rt.ctx,
      storeKind: rt.store.kind,
      rateLimits: { profile, ...rateLimitOverrides },
      ...(redis === undefined ? {} : { redis }),
      ...(idempotencyFault === undefined ? {} : { idempotency: { fault: { point: idempotencyFault, act: fault!.act } } }),
    });
    const operator = operatorSetup(rt.ctx, rt.store.kind, g.dataDir ?? '.kessai', stop.signal, metrics);
    const app = await buildServer({ ctx: rt.ctx, log, requestPolicies, operate: operator.surfaces, testClockJobs: ALL_JOBS, ...(options.bodyLimit === undefined ? {} : { bodyLimit: options.bodyLimit }), ...(options.requestTimeout === undefined ? {} : { requestTimeoutMs: options.requestTimeout * 1000 }), ...(https ? { https } : {}) });
    try {
      await app.listen({ port: options.port, host: options.host });
    } catch (error) {
      redis?.disconnect();
      await rt.close();
      throw error;
    }
    // On the embedded database this process owns the data, so it also runs the worker: the
    // scheduler, and the poller that sends new events' webhooks within about a second.
    const worker = embedded && options.worker ? { loop: startWorkerLoop(new Scheduler(rt.ctx, ALL_JOBS, { owner: workerName(), ledgerClock: systemClock, stopSignal: stop.signal }), log), poller: startWebhookPoller(rt.ctx, workerName(), log) } : null;
    const address = app.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : options.port;
    const origin = `${tls ? 'https' : 'http'}://${options.host.includes(':') ? `[${options.host}]` : options.host}:${port}`;
    console.log(`kessai v1 API on ${origin}/v1 (${rt.store.kind} ${rt.store.location}${worker ? ', worker in this process' : ''})`);
    const serveFile = operator.started(origin);
    const metricsServer = options.metricsPort === undefined ? undefined : await startMetricsServer({ metrics, ctx: rt.ctx, clock: systemClock, host: options.metricsHost, port: options.metricsPort });
    if (metricsServer) console.log(`metrics on ${metricsServer.url}`);
    if (embedded) console.log(developmentBanner({ origin, dataDir: rt.store.location, profile, refined: process.env.KESSAI_RATE_LIMITS?.trim() ? true : false, worker: worker !== null }));
    const signal = await stop.stopped;
    log.info({ signal }, 'stopping: answering the requests already received, finishing the current batch (a second signal exits at once)');
    serveFile?.remove();
    // Listening stops at once; every request received is answered; the worker finishes its batch.
    await Promise.all([drainServer(app), worker?.loop.stop(), worker?.poller.stop(), metricsServer?.close()]);
    await app.close();
    await redis?.quit();
    await rt.close();
    log.info('server stopped');
  } finally {
    stop.dispose();
  }
}

/**
 * What `kessai serve` prints on the embedded database under its first line: that it is a
 * development server, and what a newcomer needs to point the SDKs and a browser at it.
 */
export function developmentBanner(at: { readonly origin: string; readonly dataDir: string; readonly profile: RateLimitProfile; readonly refined: boolean; readonly worker: boolean }): string {
  const keysFile = join(at.dataDir, 'demo-keys.json');
  const keys = existsSync(keysFile) ? `${keysFile} (README's demo account)` : `shown once by \`kessai accounts create\` (only digests are stored); e.g. \`kessai accounts create --name "Demo Shop" --json > ${keysFile}\``;
  const otherProfile = at.profile === 'development' ? 'spec' : 'development';
  const limits = `${at.profile}${at.profile === 'development' ? ' (1,000 requests/s a zone)' : ' (v1 §8: 2 requests/s a zone in test mode)'}${at.refined ? ', refined by KESSAI_RATE_LIMITS' : ''}; --rate-limits ${otherProfile} or KESSAI_RATE_LIMIT_PROFILE=${otherProfile} to change, KESSAI_RATE_LIMITS to refine`;
  return [
    'Development server on the embedded database (one process owns the data; production runs on PostgreSQL: DATABASE_URL)',
    `  payjp (v1):       Payjp(secretKey, { apibase: '${at.origin}/v1' })`,
    `  @payjp/payjpv2:   createClient({ apiKey: secretKey, baseUrl: '${at.origin}' })`,
    `  checkout pages:   ${at.origin}${CHECKOUT_PAGE_PATH}/<checkout session id> (the session's url)`,
    `  browser script:   <script src="${at.origin}${BROWSER_SCRIPT_PATH}">`,
    `  keys:             ${keys}`,
    `  rate limits:      ${limits}`,
    `  webhooks:         ${at.worker ? 'sent within about a second of each event' : 'not sent (--no-worker)'}; endpoints: kessai webhooks add ACCOUNT --url URL (stop the server first: one process owns the data)`,
    '  stop:             Ctrl-C: the requests already received are answered first; a second Ctrl-C exits at once',
  ].join('\n');
}
