/**
 * `kessai webhooks …`: what they run, loaded only when one of them runs (options and help are in
 * webhooks.ts), and the running worker's delivery poller.
 */
import type { Context } from '../engine/context';
import type { Logger } from '../engine/logger';
import type { Operator } from '../api/admin/operator';
import { deliverDueWebhooks } from '../webhooks/delivery';
import type { WebhookEndpoint } from '../webhooks/endpoints';
import { logger, type GlobalOptions } from './command-runtime';
import { withOperator } from './operator-access';

function describe(endpoint: WebhookEndpoint): string {
  const types = endpoint.eventTypes ? endpoint.eventTypes.join(',') : 'all events';
  return `${endpoint.id}\t${endpoint.livemode ? 'live' : 'test'}\t${endpoint.status}\t${endpoint.url}\t${endpoint.apiVersion ?? 'v1+v2'}\t${types}`;
}

/** The operator's actions: through a running serve's operator API when it holds the embedded database, else on the database (operator-access.ts). */
function withRuntime(g: GlobalOptions, action: (operator: Operator) => Promise<void>): Promise<void> {
  return withOperator({ databaseUrl: g.databaseUrl, dataDir: g.dataDir, log: logger(g) }, action);
}

export interface AddEndpointOptions {
  readonly url: string;
  readonly live: boolean;
  readonly apiVersion?: 'v1' | 'v2';
  readonly eventType?: string[];
  readonly json?: boolean;
}

export async function addEndpointCommand(accountId: string, options: AddEndpointOptions, g: GlobalOptions): Promise<void> {
  await withRuntime(g, async (operator) => {
    const { endpoint, token } = await operator.webhooks.add({ accountId, url: options.url, livemode: options.live, apiVersion: options.apiVersion ?? null, eventTypes: options.eventType ?? null });
    if (options.json) {
      console.log(JSON.stringify({ endpoint, token }, null, 2));
      return;
    }
    console.log(describe(endpoint));
    console.log(`token: ${token}`);
    console.log('Keep the token now: it is not shown again (rotate-token makes a new one).');
  });
}

export async function listEndpointsCommand(accountId: string, options: { json?: boolean }, g: GlobalOptions): Promise<void> {
  await withRuntime(g, async (operator) => {
    const endpoints = await operator.webhooks.list(accountId);
    if (options.json) {
      console.log(JSON.stringify(endpoints, null, 2));
      return;
    }
    if (endpoints.length === 0) console.log(`no webhook endpoints for ${accountId}: kessai webhooks add ${accountId} --url <url>`);
    for (const endpoint of endpoints) {
      const c = endpoint.counts;
      console.log(`${describe(endpoint)}\tdelivered ${c.delivered}, failing ${c.failing}, waiting ${c.waiting}, given up ${c.givenUp}`);
    }
  });
}

export type EndpointChange = 'disable' | 'enable' | 'remove';

export async function changeEndpointCommand(change: EndpointChange, accountId: string, endpointId: string, g: GlobalOptions): Promise<void> {
  await withRuntime(g, async (operator) => {
    const endpoint = change === 'remove' ? await operator.webhooks.remove(accountId, endpointId) : await operator.webhooks.setEnabled(accountId, endpointId, change === 'enable');
    console.log(change === 'remove' ? `${endpoint.id} removed` : describe(endpoint));
  });
}

export async function rotateTokenCommand(accountId: string, endpointId: string, g: GlobalOptions): Promise<void> {
  await withRuntime(g, async (operator) => {
    const { endpoint, token } = await operator.webhooks.rotateToken(accountId, endpointId);
    console.log(describe(endpoint));
    console.log(`token: ${token}`);
  });
}

export async function testEndpointCommand(accountId: string, endpointId: string, g: GlobalOptions): Promise<void> {
  await withRuntime(g, async (operator) => {
    const result = await operator.webhooks.test(accountId, endpointId);
    const answer = result.status === null ? result.error : `HTTP ${result.status}`;
    console.log(`${result.eventId} → ${endpointId}: ${answer} in ${result.durationMs} ms (${result.ok ? 'delivered' : 'failed'})`);
    if (!result.ok) process.exitCode = 1;
  });
}

/**
 * The running worker's webhook poller: a delivery pass as soon as deliveries are due (checked
 * every `everyMs`), besides the per-minute `webhooks.deliver` slot, so events go out within about
 * a second. Passes claim under leases, so the poller, the job and other workers never send the
 * same attempt twice.
 */
export function startWebhookPoller(ctx: Context, owner: string, log: Logger, everyMs = 1_000): { stop(): Promise<void> } {
  const abort = new AbortController();
  let running: Promise<unknown> | null = null;
  const timer = setInterval(() => {
    if (running || abort.signal.aborted) return;
    running = deliverDueWebhooks(ctx, { owner: `${owner}/poller`, signal: abort.signal })
      .catch((error: unknown) => log.error({ err: error }, 'webhook delivery pass failed; the next one tries again'))
      .finally(() => {
        running = null;
      });
  }, everyMs);
  return {
    async stop() {
      clearInterval(timer);
      abort.abort();
      if (running) await running;
    },
  };
}
