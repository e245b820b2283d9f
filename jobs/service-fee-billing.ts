/**
 * `service_fees.bill`: bills each merchant account's paid plan of the service for the month
 * (v1 §2.6 `service_fee`, subjects `proplan` / `plan_fee`) at 00:00 JST on the 1st, at the fee in
 * force at that instant, into the term open then. A late slot bills every month it missed, each at
 * its own start.
 */
import type { JobDefinition } from '../src/engine/job';
import { billServiceFees, nextServiceFeeDueAt } from '../src/settlement/service-fees';

export const serviceFeeBillingJob: JobDefinition = {
  name: 'service_fees.bill',
  schedule: '0 0 1 * *',
  description: "bills merchant accounts' paid plans of the service for the month, into the open term",
  bookWide: true,
  run: (ctx, run) => billServiceFees(ctx, run),
  nextDueAt: (ctx, after) => nextServiceFeeDueAt(ctx.db, after),
};
