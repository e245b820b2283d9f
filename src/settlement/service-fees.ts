/**
 * A merchant account's own paid plan of the service and its monthly billing (v1 §2.6 `service_fee`,
 * subjects `proplan` / `plan_fee`; service rules §4). The plan is effective-dated per account and
 * mode: `setServicePlan` appends a setting that takes effect from an instant, and each month is
 * billed at the fee in force at its start (00:00 JST on the 1st), as a charge takes the fee rate in
 * force at its capture. `service_fees.bill` (jobs/service-fee-billing.ts) writes one
 * `service_fee_charges` row per account, mode and month into the term open at the month's start;
 * the term close sums them into the merchant's `service_fee` statement.
 */
import { sql, type Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { bulkColumns } from '../db/bulk-rows';
import { inAccounts } from '../db/account-scope';
import type { Database } from '../db/schema';
import { KessaiError } from '../domain/errors';
import { assertServicePlan, type ServicePlanSubject } from '../domain/service-statements';
import { termContaining } from '../domain/terms';
import { toUnixSeconds } from '../domain/time';
import { dueAccounts, earliestDueAt } from '../engine/account-batches';
import type { Context } from '../engine/context';
import { runBatches, type JobCounts, type SlotRun } from '../engine/job';
import { openTermIdsOpening } from './terms';

/** The first month start (00:00 JST on the 1st) at or after `at`. */
export function monthStartAtOrAfter(at: Date): Date {
  const month = termContaining('monthly', at);
  return month.start.getTime() === at.getTime() ? month.start : month.end;
}

/** The month start after the month starting at `monthStart`. */
function nextMonthStart(monthStart: Date): Date {
  return termContaining('monthly', monthStart).end;
}

export interface ServicePlanObject {
  readonly object: 'service_plan';
  readonly account: string;
  readonly livemode: boolean;
  readonly subject: ServicePlanSubject;
  readonly monthly_fee: number;
  /** UNIX seconds from which the setting is in force. */
  readonly effective_from: number;
  /** UNIX seconds of the next month start it bills; null once a later setting took over or the fee is 0. */
  readonly next_bill_at: number | null;
  readonly created: number;
}

type ServicePlanRow = Awaited<ReturnType<typeof servicePlanRows>>[number];

function renderServicePlan(row: ServicePlanRow): ServicePlanObject {
  return {
    object: 'service_plan',
    account: row.account_id,
    livemode: row.livemode,
    subject: row.subject,
    monthly_fee: row.monthly_fee,
    effective_from: toUnixSeconds(row.effective_from),
    next_bill_at: row.next_bill_at === null ? null : toUnixSeconds(row.next_bill_at),
    created: toUnixSeconds(row.created_at),
  };
}

async function servicePlanRows(executor: Kysely<Database>, accountId: string, livemode: boolean) {
  return executor.selectFrom('account_service_plans').selectAll().where('account_id', '=', accountId).where('livemode', '=', livemode).orderBy('effective_from').execute();
}

/** The plan settings of an account and mode, oldest first. */
export async function listServicePlans(ctx: Pick<Context, 'db'>, caller: Pick<Caller, 'accountId' | 'livemode'>): Promise<ServicePlanObject[]> {
  return (await servicePlanRows(ctx.db, caller.accountId, caller.livemode)).map(renderServicePlan);
}

export interface SetServicePlanInput {
  readonly subject: string;
  /** Yen a month, 0 to end the paid plan. */
  readonly monthlyFee: number;
  /** In force from this instant (the clock's now when absent); months starting at or after it are billed at this fee. */
  readonly from?: Date;
}

/**
 * Appends a plan setting (an operator's action: the service's API has no endpoint for it). The
 * history only grows forward: a setting must take effect after every earlier one of the account and
 * mode, and after the last month already billed (a billed month is never billed again at another
 * fee). The setting it follows stops billing at its start.
 */
export async function setServicePlan(ctx: Pick<Context, 'db' | 'clock'>, caller: Pick<Caller, 'accountId' | 'livemode'>, input: SetServicePlanInput): Promise<ServicePlanObject> {
  const { subject, monthlyFee } = assertServicePlan(input.subject, input.monthlyFee);
  const now = ctx.clock.now();
  const from = input.from ?? now;
  if (Number.isNaN(from.getTime())) throw new KessaiError('invalid_param_key', { param: 'from', message: 'from must be a valid instant' });
  return ctx.db.transaction().execute(async (trx) => {
    // The account row, locked: two settings of one account are appended one after the other.
    const account = await trx.selectFrom('accounts').select('account_id').where('account_id', '=', caller.accountId).forUpdate().executeTakeFirst();
    if (!account) throw new KessaiError('invalid_id', { param: 'account', message: `No such account: ${caller.accountId}` });
    const latest = await trx
      .selectFrom('account_service_plans')
      .select('effective_from')
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .orderBy('effective_from', 'desc')
      .executeTakeFirst();
    if (latest && latest.effective_from.getTime() >= from.getTime()) {
      throw new KessaiError('invalid_param_key', { param: 'from', message: `a plan setting must take effect after the latest one (${latest.effective_from.toISOString()})` });
    }
    const billed = await trx
      .selectFrom('service_fee_charges')
      .select(({ fn }) => fn.max('period_start').as('last'))
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .executeTakeFirst();
    if (billed?.last && new Date(billed.last).getTime() >= from.getTime()) {
      throw new KessaiError('invalid_param_key', { param: 'from', message: `the month starting ${new Date(billed.last).toISOString()} is billed already; a plan setting must take effect after it` });
    }
    const row = await trx
      .insertInto('account_service_plans')
      .values({ account_id: caller.accountId, livemode: caller.livemode, effective_from: from, subject, monthly_fee: monthlyFee, next_bill_at: monthlyFee > 0 ? monthStartAtOrAfter(from) : null, created_at: now })
      .returningAll()
      .executeTakeFirstOrThrow();
    return renderServicePlan(row);
  });
}

/** A plan setting due for billing, with the start of the setting after it (its billing stops there). */
interface DuePlan {
  readonly account_id: string;
  readonly livemode: boolean;
  readonly effective_from: Date;
  readonly subject: ServicePlanSubject;
  readonly monthly_fee: number;
  readonly next_bill_at: Date;
  readonly until: Date | null;
  readonly term_cycle: 'monthly' | 'semi_monthly';
}

/** One month billed. */
interface Billing {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly periodStart: Date;
  readonly subject: ServicePlanSubject;
  readonly amount: number;
  termId: string;
}
const BILLING_COLUMNS = bulkColumns<Billing>()({
  a: ['text', 'accountId'],
  l: ['boolean', 'livemode'],
  p: ['instant', 'periodStart'],
  s: ['text', 'subject'],
  m: ['bigint', 'amount'],
  t: ['text', 'termId'],
});
const CURSOR_COLUMNS = bulkColumns<{ readonly accountId: string; readonly livemode: boolean; readonly from: Date; readonly next: Date | null }>()({
  a: ['text', 'accountId'],
  l: ['boolean', 'livemode'],
  f: ['instant', 'from'],
  n: ['instant', 'next'],
});

export type ServiceFeeCounts = { readonly billed: number; readonly batches: number };

/** `service_fees.bill`: every month start up to the slot that a plan setting has not billed yet, account by account. */
export async function billServiceFees(ctx: Context, run: SlotRun): Promise<ServiceFeeCounts & JobCounts> {
  return runBatches(
    ctx,
    run,
    ['billed'],
    (db, cap, among) => dueAccounts(db, 'account_service_plans', sql`d.next_bill_at IS NOT NULL AND d.next_bill_at <= ${run.slot}`, cap, among),
    async (trx, accountIds, limit) => {
      const { settings, billed } = await billServiceFeeBatch(trx, ctx, accountIds, run.slot, limit);
      return { selected: settings, billed };
    },
  );
}

/** The earliest month start after `after` that a plan setting still has to bill, or null. */
export async function nextServiceFeeDueAt(db: Kysely<Database>, after: Date): Promise<Date | null> {
  return earliestDueAt(db, 'account_service_plans', 'next_bill_at', sql`d.next_bill_at IS NOT NULL`, after);
}

/**
 * One batch: the accounts' due plan settings (locked, SKIP LOCKED: another run bills them), each
 * month start from its cursor up to the slot and before the next setting's start, at most `limit`
 * months; the rows written with one INSERT (the (account, mode, month) key: never twice), the
 * cursors moved with one UPDATE. Every month is billed at its own start, whatever the slot.
 */
export async function billServiceFeeBatch(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, accountIds: readonly string[], asOf: Date, limit: number): Promise<{ settings: number; billed: number }> {
  const due = await sql<DuePlan>`
    SELECT p.account_id, p.livemode, p.effective_from, p.subject, p.monthly_fee, p.next_bill_at, a.term_cycle,
      (SELECT min(q.effective_from) FROM account_service_plans q
       WHERE ${inAccounts('q.account_id', accountIds)} AND q.account_id = p.account_id AND q.livemode = p.livemode AND q.effective_from > p.effective_from) AS until
    FROM account_service_plans p
    JOIN accounts a ON ${inAccounts('a.account_id', accountIds)} AND a.account_id = p.account_id
    WHERE ${inAccounts('p.account_id', accountIds)} AND p.next_bill_at IS NOT NULL AND p.next_bill_at <= ${asOf}
    ORDER BY p.account_id, p.livemode, p.effective_from
    LIMIT ${limit}
    FOR UPDATE OF p SKIP LOCKED`.execute(trx);
  if (due.rows.length === 0) return { settings: 0, billed: 0 };
  const billings: Billing[] = [];
  const cursors: { accountId: string; livemode: boolean; from: Date; next: Date | null }[] = [];
  for (const plan of due.rows) {
    let month = new Date(plan.next_bill_at);
    const until = plan.until === null ? null : new Date(plan.until);
    while (billings.length < limit && month.getTime() <= asOf.getTime() && (until === null || month.getTime() < until.getTime())) {
      billings.push({ accountId: plan.account_id, livemode: plan.livemode, periodStart: month, subject: plan.subject, amount: plan.monthly_fee, termId: '' });
      month = nextMonthStart(month);
    }
    // Done with this setting once the next one has taken over; otherwise it waits for `month`.
    cursors.push({ accountId: plan.account_id, livemode: plan.livemode, from: plan.effective_from, next: until !== null && month.getTime() >= until.getTime() ? null : month });
  }
  const cycleOf = new Map(due.rows.map((p) => [p.account_id, p.term_cycle]));
  const termIds = await openTermIdsOpening(
    trx,
    ctx.ids,
    billings.map((b) => ({ accountId: b.accountId, livemode: b.livemode, cycle: cycleOf.get(b.accountId)!, at: b.periodStart, testClockId: null })),
  );
  billings.forEach((b, i) => (b.termId = termIds[i]!));
  if (billings.length > 0) {
    const x = BILLING_COLUMNS.table('x', billings);
    await sql`
      INSERT INTO service_fee_charges (account_id, livemode, period_start, subject, amount, term_id, created_at)
      SELECT ${x.cols('a', 'l', 'p', 's', 'm', 't', 'p')} FROM ${x.from}
      ON CONFLICT (account_id, livemode, period_start) DO NOTHING`.execute(trx);
  }
  const c = CURSOR_COLUMNS.table('c', cursors);
  await sql`
    UPDATE account_service_plans p SET next_bill_at = ${c.col('n')}
    FROM ${c.from}
    WHERE ${inAccounts('p.account_id', accountIds)} AND p.account_id = ${c.col('a')} AND p.livemode = ${c.col('l')} AND p.effective_from = ${c.col('f')}`.execute(trx);
  return { settings: due.rows.length, billed: billings.length };
}
