/**
 * `webhooks.deliver`: sends every due webhook delivery (v2 §6.2): claims them in batches under a
 * lease, sends outside any transaction through a bounded pool, records outcomes set-based; retries
 * 3 minutes after a failure, 4 attempts at most. Every minute, last in the slot (after every job
 * that writes events); the running worker also runs a pass as soon as new deliveries are due.
 * Each flush of recorded attempts is one of the slot's batches (progress, counts in the ledger).
 */
import { checkpoint, type JobDefinition } from '../src/engine/job';
import { deliverDueWebhooks, nextWebhookDueAt } from '../src/webhooks/delivery';

export const webhookDeliveryJob: JobDefinition = {
  name: 'webhooks.deliver',
  schedule: '* * * * *',
  description: 'delivers due webhooks (event × endpoint), at least once; retries at +3, +6, +9 minutes, then gives up',
  run: async (ctx, run) => {
    const counts = await deliverDueWebhooks(ctx, { owner: `webhooks.deliver@${run.slot.toISOString()}#${run.attempt}`, signal: run.signal, run });
    // A pass stopped by the signal returns what it recorded; the run then stops as every job does
    // between batches (handed back at shutdown, or lost to another worker).
    checkpoint(run);
    return { ...counts };
  },
  nextDueAt: (ctx) => nextWebhookDueAt(ctx.db, ctx),
};
