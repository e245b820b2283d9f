/**
 * `kessai webhooks …`: webhook endpoints of an account (v2 §6.2; the spec has no API for them),
 * and the worker's delivery poller. A composition root like main.ts.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import type { Context } from '../engine/context';
import type { Logger } from '../engine/logger';
import { deliverDueWebhooks, sendTestEvent } from '../webhooks/delivery';
import { addEndpoint, listEndpoints, removeEndpoint, rotateEndpointToken, setEndpointEnabled, type WebhookEndpoint } from '../webhooks/endpoints';

type Runtime = { ctx: Context; close(): Promise<void> };
type OpenRuntime = (command: Command) => Promise<Runtime>;

function eventTypeArg(value: string, previous: string[] = []): string[] {
  if (value.trim() === '') throw new InvalidArgumentError('expected an event type such as charge.succeeded');
  return [...previous, ...value.split(',').map((type) => type.trim()).filter((type) => type !== '')];
}

function describe(endpoint: WebhookEndpoint): string {
  const types = endpoint.eventTypes ? endpoint.eventTypes.join(',') : 'all events';
  return `${endpoint.id}\t${endpoint.livemode ? 'live' : 'test'}\t${endpoint.status}\t${endpoint.url}\t${endpoint.apiVersion ?? 'v1+v2'}\t${types}`;
}

async function withRuntime(open: OpenRuntime, command: Command, action: (ctx: Context) => Promise<void>): Promise<void> {
  const rt = await open(command);
  try {
    await action(rt.ctx);
  } finally {
    await rt.close();
  }
}

export function registerWebhooks(program: Command, open: OpenRuntime): void {
  const webhooks = program.command('webhooks').description('webhook endpoints of an account: where its events are POSTed (v2 §6.2)');
  webhooks
    .command('add')
    .description('add an endpoint and print its token (shown once; receivers compare it with X-Service-Webhook-Token)')
    .argument('<account>', 'account id')
    .requiredOption('--url <url>', 'http:// or https:// URL the events are POSTed to')
    .option('--live', 'live-mode events (default: test mode)', false)
    .addOption(new Option('--api-version <version>', 'only events of this API version (default: both, each in its own)').choices(['v1', 'v2']))
    .option('--event-type <type>', 'only these event types (repeatable or comma-separated; default: all)', eventTypeArg)
    .option('--json', 'print the endpoint and token as JSON')
    .action(async (accountId: string, options: { url: string; live: boolean; apiVersion?: 'v1' | 'v2'; eventType?: string[]; json?: boolean }, command: Command) => {
      await withRuntime(open, command, async (ctx) => {
        const { endpoint, token } = await addEndpoint(ctx, { accountId, url: options.url, livemode: options.live, apiVersion: options.apiVersion ?? null, eventTypes: options.eventType ?? null });
        if (options.json) {
          console.log(JSON.stringify({ endpoint, token }, null, 2));
          return;
        }
        console.log(describe(endpoint));
        console.log(`token: ${token}`);
        console.log('Keep the token now: it is not shown again (rotate-token makes a new one).');
      });
    });
  webhooks
    .command('list')
    .description('list the endpoints of an account with their delivery counts')
    .argument('<account>', 'account id')
    .option('--json', 'print JSON')
    .action(async (accountId: string, options: { json?: boolean }, command: Command) => {
      await withRuntime(open, command, async (ctx) => {
        const endpoints = await listEndpoints(ctx.db, accountId);
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
    });
  for (const [name, description, change] of [
    ['disable', 'stop sending to an endpoint (new events skip it; pending deliveries wait)', (ctx: Context, a: string, e: string) => setEndpointEnabled(ctx, a, e, false)],
    ['enable', 'send to an endpoint again', (ctx: Context, a: string, e: string) => setEndpointEnabled(ctx, a, e, true)],
    ['remove', 'remove an endpoint: nothing more is sent to it (its delivery history stays)', (ctx: Context, a: string, e: string) => removeEndpoint(ctx, a, e)],
  ] as const) {
    webhooks
      .command(name)
      .description(description)
      .argument('<account>', 'account id')
      .argument('<endpoint>', 'endpoint id (we_…)')
      .action(async (accountId: string, endpointId: string, _options, command: Command) => {
        await withRuntime(open, command, async (ctx) => {
          const endpoint = await change(ctx, accountId, endpointId);
          console.log(name === 'remove' ? `${endpoint.id} removed` : describe(endpoint));
        });
      });
  }
  webhooks
    .command('rotate-token')
    .description('give an endpoint a new token and print it (shown once); the old one is no longer sent')
    .argument('<account>', 'account id')
    .argument('<endpoint>', 'endpoint id (we_…)')
    .action(async (accountId: string, endpointId: string, _options, command: Command) => {
      await withRuntime(open, command, async (ctx) => {
        const { endpoint, token } = await rotateEndpointToken(ctx, accountId, endpointId);
        console.log(describe(endpoint));
        console.log(`token: ${token}`);
      });
    });
  webhooks
    .command('test')
    .description('send a test event (type webhook.test) to one endpoint now and print the answer')
    .argument('<account>', 'account id')
    .argument('<endpoint>', 'endpoint id (we_…)')
    .action(async (accountId: string, endpointId: string, _options, command: Command) => {
      await withRuntime(open, command, async (ctx) => {
        const { event, result } = await sendTestEvent(ctx, accountId, endpointId);
        const answer = result.status === null ? result.error : `HTTP ${result.status}`;
        console.log(`${String(event.id)} → ${endpointId}: ${answer} in ${result.durationMs} ms (${result.ok ? 'delivered' : 'failed'})`);
        if (!result.ok) process.exitCode = 1;
      });
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
