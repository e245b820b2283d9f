/**
 * What a subscription business watches, per JST month of a simulation: MRR
 * and subscribers at month end, sign-ups, churn and recoveries, holds, and per owner what was
 * carried, paid out and forfeited. Read from the simulated database after the run; the month
 * boundaries are 00:00 JST, the last month ends at the range's end.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from '../db/schema';
import { JST_OFFSET_MS, jstMidnight } from '../domain/time';

export interface SubscriberCounts {
  active: number;
  trial: number;
  paused: number;
  canceled: number;
}

/** The figures of one month that are states at its end, or counts of its events. */
export interface MonthEndFigures {
  /**
   * Monthly recurring revenue at month end: the plans of subscriptions active at that instant,
   * a monthly plan at its amount and a yearly plan at a twelfth, summed exactly and then rounded
   * half up to the yen (one rounding, named here). Trial, paused and canceled subscriptions bring
   * none.
   */
  mrr_yen: number;
  subscriptions: SubscriberCounts;
  new_subscriptions: number;
  /** Deleted in the month (at period end after a cancel, or at once). */
  churned_subscriptions: number;
  /** Resumed in the month (after a pause, typically a failed renewal). */
  recovered_subscriptions: number;
  /**
   * Holds of the month; a debit or prepaid card moves the money at authorization (service rules
   * §2.1): `debited_yen` is what such holds took from buyers, `debit_refunded_yen` what went back to
   * them (the rest at a partial capture, all at a cancel or a lapse).
   */
  holds: { authorized: number; captured: number; released_at_expiry: number; reauthorized: number; debited_yen: number; debit_refunded_yen: number };
  /** Per owner, the net of balances still collecting at month end (deferred below the minimum). */
  carried_by_owner: Record<string, number>;
  /** Per owner, balances closed in the month without a payout date: forfeited past their deadline. */
  forfeited_by_owner: Record<string, number>;
}

export function emptyMonthEnd(): MonthEndFigures {
  return {
    mrr_yen: 0,
    subscriptions: { active: 0, trial: 0, paused: 0, canceled: 0 },
    new_subscriptions: 0,
    churned_subscriptions: 0,
    recovered_subscriptions: 0,
    holds: { authorized: 0, captured: 0, released_at_expiry: 0, reauthorized: 0, debited_yen: 0, debit_refunded_yen: 0 },
    carried_by_owner: {},
    forfeited_by_owner: {},
  };
}

/** The JST months overlapping [from, to), each with its end instant (the next month's 00:00 JST, or `to`). */
export function monthsOfRange(from: Date, to: Date): { month: string; end: Date }[] {
  const shifted = new Date(from.getTime() + JST_OFFSET_MS);
  let year = shifted.getUTCFullYear();
  let month = shifted.getUTCMonth() + 1;
  const months: { month: string; end: Date }[] = [];
  for (;;) {
    const key = `${year}-${String(month).padStart(2, '0')}`;
    [year, month] = month === 12 ? [year + 1, 1] : [year, month + 1];
    const next = jstMidnight(`${year}-${String(month).padStart(2, '0')}-01`);
    months.push({ month: key, end: next.getTime() < to.getTime() ? next : to });
    if (next.getTime() >= to.getTime()) return months;
  }
}

/** Rounds a count of twelfths of a yen half up to the yen. */
function roundTwelfthsHalfUp(total: number): number {
  return Math.floor((total + 6) / 12);
}

/** `YYYY-MM` (`month`) or `YYYY-MM-DD` (`day`) of an instant column in JST, printed by the database. */
export function jstSql(column: RawBuilder<unknown>, unit: 'month' | 'day'): RawBuilder<string> {
  return sql<string>`to_char((${column} AT TIME ZONE 'UTC') + interval '9 hours', ${sql.lit(unit === 'month' ? 'YYYY-MM' : 'YYYY-MM-DD')})`;
}

/**
 * The months of [from, to) as a VALUES list `(month, start_at, end_at)`: a month's events are those
 * in [start_at, end_at). `history` says where the first month starts: at `from`, or (for figures
 * that take what happened before the range into the first month) at the beginning of time.
 */
function monthsSql(months: readonly { month: string; end: Date }[], from: Date, history: boolean): RawBuilder<unknown> {
  const rows = months.map(({ month, end }, i) => {
    const start = i > 0 ? sql`${months[i - 1]!.end}::timestamptz` : history ? sql`'-infinity'::timestamptz` : sql`${from}::timestamptz`;
    return sql`(${month}, ${start}, ${end}::timestamptz)`;
  });
  return sql`(VALUES ${sql.join(rows)}) AS m(month, start_at, end_at)`;
}

/**
 * The month-end figures of each month of [from, to). `ownerOf` names a balance's owner as the
 * summary does (tenant id, `platform` or `merchant`); `statements` and `balances` are the API
 * objects the report already read.
 */
export async function monthEndFigures(
  db: Kysely<Database>,
  range: { from: Date; to: Date },
  statements: readonly Record<string, unknown>[],
  balances: readonly Record<string, unknown>[],
  ownerOf: (balance: Record<string, unknown>) => string,
): Promise<Map<string, MonthEndFigures>> {
  const months = monthsOfRange(range.from, range.to);
  const figures = new Map(months.map(({ month }) => [month, emptyMonthEnd()]));
  const monthOf = (at: Date): MonthEndFigures | undefined => {
    const found = months.find(({ end }) => at.getTime() < end.getTime());
    return found ? figures.get(found.month) : undefined;
  };

  // Subscriptions: each one's state after its last event before each month end (the stored
  // documents are the subscription as the event left it), summed by the database: a status or a
  // plan an event does not carry is the one before it; deleted once a deletion came. Each stored
  // document (json, kept as text) is parsed once, by json_to_record: each `->` parses it again,
  // and three of them made this statement twice as long (docs/decisions/performance.md).
  const states = await sql<{ month: string; active: number; trial: number; paused: number; canceled: number; twelfths: number }>`
    WITH ev AS (
      SELECT coalesce(resource_id, '') AS id, created_at, seq, type, doc.status,
        doc.plan->>'amount' AS amount, doc.plan->>'interval' AS plan_interval
      FROM events CROSS JOIN LATERAL json_to_record(data) AS doc(status text, plan json)
      WHERE type LIKE 'subscription.%' AND created_at < ${range.to}
    ), carried AS (
      SELECT id, created_at, seq, status, amount, plan_interval,
        count(status) OVER upto AS status_run, count(amount) OVER upto AS plan_run,
        bool_or(type = 'subscription.deleted') OVER upto AS deleted,
        lead(created_at) OVER (PARTITION BY id ORDER BY created_at, seq) AS next_at
      FROM ev WINDOW upto AS (PARTITION BY id ORDER BY created_at, seq ROWS UNBOUNDED PRECEDING)
    ), state AS (
      SELECT created_at, next_at, deleted,
        coalesce(first_value(status) OVER (PARTITION BY id, status_run ORDER BY created_at, seq), 'active') AS status,
        first_value(amount) OVER (PARTITION BY id, plan_run ORDER BY created_at, seq) AS amount,
        first_value(plan_interval) OVER (PARTITION BY id, plan_run ORDER BY created_at, seq) AS plan_interval
      FROM carried
    )
    SELECT m.month,
      count(*) FILTER (WHERE NOT deleted AND status = 'active') AS active,
      count(*) FILTER (WHERE NOT deleted AND status = 'trial') AS trial,
      count(*) FILTER (WHERE NOT deleted AND status = 'paused') AS paused,
      count(*) FILTER (WHERE NOT deleted AND status = 'canceled') AS canceled,
      coalesce(sum(CASE WHEN coalesce(plan_interval, 'month') = 'year' THEN amount::bigint ELSE amount::bigint * 12 END)
        FILTER (WHERE NOT deleted AND status = 'active'), 0)::bigint AS twelfths
    FROM state JOIN ${monthsSql(months, range.from, true)} ON state.created_at < m.end_at AND (state.next_at IS NULL OR state.next_at >= m.end_at)
    GROUP BY m.month`.execute(db);
  for (const row of states.rows) {
    const entry = figures.get(row.month)!;
    entry.subscriptions = { active: row.active, trial: row.trial, paused: row.paused, canceled: row.canceled };
    entry.mrr_yen = roundTwelfthsHalfUp(row.twelfths);
  }
  const changes = await sql<{ month: string; created: number; deleted: number; resumed: number }>`
    SELECT m.month,
      count(*) FILTER (WHERE e.type = 'subscription.created') AS created,
      count(*) FILTER (WHERE e.type = 'subscription.deleted') AS deleted,
      count(*) FILTER (WHERE e.type = 'subscription.resumed') AS resumed
    FROM events e JOIN ${monthsSql(months, range.from, false)} ON e.created_at >= m.start_at AND e.created_at < m.end_at
    WHERE e.type IN ('subscription.created', 'subscription.deleted', 'subscription.resumed')
    GROUP BY m.month`.execute(db);
  for (const row of changes.rows) {
    const entry = figures.get(row.month)!;
    entry.new_subscriptions = row.created;
    entry.churned_subscriptions = row.deleted;
    entry.recovered_subscriptions = row.resumed;
  }

  // Holds: a charge whose capture came later than its authorization (or never), each figure in
  // the month of its instant (an authorization only from the range's start). A debit or prepaid
  // card's hold gives money back: the rest at a partial capture, everything at a lapse or a cancel
  // (refund of the uncaptured charge).
  const holds = await sql<{ month: string; figure: keyof MonthEndFigures['holds']; value: number }>`
    WITH h AS (
      SELECT created_at, captured_at, released_at, updated_at, amount, amount_captured, refunded,
        card_funding IN ('debit', 'prepaid') AS debited, created_at >= ${range.from} AS in_range
      FROM charges WHERE paid AND (captured_at IS NULL OR captured_at > created_at)
    ), figure(at, figure, value) AS (
      SELECT created_at, 'authorized', 1 FROM h WHERE in_range
      UNION ALL SELECT captured_at, 'captured', 1 FROM h WHERE captured_at IS NOT NULL
      UNION ALL SELECT released_at, 'released_at_expiry', 1 FROM h WHERE released_at IS NOT NULL
      UNION ALL SELECT created_at, 'debited_yen', amount FROM h WHERE in_range AND debited
      UNION ALL SELECT back.at, 'debit_refunded_yen', back.yen FROM h, LATERAL (SELECT
          CASE WHEN captured_at IS NOT NULL THEN captured_at WHEN released_at IS NOT NULL THEN released_at ELSE updated_at END AS at,
          CASE WHEN captured_at IS NOT NULL THEN amount - coalesce(amount_captured, amount) WHEN released_at IS NOT NULL OR refunded THEN amount ELSE 0 END AS yen) back
        WHERE debited AND back.yen > 0
      UNION ALL SELECT attempted_at, 'reauthorized', 1 FROM reauthorizations WHERE outcome = 'succeeded'
    )
    SELECT m.month, figure.figure, sum(figure.value)::bigint AS value
    FROM figure JOIN ${monthsSql(months, range.from, true)} ON figure.at >= m.start_at AND figure.at < m.end_at
    GROUP BY m.month, figure.figure`.execute(db);
  for (const row of holds.rows) figures.get(row.month)!.holds[row.figure] += row.value;

  // Balances: carried while collecting (from its creation until it is fixed or closed), the net
  // of its statements so far; forfeited when closed without a payout date.
  const settled = await db
    .selectFrom('events')
    .select(['resource_id'])
    .select((eb) => eb.fn.min('created_at').as('at'))
    .where('type', 'in', ['balance.fixed', 'balance.closed'])
    .groupBy('resource_id')
    .execute();
  const settledAt = new Map(settled.map((row) => [row.resource_id ?? '', new Date(row.at as unknown as Date)]));
  const byBalance = new Map<string, { created: number; net: number }[]>();
  for (const statement of statements) {
    if (typeof statement.balance_id !== 'string') continue;
    const list = byBalance.get(statement.balance_id) ?? [];
    list.push({ created: Number(statement.created) * 1000, net: Number(statement.net) });
    byBalance.set(statement.balance_id, list);
  }
  for (const balance of balances) {
    const id = String(balance.id);
    const owner = ownerOf(balance);
    const until = settledAt.get(id)?.getTime() ?? Infinity;
    for (const { month, end } of months) {
      if (end.getTime() > until) continue;
      const parts = (byBalance.get(id) ?? []).filter((part) => part.created < end.getTime());
      if (parts.length === 0) continue;
      const carried = figures.get(month)!.carried_by_owner;
      carried[owner] = (carried[owner] ?? 0) + parts.reduce((sum, part) => sum + part.net, 0);
    }
    if (balance.closed === true && balance.due_date === null && typeof balance.closed_date === 'string' && typeof balance.net === 'number') {
      const entry = monthOf(jstMidnight(balance.closed_date));
      if (entry) entry.forfeited_by_owner[owner] = (entry.forfeited_by_owner[owner] ?? 0) + balance.net;
    }
  }
  return figures;
}
