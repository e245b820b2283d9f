/**
 * `balances.close`: closes fixed balances (transfer or claim) on their due date, 00:00 JST
 * (service rules §4), at the due instant of each.
 */
import type { JobDefinition } from '../src/engine/job';
import { closeDueBalances, nextBalanceCloseDueAt } from '../src/settlement/balance-close';

export const balanceCloseJob: JobDefinition = {
  name: 'balances.close',
  schedule: '0 0 * * *',
  description: 'closes transfer and claim balances on their due date',
  run: (ctx, run) => closeDueBalances(ctx, run),
  nextDueAt: (ctx, after) => nextBalanceCloseDueAt(ctx, after),
  waitsForEarlierJobs: true,
};
