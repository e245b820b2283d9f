/**
 * `charges.expire_holds`: uncaptured v1 holds past their `expired_at` are released through the
 * card network and marked released at their own `expired_at` (service rules §2), with a
 * `charge.updated` event at that instant. Every minute; a late slot dates each release at the
 * hold's own expiry, never at the slot. First it undoes the lapsed create intents of charges whose
 * process died at the card network (src/charges/create-intents.ts): this job runs wherever jobs
 * run (the worker, and `kessai serve` on the embedded database).
 */
import type { JobDefinition } from '../src/engine/job';
import { expireHolds, nextHoldExpiryDueAt } from '../src/charges/hold-jobs';

export const holdExpiryJob: JobDefinition = {
  name: 'charges.expire_holds',
  schedule: '* * * * *',
  description: 'releases uncaptured holds past expired_at through the card network, once, dated at their own expiry; first undoes charges.create intents left by a crash',
  run: (ctx, run) => expireHolds(ctx, run),
  nextDueAt: (ctx, after) => nextHoldExpiryDueAt(ctx.db, after, ctx),
};
