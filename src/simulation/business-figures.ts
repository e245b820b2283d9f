/**
 * What a subscription business watches, per JST month of a simulation: MRR
 * and subscribers at month end, sign-ups, churn and recoveries, holds, and per owner what was
 * carried, paid out and forfeited. Read from the simulated database after the run; the month
 * boundaries are 00:00 JST, the last month ends at the range's end.
 */
import { sql, type Kysely } from 'kysely';
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

/** Twelfths of a yen a month that a plan brings: its amount ×12 a month, ×1 a year. */
function twelfths(amount: number, interval: string): number {
  return interval === 'year' ? amount : amount * 12;
}

/** Rounds a count of twelfths of a yen half up to the yen. */
function roundTwelfthsHalfUp(total: number): number {
  return Math.floor((total + 6) / 12);
}

interface SubscriptionState {
  status: string;
  deleted: boolean;
  twelfths: number;
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
  // documents are the subscription as the event left it).
  const events = await db
    .selectFrom('events')
    .select(['resource_id', 'created_at', 'type'])
    .select([
      sql<string | null>`data->>'status'`.as('status'),
      sql<string | null>`data->'plan'->>'amount'`.as('amount'),
      sql<string | null>`data->'plan'->>'interval'`.as('interval'),
    ])
    .where('type', 'like', 'subscription.%')
    .orderBy('created_at')
    .orderBy('seq')
    .execute();
  const states = new Map<string, SubscriptionState>();
  let next = 0;
  for (const { month, end } of months) {
    const entry = figures.get(month)!;
    for (; next < events.length && events[next]!.created_at.getTime() < end.getTime(); next += 1) {
      const event = events[next]!;
      const id = event.resource_id ?? '';
      const inMonth = event.created_at.getTime() >= range.from.getTime();
      if (event.type === 'subscription.created' && inMonth) entry.new_subscriptions += 1;
      if (event.type === 'subscription.deleted' && inMonth) entry.churned_subscriptions += 1;
      if (event.type === 'subscription.resumed' && inMonth) entry.recovered_subscriptions += 1;
      const previous = states.get(id);
      states.set(id, {
        status: event.status ?? previous?.status ?? 'active',
        deleted: event.type === 'subscription.deleted' || (previous?.deleted ?? false),
        twelfths: event.amount !== null ? twelfths(Number(event.amount), event.interval ?? 'month') : (previous?.twelfths ?? 0),
      });
    }
    let mrr = 0;
    for (const state of states.values()) {
      if (state.deleted) continue;
      const status = state.status as keyof SubscriberCounts;
      if (status in entry.subscriptions) entry.subscriptions[status] += 1;
      if (status === 'active') mrr += state.twelfths;
    }
    entry.mrr_yen = roundTwelfthsHalfUp(mrr);
  }

  // Holds: a charge whose capture came later than its authorization (or never).
  const holds = await db
    .selectFrom('charges')
    .select(['created_at', 'captured_at', 'released_at', 'updated_at', 'card_funding', 'amount', 'amount_captured', 'refunded'])
    .where('paid', '=', true)
    .where((eb) => eb.or([eb('captured_at', 'is', null), eb('captured_at', '>', eb.ref('created_at'))]))
    .execute();
  for (const hold of holds) {
    const created = monthOf(hold.created_at);
    if (created && hold.created_at.getTime() >= range.from.getTime()) created.holds.authorized += 1;
    if (hold.captured_at) {
      const captured = monthOf(hold.captured_at);
      if (captured) captured.holds.captured += 1;
    }
    if (hold.released_at) {
      const released = monthOf(hold.released_at);
      if (released) released.holds.released_at_expiry += 1;
    }
    if (hold.card_funding === 'debit' || hold.card_funding === 'prepaid') {
      if (created && hold.created_at.getTime() >= range.from.getTime()) created.holds.debited_yen += hold.amount;
      // Given back: the rest at a partial capture, everything at a lapse or a cancel (refund of the uncaptured charge).
      const back = hold.captured_at !== null ? { at: hold.captured_at, yen: hold.amount - (hold.amount_captured ?? hold.amount) } : hold.released_at !== null ? { at: hold.released_at, yen: hold.amount } : hold.refunded ? { at: hold.updated_at, yen: hold.amount } : null;
      const month = back && back.yen > 0 ? monthOf(back.at) : undefined;
      if (month && back) month.holds.debit_refunded_yen += back.yen;
    }
  }
  const reauthorized = await db.selectFrom('reauthorizations').select('attempted_at').where('outcome', '=', 'succeeded').execute();
  for (const { attempted_at } of reauthorized) {
    const entry = monthOf(attempted_at);
    if (entry) entry.holds.reauthorized += 1;
  }

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
