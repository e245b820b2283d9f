/**
 * `kessai webhooks …`: webhook endpoints of an account (v2 §6.2; the spec has no API for them).
 * Options and help only: what each command runs is in webhook-commands.ts, loaded when it runs.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import type { GlobalOptions } from './command-runtime';

const commands = () => import('./webhook-commands');
const globals = (command: Command): GlobalOptions => command.optsWithGlobals() as GlobalOptions;

function eventTypeArg(value: string, previous: string[] = []): string[] {
  if (value.trim() === '') throw new InvalidArgumentError('expected an event type such as charge.succeeded');
  return [...previous, ...value.split(',').map((type) => type.trim()).filter((type) => type !== '')];
}

export function registerWebhooks(program: Command): void {
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
      await (await commands()).addEndpointCommand(accountId, options, globals(command));
    });
  webhooks
    .command('list')
    .description('list the endpoints of an account with their delivery counts')
    .argument('<account>', 'account id')
    .option('--json', 'print JSON')
    .action(async (accountId: string, options: { json?: boolean }, command: Command) => {
      await (await commands()).listEndpointsCommand(accountId, options, globals(command));
    });
  for (const [name, description] of [
    ['disable', 'stop sending to an endpoint (new events skip it; pending deliveries wait)'],
    ['enable', 'send to an endpoint again'],
    ['remove', 'remove an endpoint: nothing more is sent to it (its delivery history stays)'],
  ] as const) {
    webhooks
      .command(name)
      .description(description)
      .argument('<account>', 'account id')
      .argument('<endpoint>', 'endpoint id (we_…)')
      .action(async (accountId: string, endpointId: string, _options, command: Command) => {
        await (await commands()).changeEndpointCommand(name, accountId, endpointId, globals(command));
      });
  }
  webhooks
    .command('rotate-token')
    .description('give an endpoint a new token and print it (shown once); the old one is no longer sent')
    .argument('<account>', 'account id')
    .argument('<endpoint>', 'endpoint id (we_…)')
    .action(async (accountId: string, endpointId: string, _options, command: Command) => {
      await (await commands()).rotateTokenCommand(accountId, endpointId, globals(command));
    });
  webhooks
    .command('test')
    .description('send a test event (type webhook.test) to one endpoint now and print the answer')
    .argument('<account>', 'account id')
    .argument('<endpoint>', 'endpoint id (we_…)')
    .action(async (accountId: string, endpointId: string, _options, command: Command) => {
      await (await commands()).testEndpointCommand(accountId, endpointId, globals(command));
    });
}
