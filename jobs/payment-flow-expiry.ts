/**
 * `payment_flows.expire_holds`: v2 payment flows whose hold has lapsed are released and canceled
 * with reason `expired` (service rules §3, §2.1). Hold periods end at any second, so the job runs
 * every minute and each slot takes everything due as of its instant; each flow ends at its own
 * `capture_before`, never at the slot.
 */
import type { JobDefinition } from '../src/engine/job';
import { expireDuePaymentFlows, nextFlowExpiryDueAt } from '../src/payment-flows/hold-expiry';

export const paymentFlowExpiryJob: JobDefinition = {
  name: 'payment_flows.expire_holds',
  schedule: '* * * * *',
  description: 'releases lapsed v2 holds: flows in requires_capture past capture_before are canceled (reason expired)',
  run: (ctx, run) => expireDuePaymentFlows(ctx, run),
  nextDueAt: (ctx, after) => nextFlowExpiryDueAt(ctx.db, after, ctx),
};
