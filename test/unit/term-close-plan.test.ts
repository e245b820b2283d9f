/**
 * The term close's plan (src/settlement/term-close-plan.ts) without a database: statements,
 * balance transitions (service-rules §4), events and the order ids are drawn in.
 */
import { describe, expect, it } from 'vitest';
import { seededIds, type IdGenerator } from '../../src/domain/ids';
import type { BalanceRow } from '../../src/settlement/statements';
import { planTermClose, type TermCloseInput } from '../../src/settlement/term-close-plan';
import type { TermRow } from '../../src/settlement/terms';

const jst = (local: string): Date => new Date(`${local}+09:00`);
const start = jst('2027-06-01T00:00:00');
const end = jst('2027-07-01T00:00:00');

const term = (accountId: string, termId: string): TermRow => ({
  account_id: accountId,
  livemode: false,
  term_id: termId,
  cycle: 'monthly',
  start_at: start,
  end_at: end,
  closed: false,
  closed_at: null,
  charge_count: 0,
  refund_count: 0,
  dispute_count: 0,
  created_at: start,
  test_clock_id: null,
});

const collecting = (accountId: string, owner: BalanceRow['owner'], ownerRef: string, net: number, deadline: Date | null): BalanceRow => ({
  account_id: accountId,
  livemode: false,
  balance_id: `ba_${ownerRef}`,
  owner,
  owner_ref: ownerRef,
  tenant_id: owner === 'tenant' ? ownerRef : null,
  state: 'collecting',
  net,
  deadline,
  due_date: null,
  due_at: null,
  closed: false,
  closed_date: null,
  last_term_id: 'tm_previous',
  created_at: jst('2026-06-01T00:00:00'),
  updated_at: jst('2026-06-01T00:00:00'),
  test_clock_id: null,
});

/** An id generator that records the kinds drawn, in order. */
function recording(): IdGenerator & { kinds: string[] } {
  const inner = seededIds(7);
  const kinds: string[] = [];
  return { kinds, next: (kind) => (kinds.push(kind), inner.next(kind)) } as IdGenerator & { kinds: string[] };
}

describe('planTermClose', () => {
  const input: TermCloseInput = {
    terms: [term('acct_a', 'tm_a'), term('acct_b', 'tm_b')],
    charges: [{ account_id: 'acct_a', term_id: 'tm_a', tenant_id: null, inc: false, n: 3, gross: 20_000, fee: 600, pf: 0 }],
    refunds: [{ account_id: 'acct_a', term_id: 'tm_a', tenant_id: null, inc: false, n: 1, refunded: 1000, rfo: 30, rpfo: 0 }],
    disputes: [],
    collecting: [
      // acct_a's merchant had 2,000 deferred: its sales join it (balance.merged).
      collecting('acct_a', 'merchant', 'merchant', 2000, jst('2027-12-01T00:00:00')),
      // acct_b: a tenant's 600 past its deadline (forfeited), and a merchant's 5,000 still deferred with nothing new (left alone).
      collecting('acct_b', 'tenant', 'ten_1', 600, end),
      collecting('acct_b', 'merchant', 'merchant', 5000, jst('2027-12-01T00:00:00')),
    ],
    tenants: [{ account_id: 'acct_b', livemode: false, tenant_id: 'ten_1', minimum_transfer_amount: 3000 }],
  };

  it('closes every term with its counts, at its end', () => {
    const plan = planTermClose(input, seededIds(7));
    expect(plan.closedTerms.map((t) => [t.term_id, t.closed, t.closed_at, t.charge_count, t.refund_count])).toEqual([
      ['tm_a', true, end, 3, 1],
      ['tm_b', true, end, 0, 0],
    ]);
  });

  it('merges the sales into the deferred balance and pays it out with the transfer fee (§4: "net ≥ the minimum → transfer, with a transfer_fee statement of -250")', () => {
    const plan = planTermClose(input, seededIds(7));
    const merchantA = plan.changedBalances.find((b) => b.account_id === 'acct_a')!;
    // 20,000 − 600 fee − 1,000 refunded + 30 refund fee offset = 18,430; + 2,000 deferred − 250.
    // Due the last day of the following month, 2027-07-31, a Saturday: the business day before.
    expect(merchantA).toMatchObject({ balance_id: 'ba_merchant', state: 'transfer', net: 2000 + 18_430 - 250, due_date: '2027-07-30', last_term_id: 'tm_a', updated_at: end });
    const statementsA = plan.statements.filter((s) => s.account_id === 'acct_a');
    expect(statementsA.map((s) => [s.type, s.net, s.balance_id, s.created_at])).toEqual([
      ['sales', 18_430, 'ba_merchant', end],
      ['transfer_fee', -250, 'ba_merchant', end],
    ]);
  });

  it('forfeits a tenant balance under 1,000 past its deadline and leaves a deferred balance with nothing new untouched (§4)', () => {
    const plan = planTermClose(input, seededIds(7));
    const tenant = plan.changedBalances.find((b) => b.owner_ref === 'ten_1')!;
    expect(tenant).toMatchObject({ state: 'transfer', net: 0, closed: true, closed_date: '2027-07-01', due_date: null });
    expect(plan.statements.filter((s) => s.account_id === 'acct_b').map((s) => [s.type, s.net, s.owner_ref])).toEqual([['forfeit', -600, 'ten_1']]);
    expect(plan.changedBalances.some((b) => b.account_id === 'acct_b' && b.owner_ref === 'merchant')).toBe(false);
    expect(plan.balancesFixed).toBe(2);
  });

  it('lists the events in order, each balance event with the balance as it was at that step', () => {
    const plan = planTermClose(input, seededIds(7));
    expect(plan.events.map((e) => [e.type, e.accountId])).toEqual([
      ['term.closed', 'acct_a'],
      ['term.closed', 'acct_b'],
      ['statement.created', 'acct_a'],
      ['statement.created', 'acct_a'],
      ['statement.created', 'acct_b'],
    ]);
    expect(plan.balanceEvents.map((e) => [e.type, e.row.balance_id, e.row.state, e.row.net, e.row.updated_at])).toEqual([
      // Merged before the close touched the row: its previous update time stays.
      ['balance.merged', 'ba_merchant', 'collecting', 20_430, jst('2026-06-01T00:00:00')],
      ['balance.fixed', 'ba_merchant', 'transfer', 20_180, end],
      ['balance.fixed', 'ba_ten_1', 'transfer', 0, end],
      ['balance.closed', 'ba_ten_1', 'transfer', 0, end],
    ]);
  });

  it('opens a balance for an owner without one, drawing its id before its statements\', term by term', () => {
    const ids = recording();
    const plan = planTermClose({ ...input, collecting: [] }, ids);
    // acct_a: a new merchant balance, its sales statement and transfer fee; acct_b: nothing.
    expect(ids.kinds).toEqual(['balance', 'statement', 'statement']);
    expect(plan.newBalances).toHaveLength(1);
    expect(plan.balanceEvents.map((e) => [e.type, e.row.state, e.row.net])).toEqual([
      ['balance.created', 'collecting', 0],
      ['balance.fixed', 'transfer', 18_180],
    ]);
    // The same input and seed give the same plan.
    expect(planTermClose({ ...input, collecting: [] }, seededIds(7))).toEqual(planTermClose({ ...input, collecting: [] }, seededIds(7)));
  });
});
