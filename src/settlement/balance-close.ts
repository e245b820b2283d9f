/**
 * The balance close (service rules §4: "A balance is `closed` when its payout (or claim) is settled
 * on `due_date`"): every fixed balance (`transfer` or `claim`) whose due date has come as of the
 * slot is closed at 00:00 JST of its due date, with `balance.closed`. Batches of balances, each one
 * transaction with one UPDATE and one event insert; every instant written is the balance's own due
 * instant.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema';
import type { Context } from '../engine/context';
import { inAccounts } from '../db/account-scope';
import { dueAccounts, earliestDueAt } from '../engine/account-batches';
import { runBatches, type JobCounts, type SlotRun } from '../engine/job';
import { inBothApis } from './v2-settlement-objects';
import { recordEvents } from '../events/outbox';
import { balanceObjects, type BalanceRow } from './statements';
import { ROW_KEYS } from '../db/bulk-rows';
import { ownClockInScope } from '../test-clocks/clock-scope';

export type BalanceCloseCounts = { readonly balances_closed: number; readonly batches: number };

export async function closeDueBalances(ctx: Context, run: SlotRun): Promise<BalanceCloseCounts & JobCounts> {
  return runBatches(
    ctx,
    run,
    ['balances_closed'],
    (db, cap, among) => dueAccounts(db, 'balances', sql`NOT d.closed AND d.due_at IS NOT NULL AND d.due_at <= ${run.slot} AND ${ownClockInScope(ctx, 'd')}`, cap, among),
    async (trx, accountIds, limit) => {
      const closed = await closeBalanceBatch(trx, ctx, accountIds, run.slot, limit);
      return { selected: closed, balances_closed: closed };
    },
  );
}

/** The earliest due instant of a fixed balance of the run's books strictly after `after`, or null. */
export async function nextBalanceCloseDueAt(ctx: Pick<Context, 'db' | 'testClock'>, after: Date): Promise<Date | null> {
  return earliestDueAt(ctx.db, 'balances', 'due_at', sql`NOT d.closed AND d.due_at IS NOT NULL AND ${ownClockInScope(ctx, 'd')}`, after);
}

/** One batch of the accounts' due balances of the run's books (clock-scope.ts); returns how many it closed (0: none left). */
export async function closeBalanceBatch(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'testClock'>, accountIds: readonly string[], asOf: Date, limit: number): Promise<number> {
  const due = await sql<BalanceRow>`
    SELECT b.* FROM balances b
    WHERE ${inAccounts('b.account_id', accountIds)} AND NOT b.closed AND b.due_at IS NOT NULL AND b.due_at <= ${asOf} AND ${ownClockInScope(ctx, 'b')}
    ORDER BY b.due_at, b.account_id, b.livemode, b.balance_id
    LIMIT ${limit}
    FOR UPDATE SKIP LOCKED`.execute(trx);
  if (due.rows.length === 0) return 0;
  const closed = due.rows.map((b) => ({ ...b, closed: true, closed_date: b.due_date, updated_at: b.due_at! }));
  const x = ROW_KEYS.table('x', closed.map((b) => ({ accountId: b.account_id, livemode: b.livemode, id: b.balance_id })));
  await sql`
    UPDATE balances b SET closed = true, closed_date = b.due_date, updated_at = b.due_at
    FROM ${x.from}
    WHERE ${inAccounts('b.account_id', accountIds)} AND b.account_id = ${x.col('a')} AND b.livemode = ${x.col('l')} AND b.balance_id = ${x.col('id')}`.execute(trx);
  const objects = await balanceObjects(trx, closed);
  await recordEvents(
    trx,
    ctx.ids,
    inBothApis(closed.map((b, i) => ({ accountId: b.account_id, livemode: b.livemode, type: 'balance.closed', data: objects[i]!, at: b.due_at! }))),
  );
  return closed.length;
}
