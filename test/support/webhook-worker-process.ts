/**
 * A webhook delivery worker in its own process (SIGKILL and two-worker tests): one delivery pass
 * against DATABASE_URL at a fixed instant, printing a line per recorded flush and a final JSON
 * line with its counts.
 *
 * Env: DATABASE_URL, KESSAI_AT (ISO instant), KESSAI_OWNER, KESSAI_LEASE_MS, KESSAI_CONCURRENCY.
 */
import { deliverDueWebhooks } from '../../src/webhooks/delivery';
import { httpWebhookTransport } from '../../src/webhooks/transport';
import { workerContext } from './env';

const transport = httpWebhookTransport({ timeoutMs: 5_000 });
const { owner, store, ctx } = await workerContext({ webhookTransport: transport });
const concurrency = Number(process.env.KESSAI_CONCURRENCY ?? 8);
const counts = await deliverDueWebhooks(ctx, {
  owner,
  concurrency,
  perEndpoint: concurrency,
  claimSize: 20,
  onRecorded: (recorded) => process.stdout.write(`recorded ${recorded.length}\n`),
});
process.stdout.write(`${JSON.stringify({ owner, counts })}\n`);
await transport.close();
await store.close();
