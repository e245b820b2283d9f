/**
 * The checkout-session expiry job's feature code (service rules §3: "a session expires 24 hours
 * after creation (event `checkout.session.expired`)"): every open session whose `expires_at` has
 * come by the slot is expired at its own `expires_at`, account by account in batches
 * (account-batches.ts), each one transaction (lock with FOR UPDATE SKIP LOCKED, one UPDATE per table, one recordEvents; see expireSessions). The status
 * condition of the UPDATE makes a replayed slot or a second worker change nothing twice.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema';
import { dueAccounts } from '../engine/account-batches';
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
    (db, cap) => dueAccounts(db, 'checkout_sessions', sql`d.status = 'open' AND d.expires_at <= ${run.slot}`, cap),
    (trx, accountIds, limit) => expireSessionBatch(trx, ctx, accountIds, run.slot, limit),
  );
}

/** The earliest `expires_at` of an open session strictly after `after`, or null. */
export async function nextSessionExpiryDueAt(db: Kysely<Database>, after: Date): Promise<Date | null> {
  const row = await db
    .selectFrom('checkout_sessions')
    .select(({ fn }) => fn.min('expires_at').as('due'))
    .where('status', '=', 'open')
    .where('expires_at', '>', after)
    .executeTakeFirst();
  return row?.due ?? null;
}

/** One batch of the accounts' due sessions (every statement names the accounts: see runBatches in job.ts). */
export async function expireSessionBatch(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, accountIds: readonly string[], asOf: Date, limit: number): Promise<{ selected: number; expired: number }> {
  const due = await trx
    .selectFrom('checkout_sessions')
    .selectAll()
    .where(inAccounts('account_id', accountIds))
    .where('status', '=', 'open')
    .where('expires_at', '<=', asOf)
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
