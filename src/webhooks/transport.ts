/**
 * How a webhook request leaves the process. The worker sends over HTTP (undici: a keep-alive pool
 * per endpoint, a hard timeout, no redirects, the response body read up to a cap and dropped); the
 * simulation never touches the network and answers from the scenario's endpoint behaviours.
 */
import { performance } from 'node:perf_hooks';
import { Pool, errors } from 'undici';
import type { WebhookTransport } from '../engine/context';

export const WEBHOOK_TIMEOUT_MS = 10_000;

export interface HttpTransportOptions {
  /** A 2xx status must come within this (v2 §6.2: 10 s); tests set less. */
  readonly timeoutMs?: number;
  /** Keep-alive connections per endpoint (default 16). */
  readonly connectionsPerEndpoint?: number;
  /** Response bytes read at most; the rest is dropped with the connection (default 64 KiB). */
  readonly maxResponseBytes?: number;
}

/** The worker's transport: POST over undici, one keep-alive pool per endpoint. */
export function httpWebhookTransport(options: HttpTransportOptions = {}): WebhookTransport {
  const timeoutMs = options.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  const connections = options.connectionsPerEndpoint ?? 16;
  const maxResponseBytes = options.maxResponseBytes ?? 64 * 1024;
  const pools = new Map<string, Pool>();
  const poolFor = (endpointId: string, origin: string): Pool => {
    const key = `${endpointId} ${origin}`;
    let pool = pools.get(key);
    if (!pool) {
      // No redirect interceptor: a 3xx is an answer like any other non-2xx (a failure).
      pool = new Pool(origin, { connections, pipelining: 1, keepAliveTimeout: 30_000, connectTimeout: timeoutMs, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
      pools.set(key, pool);
    }
    return pool;
  };
  return {
    failuresAreSlow: true,
    async send(request) {
      const url = new URL(request.url);
      const started = performance.now();
      const signal = AbortSignal.timeout(timeoutMs);
      const elapsed = () => Math.round(performance.now() - started);
      try {
        const response = await poolFor(request.endpointId, url.origin).request({
          path: `${url.pathname}${url.search}`,
          method: 'POST',
          headers: { 'content-type': 'application/json; charset=utf-8', 'x-service-webhook-token': request.token },
          body: request.body,
          signal,
        });
        // Read at most the cap (the rest is discarded with the connection), never past the timeout.
        await response.body.dump({ limit: maxResponseBytes, signal }).catch(() => undefined);
        const ok = response.statusCode >= 200 && response.statusCode < 300;
        return { ok, status: response.statusCode, error: null, durationMs: elapsed() };
      } catch (error) {
        const timedOut =
          signal.aborted || error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError || error instanceof errors.ConnectTimeoutError;
        const code = (error as { code?: unknown }).code;
        return { ok: false, status: null, error: timedOut ? 'timeout' : typeof code === 'string' ? code : (error as Error).message, durationMs: elapsed() };
      }
    },
    async close() {
      const all = [...pools.values()];
      pools.clear();
      await Promise.all(all.map((pool) => pool.destroy()));
    },
  };
}

/** What a simulated endpoint does: answer 2xx, fail every attempt, fail the first N, or time out. */
export type SimulatedBehaviour = { readonly fail: 'never' } | { readonly fail: 'always' } | { readonly fail: 'first'; readonly attempts: number } | { readonly fail: 'timeout' };

/**
 * The simulation's transport: nothing leaves the process. An endpoint answers 200 unless its
 * behaviour says otherwise (500 for a failure, no answer for a timeout); durations are 0.
 */
export function simulatedWebhookTransport(behaviours: ReadonlyMap<string, SimulatedBehaviour> = new Map()): WebhookTransport {
  return {
    failuresAreSlow: false,
    send(request) {
      const behaviour = behaviours.get(request.endpointId) ?? { fail: 'never' };
      const fails = behaviour.fail === 'always' || behaviour.fail === 'timeout' || (behaviour.fail === 'first' && request.attempt <= behaviour.attempts);
      if (!fails) return Promise.resolve({ ok: true, status: 200, error: null, durationMs: 0 });
      if (behaviour.fail === 'timeout') return Promise.resolve({ ok: false, status: null, error: 'timeout', durationMs: WEBHOOK_TIMEOUT_MS });
      return Promise.resolve({ ok: false, status: 500, error: null, durationMs: 0 });
    },
    close: () => Promise.resolve(),
  };
}
