/**
 * `subscriptions.renew`: renews, ends trials of and deletes subscriptions at their due instant
 * (service rules §1.5, §1.3). Renewals fall at anniversaries to the second, so the job runs every
 * minute and each slot takes everything due as of its instant; a late slot uses each
 * subscription's own due instant, never the slot's.
 */
import type { JobDefinition } from '../src/engine/job';
import { nextRenewalDueAt, renewDueSubscriptions } from '../src/subscriptions/renewals';

export const subscriptionRenewalsJob: JobDefinition = {
  name: 'subscriptions.renew',
  schedule: '* * * * *',
  description: 'charges subscriptions at period end and trial end, pauses those whose charge fails, deletes canceled ones at period end',
  run: (ctx, run) => renewDueSubscriptions(ctx, run),
  nextDueAt: (ctx, after) => nextRenewalDueAt(ctx.db, after, ctx),
};
