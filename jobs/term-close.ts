/**
 * `terms.close`: the nightly statement generation (service rules §4). Terms end at 00:00 JST (the
 * 1st, and the 16th for semi-monthly accounts), so the job runs daily at 00:00 JST and closes every
 * term whose end has passed as of its slot, each at its own end instant.
 */
import type { JobDefinition } from '../src/engine/job';
import { closeDueTerms, nextTermCloseDueAt } from '../src/settlement/term-close';

export const termCloseJob: JobDefinition = {
  name: 'terms.close',
  schedule: '0 0 * * *',
  description: 'closes ended settlement terms, opens the next, writes statements and decides balances',
  run: (ctx, run) => closeDueTerms(ctx, run),
  nextDueAt: (ctx, after) => nextTermCloseDueAt(ctx, after),
  waitsForEarlierJobs: true,
};
