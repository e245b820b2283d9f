/**
 * `charges.expire_three_d_secure`: a v1 charge left pending 3-D Secure past its 30-minute window
 * (service rules §2) is abandoned — `failure_code` `three_d_secure_expired`, `charge.failed` at the
 * window's end — and must be created again.
 */
import type { JobDefinition } from '../src/engine/job';
import { abandonThreeDSecure, nextThreeDSecureTimeoutAt } from '../src/charges/hold-jobs';

export const threeDSecureTimeoutsJob: JobDefinition = {
  name: 'charges.expire_three_d_secure',
  schedule: '* * * * *',
  description: 'abandons v1 charges left pending 3-D Secure past their 30-minute window',
  run: (ctx, run) => abandonThreeDSecure(ctx, run),
  nextDueAt: (ctx, after) => nextThreeDSecureTimeoutAt(ctx.db, after, ctx),
};
