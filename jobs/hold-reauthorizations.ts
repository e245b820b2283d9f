/**
 * `charges.reauthorize`: scheduled reauthorization of v1 holds (service rules §2 Decision), on
 * accounts that opted in: credit-card holds lapsing within the account's lead time get a new hold
 * at `expired_at − lead`, up to the account's count, each attempt recorded with its outcome.
 * Runs before `charges.expire_holds`, so a hold reauthorized in a slot is not released in it.
 */
import type { JobDefinition } from '../src/engine/job';
import { nextReauthDueAt, reauthorizeHolds } from '../src/charges/hold-jobs';

export const holdReauthorizationsJob: JobDefinition = {
  name: 'charges.reauthorize',
  schedule: '* * * * *',
  description: 'reauthorizes credit-card holds of opted-in accounts before they lapse (never debit cards), recording every attempt',
  run: (ctx, run) => reauthorizeHolds(ctx, run),
  nextDueAt: (ctx, after) => nextReauthDueAt(ctx.db, after, ctx),
};
