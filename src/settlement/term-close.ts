/**
 * The term close (service rules §4, the nightly statement generation): every term whose end has
 * passed as of the slot is closed, the next one opened, the statements of each owner written with
 * their items, and every owner's balance decided. Batches of terms, each batch one transaction:
 *
 *   1. lock the due terms (the earliest open term of each account and mode only, so a late slot
 *      closes an account's terms one after the other, each with the balances the previous left);
 *   2. aggregate the terms' charges, refunds and disputes with three GROUP BY queries (per tenant and
 *      payjp_fee_included: a handful of rows per term, whatever the number of charges), and the
 *      terms' billed plan fees and adjustments with two more (per subject and owner);
 *   3. lock the owners' collecting balances and read the tenants' minimums;
 *   4. plan statements, balances and events in memory (planTermClose, no I/O; the balance rules
 *      are src/domain/balance-rules.ts);
 *   5. write statements, items, balances, terms and events with a few INSERT/UPDATE … FROM
 *      statements over bulk rows (src/db/bulk-rows.ts), and open the next terms.
 *
 * Every instant written is the closing term's end (statement `created`, balance changes, events),
 * never the slot or the wall clock: a late slot writes what a punctual one would have.
 * Exactly-once: the term row is locked and marked closed in the same transaction; the statements'
 * (term, owner, type) unique index and the one-collecting-balance-per-owner index are the last
 * line of defence.
 */
import { sql, type Kysely } from 'kysely';
import { bulkColumns, compositeKey } from '../db/bulk-rows';
import type { Database } from '../db/schema';
import type { StatementDraft } from '../domain/sales-statements';
import type { Context } from '../engine/context';
import { accountsOf, inAccounts } from '../db/account-scope';
import { dueAccounts, earliestDueAt } from '../engine/account-batches';
import { runBatches, type JobCounts, type SlotRun } from '../engine/job';
import { inBothApis } from './v2-settlement-objects';
import { recordEvents, type EventInput } from '../events/outbox';
import { balanceObjects, type BalanceRow, type StatementRow } from './statements';
import {
  planTermClose,
  type AdjustmentAggregateRow,
  type ChargeAggregateRow,
  type DisputeAggregateRow,
  type PlanFeeAggregateRow,
  type RefundAggregateRow,
  type TenantMinimumRow,
  type TermCloseInput,
  type TermClosePlan,
} from './term-close-plan';
import { openTerms, type TermRow } from './terms';
import { ownClockInScope, type JobScope } from '../test-clocks/clock-scope';

export type TermCloseCounts = {
  readonly terms_closed: number;
  readonly statements: number;
  readonly balances_fixed: number;
  readonly batches: number;
};

type BatchCounts = Omit<TermCloseCounts, 'batches'> & { readonly selected: number };

const ACCOUNT_MODE_COLUMNS = bulkColumns<TermRow>()({ a: ['text', 'account_id'], l: ['boolean', 'livemode'] });
const STATEMENT_COLUMNS = bulkColumns<StatementRow>()({
  a: ['text', 'account_id'],
  l: ['boolean', 'livemode'],
  id: ['text', 'statement_id'],
  o: ['text', 'owner'],
  r: ['text', 'owner_ref'],
  ten: ['text', 'tenant_id'],
  ty: ['text', 'type'],
  ti: ['text', 'title'],
  t: ['text', 'term_id'],
  b: ['text', 'balance_id'],
  n: ['bigint', 'net'],
  c: ['instant', 'created_at'],
  k: ['text', 'test_clock_id'],
});
const STATEMENT_ITEM_COLUMNS = bulkColumns<{ readonly statement: StatementRow; readonly item: StatementDraft['items'][number]; readonly position: number }>()({
  a: ['text', (x) => x.statement.account_id],
  l: ['boolean', (x) => x.statement.livemode],
  s: ['text', (x) => x.statement.statement_id],
  p: ['smallint', 'position'],
  su: ['text', (x) => x.item.subject],
  am: ['bigint', (x) => x.item.amount],
  tr: ['numeric', (x) => x.item.taxRate],
});
const BALANCE_COLUMNS = bulkColumns<BalanceRow>()({
  a: ['text', 'account_id'],
  l: ['boolean', 'livemode'],
  id: ['text', 'balance_id'],
  o: ['text', 'owner'],
  r: ['text', 'owner_ref'],
  ten: ['text', 'tenant_id'],
  st: ['text', 'state'],
  n: ['bigint', 'net'],
  dl: ['instant', 'deadline'],
  dd: ['date', 'due_date'],
  da: ['instant', 'due_at'],
  cl: ['boolean', 'closed'],
  cd: ['date', 'closed_date'],
  lt: ['text', 'last_term_id'],
  c: ['instant', 'created_at'],
  u: ['instant', 'updated_at'],
  k: ['text', 'test_clock_id'],
});
const CLOSED_TERM_COLUMNS = bulkColumns<TermRow>()({
  a: ['text', 'account_id'],
  l: ['boolean', 'livemode'],
  id: ['text', 'term_id'],
  cc: ['int', 'charge_count'],
  rc: ['int', 'refund_count'],
  dc: ['int', 'dispute_count'],
});

/** Closes everything due as of `run.slot`, account by account (runBatches in job.ts), until no due term is left. */
export async function closeDueTerms(ctx: Context, run: SlotRun): Promise<TermCloseCounts & JobCounts> {
  return runBatches(
    ctx,
    run,
    ['terms_closed', 'statements', 'balances_fixed'],
    (db, cap, among) => dueAccounts(db, 'terms', sql`NOT d.closed AND d.end_at <= ${run.slot} AND ${ownClockInScope(ctx, 'd')}`, cap, among),
    (trx, accountIds, limit) => closeTermBatch(trx, ctx, accountIds, run.slot, limit),
  );
}

/** The earliest open term end of the run's books strictly after `after`, or null. */
export async function nextTermCloseDueAt(ctx: Pick<Context, 'db' | 'testClock'>, after: Date): Promise<Date | null> {
  return earliestDueAt(ctx.db, 'terms', 'end_at', sql`NOT d.closed AND ${ownClockInScope(ctx, 'd')}`, after);
}

/**
 * One batch of the accounts inside the caller's transaction; `selected` 0 means nothing due is
 * left. The books of `ctx.testClock` (clock-scope.ts): the account's own without one, else the
 * clock's terms, balances and statements.
 */
export async function closeTermBatch(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'log' | 'testClock'>, accountIds: readonly string[], asOf: Date, limit: number): Promise<BatchCounts> {
  const input = await readTermBatch(trx, ctx, accountIds, asOf, limit);
  if (input.terms.length === 0) return { selected: 0, terms_closed: 0, statements: 0, balances_fixed: 0 };
  const plan = planTermClose(input, ctx.ids);
  await writeTermClose(trx, ctx, input.terms, plan);
  return { selected: input.terms.length, terms_closed: plan.closedTerms.length, statements: plan.statements.length, balances_fixed: plan.balancesFixed };
}

/** Steps 1–3: the due terms (locked), their money aggregated, the owners' collecting balances (locked) and the tenants' minimums. */
async function readTermBatch(trx: Kysely<Database>, scope: JobScope, batchAccounts: readonly string[], asOf: Date, limit: number): Promise<TermCloseInput> {
  // 1. Due terms, the earliest open one of each account and mode, locked. Not SKIP LOCKED: a term
  //    is share-locked only by a capture or refund being settled into it, and the close must wait
  //    for that row rather than leave the term open until tomorrow's slot. A second run of the
  //    job waits too, then finds the term closed (the re-checked `NOT t.closed`).
  const due = await sql<TermRow>`
    SELECT t.* FROM terms t
    WHERE ${inAccounts('t.account_id', batchAccounts)} AND NOT t.closed AND t.end_at <= ${asOf} AND ${ownClockInScope(scope, 't')}
      AND NOT EXISTS (SELECT 1 FROM terms p WHERE ${inAccounts('p.account_id', batchAccounts)} AND p.account_id = t.account_id AND p.livemode = t.livemode
        AND ${ownClockInScope(scope, 'p')} AND NOT p.closed AND p.start_at < t.start_at)
    ORDER BY t.end_at, t.account_id, t.livemode
    LIMIT ${limit}
    FOR UPDATE OF t`.execute(trx);
  const terms = due.rows;
  if (terms.length === 0) return { terms, charges: [], refunds: [], disputes: [], planFees: [], adjustments: [], collecting: [], tenants: [] };
  // The terms by id through the terms table rather than a JSON list: the planner then knows how
  // many terms (and so charges) a batch covers and picks index lookups for a few terms, a hash join
  // over a sequential scan for a month-end batch of thousands.
  // Term ids are drawn by the engine, so (id, account) pins each locked term.
  const termIds = terms.map((t) => t.term_id);
  const accountIds = [...new Set(terms.map((t) => t.account_id))];
  const k = ACCOUNT_MODE_COLUMNS.table('k', [...new Map(terms.map((t) => [compositeKey(t.account_id, t.livemode), t])).values()]);

  // 2. The terms' money, aggregated in the database; 3. collecting balances of the accounts
  //    (locked) and the tenants' minimums.
  const [charges, refunds, disputes, planFees, adjustments, collecting, tenants] = await Promise.all([
    sql<ChargeAggregateRow>`
      SELECT c.account_id, c.term_id, c.tenant_id, coalesce(c.payjp_fee_included, false) AS inc, count(*)::int AS n,
             sum(c.amount_captured)::bigint AS gross, sum(c.fee)::bigint AS fee, coalesce(sum(c.platform_fee), 0)::bigint AS pf
      FROM terms k JOIN charges c ON ${inAccounts('c.account_id', accountIds)} AND c.account_id = k.account_id AND c.livemode = k.livemode AND c.term_id = k.term_id
      WHERE k.term_id = ANY(${termIds}::text[]) AND k.account_id = ANY(${accountIds}::text[]) AND NOT k.closed
      GROUP BY c.account_id, c.term_id, c.tenant_id, coalesce(c.payjp_fee_included, false)
      ORDER BY c.account_id, c.term_id, c.tenant_id NULLS FIRST, inc`.execute(trx),
    sql<RefundAggregateRow>`
      SELECT r.account_id, r.term_id, r.tenant_id, coalesce(r.payjp_fee_included, false) AS inc, count(*)::int AS n,
             sum(r.amount)::bigint AS refunded, sum(r.refund_fee_offset)::bigint AS rfo, coalesce(sum(r.refund_platform_fee_offset), 0)::bigint AS rpfo
      FROM terms k JOIN refunds r ON ${inAccounts('r.account_id', accountIds)} AND r.account_id = k.account_id AND r.livemode = k.livemode AND r.term_id = k.term_id
      WHERE k.term_id = ANY(${termIds}::text[]) AND k.account_id = ANY(${accountIds}::text[]) AND NOT k.closed
      GROUP BY r.account_id, r.term_id, r.tenant_id, coalesce(r.payjp_fee_included, false)
      ORDER BY r.account_id, r.term_id, r.tenant_id NULLS FIRST, inc`.execute(trx),
    sql<DisputeAggregateRow>`
      SELECT d.account_id, d.term_id, d.tenant_id, d.payjp_fee_included AS inc, count(*)::int AS n,
             sum(d.amount)::bigint AS disputed, sum(d.chargeback_fee_offset)::bigint AS cfo, sum(d.chargeback_platform_fee_offset)::bigint AS cpfo
      FROM terms k JOIN disputes d ON ${inAccounts('d.account_id', accountIds)} AND d.account_id = k.account_id AND d.livemode = k.livemode AND d.term_id = k.term_id
      WHERE k.term_id = ANY(${termIds}::text[]) AND k.account_id = ANY(${accountIds}::text[]) AND NOT k.closed
      GROUP BY d.account_id, d.term_id, d.tenant_id, d.payjp_fee_included
      ORDER BY d.account_id, d.term_id, d.tenant_id NULLS FIRST, inc`.execute(trx),
    sql<PlanFeeAggregateRow>`
      SELECT f.account_id, f.term_id, f.subject, sum(f.amount)::bigint AS amount
      FROM terms k JOIN service_fee_charges f ON ${inAccounts('f.account_id', accountIds)} AND f.account_id = k.account_id AND f.livemode = k.livemode AND f.term_id = k.term_id
      WHERE k.term_id = ANY(${termIds}::text[]) AND k.account_id = ANY(${accountIds}::text[]) AND NOT k.closed
      GROUP BY f.account_id, f.term_id, f.subject
      ORDER BY f.account_id, f.term_id, f.subject`.execute(trx),
    sql<AdjustmentAggregateRow>`
      SELECT j.account_id, j.term_id, j.owner, j.owner_ref, j.tenant_id, j.subject, sum(j.amount)::bigint AS amount
      FROM terms k JOIN adjustments j ON ${inAccounts('j.account_id', accountIds)} AND j.account_id = k.account_id AND j.livemode = k.livemode AND j.term_id = k.term_id
      WHERE k.term_id = ANY(${termIds}::text[]) AND k.account_id = ANY(${accountIds}::text[]) AND NOT k.closed
      GROUP BY j.account_id, j.term_id, j.owner, j.owner_ref, j.tenant_id, j.subject
      ORDER BY j.account_id, j.term_id, j.owner_ref, j.subject`.execute(trx),
    sql<BalanceRow>`
      SELECT b.* FROM ${k.from}
      JOIN balances b ON ${inAccounts('b.account_id', accountIds)} AND b.account_id = ${k.col('a')} AND b.livemode = ${k.col('l')} AND ${ownClockInScope(scope, 'b')} AND b.state = 'collecting'
      ORDER BY b.account_id, b.livemode, b.owner_ref
      FOR UPDATE OF b`.execute(trx),
    sql<TenantMinimumRow>`
      SELECT t.account_id, t.livemode, t.tenant_id, t.minimum_transfer_amount FROM ${k.from}
      JOIN tenants t ON ${inAccounts('t.account_id', accountIds)} AND t.account_id = ${k.col('a')} AND t.livemode = ${k.col('l')}`.execute(trx),
  ]);
  return {
    terms,
    charges: charges.rows,
    refunds: refunds.rows,
    disputes: disputes.rows,
    planFees: planFees.rows,
    adjustments: adjustments.rows,
    collecting: collecting.rows,
    tenants: tenants.rows,
  };
}

/** Step 5: statements and items, balances, terms, events (balance events with the objects read after the writes), the next terms. */
async function writeTermClose(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, terms: readonly TermRow[], plan: TermClosePlan): Promise<void> {
  const { statements, changedBalances, newBalances, closedTerms, balanceEvents } = plan;
  if (statements.length > 0) {
    const x = STATEMENT_COLUMNS.table('x', statements);
    await sql`
      INSERT INTO statements (account_id, livemode, statement_id, owner, owner_ref, tenant_id, type, title, term_id, balance_id, net, created_at, updated_at, test_clock_id)
      SELECT ${x.cols('a', 'l', 'id', 'o', 'r', 'ten', 'ty', 'ti', 't', 'b', 'n', 'c', 'c', 'k')}
      FROM ${x.from}`.execute(trx);
    const i = STATEMENT_ITEM_COLUMNS.table('x', statements.flatMap((s) => s.items.map((item, position) => ({ statement: s, item, position }))));
    await sql`
      INSERT INTO statement_items (account_id, livemode, statement_id, position, subject, amount, tax_rate)
      SELECT ${i.cols('a', 'l', 's', 'p', 'su', 'am', 'tr')} FROM ${i.from}`.execute(trx);
  }
  if (changedBalances.length > 0) {
    const x = BALANCE_COLUMNS.table('x', changedBalances);
    await sql`
      UPDATE balances b SET state = ${x.col('st')}, net = ${x.col('n')}, deadline = ${x.col('dl')}, due_date = ${x.col('dd')}, due_at = ${x.col('da')}, closed = ${x.col('cl')},
        closed_date = ${x.col('cd')}, last_term_id = ${x.col('lt')}, updated_at = ${x.col('u')}
      FROM ${x.from}
      WHERE b.account_id = ${x.col('a')} AND b.livemode = ${x.col('l')} AND b.balance_id = ${x.col('id')}`.execute(trx);
  }
  if (newBalances.length > 0) {
    const x = BALANCE_COLUMNS.table('x', newBalances);
    await sql`
      INSERT INTO balances (account_id, livemode, balance_id, owner, owner_ref, tenant_id, state, net, deadline, due_date, due_at, closed, closed_date, last_term_id, created_at, updated_at, test_clock_id)
      SELECT ${x.cols('a', 'l', 'id', 'o', 'r', 'ten', 'st', 'n', 'dl', 'dd', 'da', 'cl', 'cd', 'lt', 'c', 'u', 'k')}
      FROM ${x.from}`.execute(trx);
  }
  const x = CLOSED_TERM_COLUMNS.table('x', closedTerms);
  await sql`
    UPDATE terms t SET closed = true, closed_at = t.end_at, charge_count = ${x.col('cc')}, refund_count = ${x.col('rc')}, dispute_count = ${x.col('dc')}
    FROM ${x.from}
    WHERE ${inAccounts('t.account_id', accountsOf(closedTerms, (t) => t.account_id))} AND t.account_id = ${x.col('a')} AND t.livemode = ${x.col('l')} AND t.term_id = ${x.col('id')} AND NOT t.closed`.execute(trx);

  const events: EventInput[] = [...plan.events];
  if (balanceEvents.length > 0) {
    // Balance objects with all their statements (merged ones include earlier terms'), read after the writes.
    const finalRows = new Map([...newBalances, ...changedBalances].map((b) => [b.balance_id, b]));
    const objects = new Map((await balanceObjects(trx, [...finalRows.values()])).map((o) => [o.id, o]));
    for (const { type, row } of balanceEvents) {
      const object = objects.get(row.balance_id);
      if (object === undefined) continue;
      // The event shows the balance as it was at that step (created: collecting, fixed: decided).
      const at = row.updated_at;
      events.push({ accountId: row.account_id, livemode: row.livemode, type, data: { ...object, state: row.state, net: row.net, closed: row.closed, closed_date: row.closed_date, due_date: row.due_date }, at });
    }
  }
  await recordEvents(trx, ctx.ids, inBothApis(events));
  await openTerms(
    trx,
    ctx.ids,
    terms.map((t) => ({ accountId: t.account_id, livemode: t.livemode, cycle: t.cycle, at: t.end_at, testClockId: t.test_clock_id })),
  );
}
