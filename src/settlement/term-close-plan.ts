/**
 * The term close's plan (no I/O): given a batch's due terms, their aggregated charges, refunds and disputes,
 * the owners' collecting balances and the tenants' minimums, the statements to write, the balances
 * to insert or update, the terms closed and the events, with statement and balance ids drawn in a
 * fixed order (term by term, owner by owner: a new balance's id, then its statements'). The
 * balance rules themselves are src/domain/balance-rules.ts (closeOwnerBalance).
 */
import type { SettlementOwner } from '../db/column-types';
import { compositeKey } from '../db/bulk-rows';
import { closeOwnerBalance, minimumTransferAmount, type BalanceOwner, type BalanceState, type BalanceEventType } from '../domain/balance-rules';
import { balanceDueDate } from '../domain/business-days';
import type { IdGenerator } from '../domain/ids';
import {
  SERVICE_FEE_TAX_RATE,
  STATEMENT_TITLES,
  statementDraft,
  termSalesStatements,
  type ChargeAggregate,
  type DisputeAggregate,
  type RefundAggregate,
  type StatementDraft,
} from '../domain/sales-statements';
import { miscStatements, serviceFeeStatement, type AdjustmentSubject, type ServicePlanSubject } from '../domain/service-statements';
import type { EventInput } from '../events/outbox';
import { renderStatement, type BalanceRow, type StatementRow } from './statements';
import { renderTerm, type TermRow } from './terms';

/** A term's charges of one tenant (or none) and fee mode, aggregated by the database. */
export interface ChargeAggregateRow {
  readonly account_id: string;
  readonly term_id: string;
  readonly tenant_id: string | null;
  readonly inc: boolean;
  readonly n: number;
  readonly gross: number;
  readonly fee: number;
  readonly pf: number;
}

/** A term's refunds of one tenant (or none) and fee mode, aggregated by the database. */
export interface RefundAggregateRow {
  readonly account_id: string;
  readonly term_id: string;
  readonly tenant_id: string | null;
  readonly inc: boolean;
  readonly n: number;
  readonly refunded: number;
  readonly rfo: number;
  readonly rpfo: number;
}

/** A term's disputes of one tenant (or none) and fee mode, aggregated by the database. */
export interface DisputeAggregateRow {
  readonly account_id: string;
  readonly term_id: string;
  readonly tenant_id: string | null;
  readonly inc: boolean;
  readonly n: number;
  readonly disputed: number;
  readonly cfo: number;
  readonly cpfo: number;
}

/** A term's billed plan fees of one subject, summed by the database. */
export interface PlanFeeAggregateRow {
  readonly account_id: string;
  readonly term_id: string;
  readonly subject: ServicePlanSubject;
  readonly amount: number;
}

/** A term's adjustments of one owner and subject, summed by the database. */
export interface AdjustmentAggregateRow {
  readonly account_id: string;
  readonly term_id: string;
  readonly owner: SettlementOwner;
  readonly owner_ref: string;
  readonly tenant_id: string | null;
  readonly subject: AdjustmentSubject;
  readonly amount: number;
}

export interface TenantMinimumRow {
  readonly account_id: string;
  readonly livemode: boolean;
  readonly tenant_id: string;
  readonly minimum_transfer_amount: number;
}

/** What the plan reads: one batch of due terms (oldest first) and what their close depends on. */
export interface TermCloseInput {
  readonly terms: readonly TermRow[];
  readonly charges: readonly ChargeAggregateRow[];
  readonly refunds: readonly RefundAggregateRow[];
  readonly disputes: readonly DisputeAggregateRow[];
  /** Optional: a close without plan fees or adjustments may leave them out. */
  readonly planFees?: readonly PlanFeeAggregateRow[];
  readonly adjustments?: readonly AdjustmentAggregateRow[];
  /** The collecting balances of the terms' accounts and modes. */
  readonly collecting: readonly BalanceRow[];
  readonly tenants: readonly TenantMinimumRow[];
}

export type PlannedStatement = StatementRow & { readonly items: StatementDraft['items'] };

export interface TermClosePlan {
  readonly closedTerms: readonly TermRow[];
  readonly statements: readonly PlannedStatement[];
  readonly newBalances: readonly BalanceRow[];
  readonly changedBalances: readonly BalanceRow[];
  /** Balance events in order, each with the balance row as it was at that step; written with the balances' objects read after the writes. */
  readonly balanceEvents: readonly { readonly type: BalanceEventType; readonly row: BalanceRow }[];
  /** `term.closed` of every term, then `statement.created` of every statement. */
  readonly events: readonly EventInput[];
  readonly balancesFixed: number;
}

interface OwnerKey {
  readonly owner: SettlementOwner;
  readonly ownerRef: string;
  readonly tenantId: string | null;
}

/** Plans the close of every term of the batch, in order; draws statement and balance ids from `ids`. */
export function planTermClose(input: TermCloseInput, ids: IdGenerator): TermClosePlan {
  const chargesOf = groupBy(input.charges, (row) => compositeKey(row.account_id, row.term_id), (row): ChargeAggregate => ({
    tenantId: row.tenant_id,
    payjpFeeIncluded: row.inc,
    count: row.n,
    gross: row.gross,
    fee: row.fee,
    platformFee: row.pf,
  }));
  const refundsOf = groupBy(input.refunds, (row) => compositeKey(row.account_id, row.term_id), (row): RefundAggregate => ({
    tenantId: row.tenant_id,
    payjpFeeIncluded: row.inc,
    count: row.n,
    refunded: row.refunded,
    refundFeeOffset: row.rfo,
    refundPlatformFeeOffset: row.rpfo,
  }));
  const disputesOf = groupBy(input.disputes, (row) => compositeKey(row.account_id, row.term_id), (row): DisputeAggregate => ({
    tenantId: row.tenant_id,
    payjpFeeIncluded: row.inc,
    count: row.n,
    disputed: row.disputed,
    chargebackFeeOffset: row.cfo,
    chargebackPlatformFeeOffset: row.cpfo,
  }));
  const planFeesOf = groupBy(input.planFees ?? [], (row) => compositeKey(row.account_id, row.term_id), (row) => ({ subject: row.subject, amount: row.amount }));
  const adjustmentsOf = groupBy(input.adjustments ?? [], (row) => compositeKey(row.account_id, row.term_id), (row) => ({
    owner: row.owner,
    ownerRef: row.owner_ref,
    tenantId: row.tenant_id,
    subject: row.subject,
    amount: row.amount,
  }));
  const balancesOf = new Map<string, Map<string, BalanceRow>>();
  for (const row of input.collecting) {
    const key = compositeKey(row.account_id, row.livemode);
    const map = balancesOf.get(key) ?? new Map<string, BalanceRow>();
    map.set(row.owner_ref, row);
    balancesOf.set(key, map);
  }
  const minimumOf = new Map(input.tenants.map((t) => [compositeKey(t.account_id, t.livemode, t.tenant_id), t.minimum_transfer_amount]));

  const statements: PlannedStatement[] = [];
  const newBalances: BalanceRow[] = [];
  const changedBalances: BalanceRow[] = [];
  const closedTerms: TermRow[] = [];
  const balanceEvents: { type: BalanceEventType; row: BalanceRow }[] = [];
  let fixed = 0;
  for (const term of input.terms) {
    const closeAt = term.end_at;
    const termKey = compositeKey(term.account_id, term.term_id);
    const sales = termSalesStatements(chargesOf.get(termKey) ?? [], refundsOf.get(termKey) ?? [], disputesOf.get(termKey) ?? []);
    // The term's statements that do not come from payments: the merchant's plan fees, and each owner's adjustments.
    const serviceFee = serviceFeeStatement(planFeesOf.get(termKey) ?? []);
    const misc = miscStatements(adjustmentsOf.get(termKey) ?? []);
    const othersOf = (ownerRef: string): StatementDraft[] => [
      ...(serviceFee !== null && serviceFee.ownerRef === ownerRef ? [serviceFee] : []),
      ...misc.filter((s) => s.ownerRef === ownerRef),
    ];
    closedTerms.push({ ...term, closed: true, closed_at: closeAt, charge_count: sales.chargeCount, refund_count: sales.refundCount, dispute_count: sales.disputeCount });
    const due = balanceDueDate({ start: term.start_at, end: term.end_at }, term.cycle);
    const existing = balancesOf.get(compositeKey(term.account_id, term.livemode)) ?? new Map<string, BalanceRow>();
    // The owners: those with a statement this term, then those with a collecting balance.
    const owners = new Map<string, OwnerKey>();
    for (const statement of [...sales.statements, ...(serviceFee === null ? [] : [serviceFee]), ...misc]) {
      if (!owners.has(statement.ownerRef)) owners.set(statement.ownerRef, { owner: statement.owner, ownerRef: statement.ownerRef, tenantId: statement.tenantId });
    }
    for (const balance of [...existing.values()].sort((a, b) => (a.owner_ref < b.owner_ref ? -1 : a.owner_ref > b.owner_ref ? 1 : 0))) {
      if (!owners.has(balance.owner_ref)) owners.set(balance.owner_ref, { owner: balance.owner, ownerRef: balance.owner_ref, tenantId: balance.tenant_id });
    }
    for (const owner of owners.values()) {
      const salesStatement = sales.statements.find((s) => s.ownerRef === owner.ownerRef);
      const previous = existing.get(owner.ownerRef);
      const minimum = minimumTransferAmount(ownerRule(owner, minimumOf.get(compositeKey(term.account_id, term.livemode, owner.ownerRef))));
      const others = othersOf(owner.ownerRef);
      const transition = closeOwnerBalance({
        balance: previous === undefined ? null : stateOf(previous),
        salesNet: salesStatement?.net ?? null,
        otherStatements: others.map((s) => ({ type: s.type as 'service_fee' | 'misc', net: s.net })),
        minimum,
        closeAt,
        due,
      });
      if (!transition.changed) continue;
      const base: BalanceRow = previous ?? {
        account_id: term.account_id,
        livemode: term.livemode,
        balance_id: ids.next('balance'),
        owner: owner.owner,
        owner_ref: owner.ownerRef,
        tenant_id: owner.tenantId,
        state: 'collecting',
        net: 0,
        deadline: null,
        due_date: null,
        due_at: null,
        closed: false,
        closed_date: null,
        last_term_id: term.term_id,
        created_at: closeAt,
        updated_at: closeAt,
        test_clock_id: term.test_clock_id,
      };
      for (const added of transition.statements) {
        const draft =
          added.type === 'sales'
            ? salesStatement!
            : added.type === 'service_fee' || added.type === 'misc'
              ? others.find((s) => s.type === added.type)!
            : added.type === 'transfer_fee'
              ? statementDraft(owner.owner, owner.ownerRef, owner.tenantId, 'transfer_fee', STATEMENT_TITLES.transfer_fee, [{ subject: 'transfer_fee', amount: added.net, taxRate: SERVICE_FEE_TAX_RATE }])
              : statementDraft(owner.owner, owner.ownerRef, owner.tenantId, 'forfeit', STATEMENT_TITLES.forfeit, [{ subject: 'forfeit', amount: added.net, taxRate: '0.00' }]);
        statements.push({
          account_id: term.account_id,
          livemode: term.livemode,
          statement_id: ids.next('statement'),
          owner: draft.owner,
          owner_ref: draft.ownerRef,
          tenant_id: draft.tenantId,
          type: draft.type,
          title: draft.title,
          term_id: term.term_id,
          test_clock_id: term.test_clock_id,
          balance_id: base.balance_id,
          net: draft.net,
          created_at: closeAt,
          updated_at: closeAt,
          items: draft.items,
        });
      }
      for (const event of transition.events) {
        balanceEvents.push({ type: event.type, row: withState(base, event.balance, event.atClose ? { last_term_id: term.term_id, updated_at: closeAt } : {}) });
      }
      if (transition.decision.outcome !== 'defer') fixed += 1;
      const after = withState(base, transition.after, { last_term_id: term.term_id, updated_at: closeAt });
      if (previous === undefined) newBalances.push(after);
      else changedBalances.push(after);
    }
  }

  // Events, in the order things happened at each close: the term closes, its statements are made.
  // (The balances' events follow, written with their objects; then the next terms open.)
  const termOf = new Map(closedTerms.map((t) => [compositeKey(t.account_id, t.term_id), t]));
  const events: EventInput[] = closedTerms.map((t) => ({ accountId: t.account_id, livemode: t.livemode, type: 'term.closed', data: renderTerm(t), at: t.end_at }));
  for (const s of statements) {
    const object = renderStatement(s, s.items.map((i) => ({ subject: i.subject, amount: i.amount, tax_rate: i.taxRate })), termOf.get(compositeKey(s.account_id, s.term_id!)) ?? null);
    events.push({ accountId: s.account_id, livemode: s.livemode, type: 'statement.created', data: object, at: s.created_at });
  }
  return { closedTerms, statements, newBalances, changedBalances, balanceEvents, events, balancesFixed: fixed };
}

function stateOf(row: BalanceRow): BalanceState {
  return { state: row.state, net: row.net, deadline: row.deadline, dueDate: row.due_date, dueAt: row.due_at, closed: row.closed, closedDate: row.closed_date };
}

function withState(base: BalanceRow, state: BalanceState, touched: Partial<Pick<BalanceRow, 'last_term_id' | 'updated_at'>>): BalanceRow {
  return {
    ...base,
    state: state.state,
    net: state.net,
    deadline: state.deadline,
    due_date: state.dueDate,
    due_at: state.dueAt,
    closed: state.closed,
    closed_date: state.closedDate,
    ...touched,
  };
}

function groupBy<Row, Value>(rows: readonly Row[], keyOf: (row: Row) => string, valueOf: (row: Row) => Value): Map<string, Value[]> {
  const groups = new Map<string, Value[]>();
  for (const row of rows) {
    const key = keyOf(row);
    const list = groups.get(key) ?? [];
    list.push(valueOf(row));
    groups.set(key, list);
  }
  return groups;
}

function ownerRule(owner: OwnerKey, tenantMinimum: number | undefined): BalanceOwner {
  if (owner.owner === 'tenant') return { kind: 'tenant', minimumTransferAmount: tenantMinimum ?? 10_000 };
  return { kind: owner.owner };
}
