/**
 * Which rows a run of the jobs works on. An object is on a test clock exactly when its customer is
 * (customers.test_clock_id): subscriptions, charges, payment flows and checkout sessions of a
 * clock's customer live on the clock's time; a webhook delivery carries the clock of its event's
 * customer (src/events/outbox.ts). The live worker (`ctx.testClock` absent) takes every row not on
 * a clock; a clock's advance takes that clock's rows only. Every job's due query and batch query
 * names the scope, so one rule decides both sides.
 */
import { sql, type RawBuilder, type SqlBool } from 'kysely';
import { inAccounts } from '../db/account-scope';
import type { Context } from '../engine/context';

export type JobScope = Pick<Context, 'testClock'>;

/** The live book: every object not on a test clock (the worker's scope). */
export const LIVE_BOOK: JobScope = {};

/**
 * The rows `alias` (a table with account_id, livemode and customer_id) in the run's scope. Live
 * mode rows are never on a clock; a test-mode row's customer is probed in the partial index
 * customers_on_test_clock, empty for a book without clocks. `accountIds`: the batch's accounts,
 * named on the probed table too in a locking statement (account-scope.ts).
 */
export function customerInScope(scope: JobScope, alias: string, accountIds?: readonly string[]): RawBuilder<SqlBool> {
  const row = (column: string) => sql.ref(`${alias}.${column}`);
  const accounts = accountIds === undefined ? sql`TRUE` : inAccounts('tc.account_id', accountIds);
  const onClock = (clock: RawBuilder<SqlBool>) => sql<SqlBool>`EXISTS (
    SELECT 1 FROM customers tc WHERE ${accounts} AND tc.account_id = ${row('account_id')} AND tc.livemode = ${row('livemode')}
      AND tc.customer_id = ${row('customer_id')} AND tc.test_clock_id IS NOT NULL AND ${clock})`;
  const clock = scope.testClock;
  if (clock === undefined) return sql<SqlBool>`(${row('livemode')} OR ${row('customer_id')} IS NULL OR NOT ${onClock(sql`TRUE`)})`;
  return sql<SqlBool>`(${row('account_id')} = ${clock.accountId} AND NOT ${row('livemode')} AND ${onClock(sql<SqlBool>`tc.test_clock_id = ${clock.testClockId}`)})`;
}

/**
 * The rows `alias` that carry their own test_clock_id column, in the run's scope: webhook
 * deliveries, and a book's terms and balances (null: the account's own books, which the live
 * worker closes; a clock's, which its advance closes at the clock's instants).
 */
export function ownClockInScope(scope: JobScope, alias: string): RawBuilder<SqlBool> {
  const clock = scope.testClock;
  const column = sql.ref(`${alias}.test_clock_id`);
  if (clock === undefined) return sql<SqlBool>`${column} IS NULL`;
  return sql<SqlBool>`(${sql.ref(`${alias}.account_id`)} = ${clock.accountId} AND ${column} = ${clock.testClockId})`;
}

/** The book what a run (or a request on a clock's objects) settles into: its clock, or null for the account's own. */
export function bookOf(scope: JobScope): string | null {
  return scope.testClock?.testClockId ?? null;
}
