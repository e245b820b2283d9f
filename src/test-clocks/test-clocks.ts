/**
 * Test clocks: a test-mode account's own time for the customers attached to it and everything that
 * hangs off them (clock-scope.ts says which rows). A clock is created frozen at an instant; every
 * request on its objects sees that instant as now (requestOnClock); an advance (advance.ts) runs
 * the worker's jobs for its objects up to a later instant and freezes it there.
 */
import { sql, type Kysely, type Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database, TestClocksTable } from '../db/schema';
import { KessaiError, reject } from '../domain/errors';
import { MAX_TEXT_LENGTH } from '../domain/limits';
import { toUnixSeconds } from '../domain/time';
import { FixedClock } from '../engine/clock';
import type { Context } from '../engine/context';

/**
 * The furthest one advance may move a clock: two years past its frozen instant. A longer run is a
 * few advances in a row (each answers `ready` before the next); the bound keeps one advance's
 * work — and the time its lease is held — within what a test suite waits for.
 */
export const ADVANCE_HORIZON_MS = 2 * 366 * 24 * 3600_000;

/** The earliest and latest instants a clock may be frozen at (as the service's other instants). */
const EARLIEST = Date.UTC(2000, 0, 1);
const LATEST = Date.UTC(2100, 0, 1);

export type TestClockRow = Selectable<TestClocksTable>;

/** The API's test clock object (UNIX seconds, as v1's objects). */
export interface TestClockObject {
  readonly id: string;
  readonly object: 'test_clock';
  readonly livemode: false;
  readonly name: string | null;
  readonly frozen_time: number;
  readonly status: 'ready' | 'advancing';
  /** While advancing: the instant the clock is being moved to. */
  readonly advancing_to: number | null;
  readonly created: number;
}

export function renderTestClock(row: TestClockRow): TestClockObject {
  return {
    id: row.test_clock_id,
    object: 'test_clock',
    livemode: false,
    name: row.name,
    frozen_time: toUnixSeconds(row.frozen_time),
    status: row.status,
    advancing_to: row.advancing_to === null ? null : toUnixSeconds(row.advancing_to),
    created: toUnixSeconds(row.created_at),
  };
}

/** Test clocks are a test-mode account's, reached with its secret key. */
export function checkClockCaller(caller: Caller): void {
  if (caller.livemode || caller.kind !== 'secret') reject('invalid_api_key', undefined, 'Test clocks exist in test mode only: use a test-mode secret key (sk_test_…).');
}

/** An instant given as UNIX seconds (number or digits), within the years a clock may show. */
export function instantParam(value: unknown, param: string): Date {
  const seconds = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,12}$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(seconds) || seconds * 1000 < EARLIEST || seconds * 1000 >= LATEST) {
    reject('invalid_timestamp', param, `${param} must be a UNIX timestamp in seconds between 2000 and 2100`);
  }
  return new Date(seconds * 1000);
}

export interface CreateTestClockCommand {
  readonly frozenTime: Date;
  readonly name?: string | undefined;
}

export async function createTestClock(ctx: Context, caller: Caller, command: CreateTestClockCommand): Promise<TestClockObject> {
  checkClockCaller(caller);
  if (command.name !== undefined && (command.name.length === 0 || command.name.length > 300)) reject('invalid_string_length', 'name', 'name must be 1 to 300 characters');
  const id = ctx.ids.next('testClock');
  const row = await ctx.db
    .insertInto('test_clocks')
    .values({ account_id: caller.accountId, test_clock_id: id, name: command.name ?? null, frozen_time: command.frozenTime, created_at: ctx.clock.now() })
    .returningAll()
    .executeTakeFirstOrThrow();
  return renderTestClock(row);
}

/** The clock `id` of the caller's account, or `not_found` naming `param`. */
export async function findTestClock(db: Kysely<Database>, caller: Caller, id: string, param = 'id'): Promise<TestClockRow> {
  checkClockCaller(caller);
  const row = await db.selectFrom('test_clocks').selectAll().where('account_id', '=', caller.accountId).where('test_clock_id', '=', id).executeTakeFirst();
  if (!row) reject('not_found', param, `No such test clock: ${id}`);
  return row;
}

export async function retrieveTestClock(ctx: Context, caller: Caller, id: string): Promise<TestClockObject> {
  return renderTestClock(await findTestClock(ctx.db, caller, id));
}

/** The account's clocks, newest first (at most 100). */
export async function listTestClocks(ctx: Context, caller: Caller, limit = 100): Promise<{ object: 'list'; data: TestClockObject[]; count: number }> {
  checkClockCaller(caller);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) reject('invalid_param_key', 'limit', 'limit must be 1 to 100');
  const rows = await ctx.db.selectFrom('test_clocks').selectAll().where('account_id', '=', caller.accountId).orderBy('created_at', 'desc').orderBy('test_clock_id', 'desc').limit(limit).execute();
  return { object: 'list', data: rows.map(renderTestClock), count: rows.length };
}

/**
 * Deletes a clock and every object on it: its customers and their cards, subscriptions, charges,
 * refunds, disputes, payment flows, checkout sessions, their events and webhook deliveries. Refused
 * while the clock advances. One transaction; the clock row is locked first, so an advance starting
 * meanwhile finds no clock.
 */
export async function deleteTestClock(ctx: Context, caller: Caller, id: string): Promise<{ id: string; object: 'test_clock'; deleted: true }> {
  checkClockCaller(caller);
  await ctx.db.transaction().execute(async (trx) => {
    const row = await trx.selectFrom('test_clocks').selectAll().where('account_id', '=', caller.accountId).where('test_clock_id', '=', id).forUpdate().executeTakeFirst();
    if (!row) reject('not_found', 'id', `No such test clock: ${id}`);
    if (row.status === 'advancing') reject('invalid_status', 'id', `Test clock ${id} is advancing; delete it once it is ready.`);
    const account = caller.accountId;
    // The clock's customers, then everything that names one of them (test mode: livemode false).
    const customers = sql`(SELECT customer_id FROM customers WHERE account_id = ${account} AND NOT livemode AND test_clock_id = ${id})`;
    const charges = sql`(SELECT charge_id FROM charges WHERE account_id = ${account} AND NOT livemode AND customer_id IN ${customers})`;
    const flows = sql`(SELECT payment_flow_id FROM payment_flows WHERE account_id = ${account} AND NOT livemode AND customer_id IN ${customers})`;
    await sql`DELETE FROM webhook_deliveries WHERE account_id = ${account} AND test_clock_id = ${id}`.execute(trx);
    // The events of the clock's objects: those naming one of its customers (v1 `customer`, v2 `customer_id`), or one of its charges (a dispute's).
    await sql`DELETE FROM events WHERE account_id = ${account} AND NOT livemode
      AND (resource_id IN ${customers} OR data->>'customer' IN ${customers} OR data->>'customer_id' IN ${customers} OR data->>'charge_id' IN ${charges} OR resource_id = ${id})`.execute(trx);
    await sql`DELETE FROM refunds WHERE account_id = ${account} AND NOT livemode AND charge_id IN ${charges}`.execute(trx);
    await sql`DELETE FROM disputes WHERE account_id = ${account} AND NOT livemode AND charge_id IN ${charges}`.execute(trx);
    await sql`DELETE FROM checkout_sessions WHERE account_id = ${account} AND NOT livemode AND customer_id IN ${customers}`.execute(trx);
    await sql`DELETE FROM payment_flows WHERE account_id = ${account} AND NOT livemode AND payment_flow_id IN ${flows}`.execute(trx);
    await sql`DELETE FROM charges WHERE account_id = ${account} AND NOT livemode AND charge_id IN ${charges}`.execute(trx);
    await sql`DELETE FROM subscriptions WHERE account_id = ${account} AND NOT livemode AND customer_id IN ${customers}`.execute(trx);
    await sql`DELETE FROM cards WHERE account_id = ${account} AND NOT livemode AND customer_id IN ${customers}`.execute(trx);
    await sql`DELETE FROM customers WHERE account_id = ${account} AND NOT livemode AND test_clock_id = ${id}`.execute(trx);
    // The clock's books: what its charges were settled into and its term closes wrote.
    const statements = sql`(SELECT statement_id FROM statements WHERE account_id = ${account} AND NOT livemode AND test_clock_id = ${id})`;
    const terms = sql`(SELECT term_id FROM terms WHERE account_id = ${account} AND NOT livemode AND test_clock_id = ${id})`;
    const balances = sql`(SELECT balance_id FROM balances WHERE account_id = ${account} AND NOT livemode AND test_clock_id = ${id})`;
    await sql`DELETE FROM events WHERE account_id = ${account} AND NOT livemode AND (resource_id IN ${terms} OR resource_id IN ${statements} OR resource_id IN ${balances})`.execute(trx);
    await sql`DELETE FROM statement_items WHERE account_id = ${account} AND NOT livemode AND statement_id IN ${statements}`.execute(trx);
    await sql`DELETE FROM statements WHERE account_id = ${account} AND NOT livemode AND test_clock_id = ${id}`.execute(trx);
    await sql`DELETE FROM balances WHERE account_id = ${account} AND NOT livemode AND test_clock_id = ${id}`.execute(trx);
    await sql`DELETE FROM terms WHERE account_id = ${account} AND NOT livemode AND test_clock_id = ${id}`.execute(trx);
    await sql`UPDATE accounts SET default_test_clock_id = NULL WHERE account_id = ${account} AND default_test_clock_id = ${id}`.execute(trx);
    await sql`DELETE FROM job_runs WHERE job LIKE ${`%@${id}`}`.execute(trx);
    await sql`DELETE FROM job_run_groups WHERE job LIKE ${`%@${id}`}`.execute(trx);
    await trx.deleteFrom('test_clocks').where('account_id', '=', account).where('test_clock_id', '=', id).execute();
  });
  return { id, object: 'test_clock', deleted: true };
}

/** Sets (or with null clears) the clock every new test-mode customer of the account is attached to when none is named. */
export async function setDefaultTestClock(ctx: Context, caller: Caller, id: string | null): Promise<{ default_test_clock: string | null }> {
  if (id !== null) await findTestClock(ctx.db, caller, id, 'default_test_clock');
  else checkClockCaller(caller);
  await ctx.db.updateTable('accounts').set({ default_test_clock_id: id }).where('account_id', '=', caller.accountId).execute();
  return { default_test_clock: id };
}

/**
 * The clock a new test-mode customer is attached to: the one named (`test_clock`, which must be
 * the account's), else the account's default clock, else none.
 */
export async function clockOfNewCustomer(db: Kysely<Database>, caller: Caller, named: string | undefined): Promise<string | null> {
  if (caller.livemode) {
    if (named !== undefined) reject('invalid_param_key', 'test_clock', 'test_clock is a test-mode parameter');
    return null;
  }
  if (named !== undefined) {
    const row = await db.selectFrom('test_clocks').select('test_clock_id').where('account_id', '=', caller.accountId).where('test_clock_id', '=', named).executeTakeFirst();
    if (!row) reject('invalid_param_key', 'test_clock', `No such test clock: ${named}`);
    return row.test_clock_id;
  }
  const account = await db.selectFrom('accounts').select('default_test_clock_id').where('account_id', '=', caller.accountId).executeTakeFirst();
  return account?.default_test_clock_id ?? null;
}

/** Request parameters that may name an object on a clock (or the clock itself). */
const NAMING_PARAMS = ['id', 'customer', 'test_clock', 'subscription', 'charge', 'customer_id', 'payment_flow_id'] as const;

/**
 * The context of a test-mode request: when it names a clock's object (a customer, subscription,
 * charge or payment flow of a clock's customer, or the clock itself on customer creation; else the
 * account's default clock for a new customer), the request runs at the clock's frozen instant, so
 * what it creates is dated on the clock's time. A request on a clock that is advancing is refused:
 * the clock's time is moving.
 */
export async function requestOnClock(ctx: Context, caller: Caller, operation: string, input: unknown): Promise<Context> {
  if (caller.livemode || input === null || typeof input !== 'object') return ctx;
  const params = input as Record<string, unknown>;
  const named = NAMING_PARAMS.map((name) => params[name]).filter((value): value is string => typeof value === 'string' && value.length > 0 && value.length <= MAX_TEXT_LENGTH);
  const forNewCustomer = operation === 'customers.create' || operation === 'v2.customers.create';
  if (named.length === 0 && !forNewCustomer) return ctx;
  const account = caller.accountId;
  const found = await sql<{ test_clock_id: string; frozen_time: Date; status: 'ready' | 'advancing' }>`
    SELECT t.test_clock_id, t.frozen_time, t.status FROM test_clocks t
    WHERE t.account_id = ${account} AND t.test_clock_id IN (
      SELECT x FROM unnest(${named}::text[]) AS x WHERE ${forNewCustomer}
      UNION ALL SELECT a.default_test_clock_id FROM accounts a WHERE ${forNewCustomer && params.test_clock === undefined} AND a.account_id = ${account}
      UNION ALL SELECT c.test_clock_id FROM customers c WHERE c.account_id = ${account} AND NOT c.livemode AND c.test_clock_id IS NOT NULL AND c.customer_id = ANY(${named}::text[])
      UNION ALL SELECT c.test_clock_id FROM subscriptions s JOIN customers c ON c.account_id = s.account_id AND c.livemode = s.livemode AND c.customer_id = s.customer_id
        WHERE s.account_id = ${account} AND c.account_id = ${account} AND NOT s.livemode AND c.test_clock_id IS NOT NULL AND s.subscription_id = ANY(${named}::text[])
      UNION ALL SELECT c.test_clock_id FROM charges h JOIN customers c ON c.account_id = h.account_id AND c.livemode = h.livemode AND c.customer_id = h.customer_id
        WHERE h.account_id = ${account} AND c.account_id = ${account} AND NOT h.livemode AND c.test_clock_id IS NOT NULL AND h.charge_id = ANY(${named}::text[])
      UNION ALL SELECT c.test_clock_id FROM payment_flows f JOIN customers c ON c.account_id = f.account_id AND c.livemode = f.livemode AND c.customer_id = f.customer_id
        WHERE f.account_id = ${account} AND c.account_id = ${account} AND NOT f.livemode AND c.test_clock_id IS NOT NULL AND f.payment_flow_id = ANY(${named}::text[]))
    ORDER BY t.test_clock_id LIMIT 1`.execute(ctx.db);
  const clock = found.rows[0];
  if (!clock) return ctx;
  if (clock.status === 'advancing') throw new KessaiError('invalid_status', { message: `Test clock ${clock.test_clock_id} is advancing; try again once it is ready.` });
  return { ...ctx, clock: new FixedClock(clock.frozen_time), testClock: { accountId: account, testClockId: clock.test_clock_id } };
}
