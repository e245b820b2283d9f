/**
 * The checkout-session expiry job's feature code (service rules §3: "a session expires 24 hours
 * after creation (event `checkout.session.expired`)"): every open session whose `expires_at` has
 * come by the slot is expired at its own `expires_at`, account by account in batches
 * (account-batches.ts), each one transaction (lock with FOR UPDATE SKIP LOCKED, one UPDATE per table, one recordEvents; see expireSessions). The status
 * condition of the UPDATE makes a replayed slot or a second worker change nothing twice. A paid
 * session never expires: one whose flow has the money is completed instead; one whose flow is at
 * the network is not taken (its confirmation completes it or leaves it to a later slot).
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema';
import { dueAccounts, earliestDueAt } from '../engine/account-batches';
import { customerInScope, LIVE_BOOK, type JobScope } from '../test-clocks/clock-scope';
import type { Context } from '../engine/context';
import { inAccounts } from '../db/account-scope';
import { runBatches, type JobCounts, type SlotRun } from '../engine/job';
import { expireSessions } from './checkout-sessions';

export type SessionExpiryCounts = { readonly expired: number; readonly batches: number };

export async function expireDueCheckoutSessions(ctx: Context, run: SlotRun): Promise<SessionExpiryCounts & JobCounts> {
  return runBatches(
    ctx,
    run,
    ['expired'],
    (db, cap, among) => dueAccounts(db, 'checkout_sessions', sql`d.status = 'open' AND d.expires_at <= ${run.slot} AND ${customerInScope(ctx, 'd', among)}`, cap, among),
    (trx, accountIds, limit) => expireSessionBatch(trx, ctx, accountIds, run.slot, limit),
  );
}

/** The earliest `expires_at` of an open session strictly after `after`, or null. */
export async function nextSessionExpiryDueAt(db: Kysely<Database>, after: Date, scope: JobScope = LIVE_BOOK): Promise<Date | null> {
  return earliestDueAt(db, 'checkout_sessions', 'expires_at', sql`d.status = 'open' AND ${customerInScope(scope, 'd')}`, after);
}

/** One batch of the accounts' due sessions (every statement names the accounts: see runBatches in job.ts). */
export async function expireSessionBatch(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'testClock'>, accountIds: readonly string[], asOf: Date, limit: number): Promise<{ selected: number; expired: number }> {
  const due = await trx
    .selectFrom('checkout_sessions')
    .selectAll()
    .where(inAccounts('account_id', accountIds))
    .where('status', '=', 'open')
    .where('expires_at', '<=', asOf)
    .where(customerInScope(ctx, 'checkout_sessions', accountIds))
    // A session whose flow is at the network is left to that confirmation (expireSessions): not
    // taken, so a batch never selects only sessions it leaves open again.
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('payment_flows as f')
            .select('f.payment_flow_id')
            .where(inAccounts('f.account_id', accountIds))
            .whereRef('f.account_id', '=', 'checkout_sessions.account_id')
            .whereRef('f.livemode', '=', 'checkout_sessions.livemode')
            .whereRef('f.payment_flow_id', '=', 'checkout_sessions.payment_flow_id')
            .where('f.status', '=', 'processing'),
        ),
      ),
    )
    .orderBy('expires_at')
    .orderBy('account_id')
    .orderBy('livemode')
    .orderBy('checkout_session_id')
    .limit(limit)
    .forUpdate()
    .skipLocked()
    .execute();
  if (due.length === 0) return { selected: 0, expired: 0 };
  const expired = await expireSessions(trx, ctx, due, (row) => row.expires_at);
  return { selected: due.length, expired };
}
