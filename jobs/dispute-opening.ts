/**
 * `disputes.open`: captured charges of the simulated network's dispute cards are disputed a set
 * number of days after their capture (src/processor/test-cards.ts); this job opens each dispute at
 * its own instant, once per charge, with `dispute.created` (src/disputes/disputes.ts). Every
 * minute; a late slot dates each dispute at its own instant, never at the slot. Idle (nextDueAt
 * null) while no dispute is pending.
 */
import type { JobDefinition } from '../src/engine/job';
import { nextDisputeDueAt, openDueDisputes } from '../src/disputes/disputes';

export const disputeOpeningJob: JobDefinition = {
  name: 'disputes.open',
  schedule: '* * * * *',
  description: 'opens the disputes of captured charges whose card is disputed, once per charge, dated at their own instant',
  run: (ctx, run) => openDueDisputes(ctx, run),
  nextDueAt: (ctx, after) => nextDisputeDueAt(ctx.db, after, ctx),
};
