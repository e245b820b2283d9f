/**
 * `checkout_sessions.expire`: open checkout sessions expire 24 hours after creation (service rules
 * §3), each at its own `expires_at`; runs every minute.
 */
import type { JobDefinition } from '../src/engine/job';
import { expireDueCheckoutSessions, nextSessionExpiryDueAt } from '../src/checkout/session-expiry';

export const checkoutSessionExpiryJob: JobDefinition = {
  name: 'checkout_sessions.expire',
  schedule: '* * * * *',
  description: 'expires open checkout sessions 24 hours after creation (checkout.session.expired)',
  run: (ctx, run) => expireDueCheckoutSessions(ctx, run),
  nextDueAt: (ctx, after) => nextSessionExpiryDueAt(ctx.db, after, ctx),
};
