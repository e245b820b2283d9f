import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  closeOwnerBalance,
  decideBalanceAtClose,
  NEW_BALANCE,
  type BalanceState,
  deferralDeadline,
  deferralDeadlineReached,
  minimumTransferAmount,
  type BalanceDecision,
} from '../../src/domain/balance-rules';

const jst = (local: string): Date => new Date(`${local}+09:00`);
const close = jst('2027-07-01T00:00:00');
const noDeadline = null;

const decide = (net: number, minimum = 10_000, deadline: Date | null = noDeadline, closeAt = close): BalanceDecision =>
  decideBalanceAtClose({ net, minimum, deadline, closeAt });

describe('minimum transfer amount', () => {
  it('is 10,000 for merchants (and the platform operator) and the tenant’s own for tenants', () => {
    expect(minimumTransferAmount({ kind: 'merchant' })).toBe(10_000);
    expect(minimumTransferAmount({ kind: 'platform' })).toBe(10_000);
    expect(minimumTransferAmount({ kind: 'tenant', minimumTransferAmount: 3000 })).toBe(3000);
  });

  it('"minimum_transfer_amount … at least 1,000"', () => {
    expect(() => minimumTransferAmount({ kind: 'tenant', minimumTransferAmount: 999 })).toThrow(RangeError);
  });
});

describe('decision at a term close', () => {
  it('"net < 0 → claim", without a transfer fee', () => {
    expect(decide(-1)).toEqual({ outcome: 'claim', state: 'claim', net: -1 });
  });

  it('"net ≥ the minimum … → transfer, with a transfer_fee statement of -250"', () => {
    expect(decide(10_000)).toEqual({
      outcome: 'transfer',
      state: 'transfer',
      reason: 'minimum_reached',
      net: 10_000,
      transferFeeStatementNet: -250,
      payout: 9750, // the minimum applies before the fee
    });
  });

  it('uses the tenant’s minimum_transfer_amount', () => {
    expect(decide(3000, 3000).outcome).toBe('transfer');
    expect(decide(2999, 3000).outcome).toBe('defer');
  });

  it('"0 ≤ net < minimum → payout deferred: the balance stays collecting"', () => {
    expect(decide(0)).toEqual({ outcome: 'defer', state: 'collecting', net: 0 });
    expect(decide(9999)).toEqual({ outcome: 'defer', state: 'collecting', net: 9999 });
  });

  it('defers, then pays out once the merged sum crosses the minimum', () => {
    const termNets = [6000, 3000, 2500];
    const decisions: BalanceDecision[] = [];
    let net = 0;
    for (const [index, termNet] of termNets.entries()) {
      net += termNet; // the next term's statements are added to the deferred balance
      const decision = decide(net, 10_000, jst('2028-06-01T00:00:00'), jst(`2027-0${index + 5}-01T00:00:00`));
      decisions.push(decision);
      if (decision.outcome !== 'defer') break;
    }
    expect(decisions.map((decision) => decision.outcome)).toEqual(['defer', 'defer', 'transfer']);
    expect(decisions[2]).toMatchObject({ net: 11_500, payout: 11_250 });
  });

  it('"past the deadline at a close: net < 1,000 → forfeited: a forfeit statement of -net, the balance is transfer, closed"', () => {
    const deadline = jst('2028-06-01T00:00:00');
    const atClose = jst('2028-06-01T00:00:00');
    expect(decide(999, 10_000, deadline, atClose)).toEqual({
      outcome: 'forfeit',
      state: 'transfer',
      net: 999,
      forfeitStatementNet: -999,
      closedAt: atClose,
    });
  });

  it('"net ≥ 1,000 → paid out" past the deadline, paying the transfer fee like any transfer', () => {
    const deadline = jst('2028-06-01T00:00:00');
    expect(decide(1000, 10_000, deadline, jst('2028-07-01T00:00:00'))).toEqual({
      outcome: 'transfer',
      state: 'transfer',
      reason: 'deadline_reached',
      net: 1000,
      transferFeeStatementNet: -250,
      payout: 750,
    });
  });

  it('a zero balance past the deadline is closed without a forfeit statement (and never as -0)', () => {
    const decision = decide(0, 10_000, jst('2028-06-01T00:00:00'), jst('2028-06-01T00:00:00'));
    expect(decision).toMatchObject({ outcome: 'forfeit', forfeitStatementNet: null });
  });

  it('a claim stays a claim past the deadline, and a balance at the minimum is paid before it', () => {
    const deadline = jst('2027-01-01T00:00:00');
    expect(decide(-500, 10_000, deadline).outcome).toBe('claim');
    expect(decide(10_000, 10_000, deadline)).toMatchObject({ outcome: 'transfer', reason: 'minimum_reached' });
  });

  it('a balance without a sales statement (no deadline) keeps collecting', () => {
    expect(decide(500, 10_000, null, jst('2040-01-01T00:00:00')).outcome).toBe('defer');
  });
});

describe('deferral deadline', () => {
  it('"the end of the term of the latest sales statement + 1 year"', () => {
    expect(deferralDeadline(jst('2027-07-01T00:00:00'), null)).toEqual(jst('2028-07-01T00:00:00'));
    expect(deferralDeadline(jst('2027-06-16T00:00:00'), null)).toEqual(jst('2028-06-16T00:00:00'));
  });

  it('"it only moves later"', () => {
    const current = jst('2028-07-01T00:00:00');
    expect(deferralDeadline(jst('2027-05-01T00:00:00'), current)).toBe(current);
    expect(deferralDeadline(jst('2027-08-01T00:00:00'), current)).toEqual(jst('2028-08-01T00:00:00'));
  });

  it('is reached at a close exactly on it, not before', () => {
    const deadline = jst('2028-07-01T00:00:00');
    expect(deferralDeadlineReached(deadline, jst('2028-06-30T23:59:59'))).toBe(false);
    expect(deferralDeadlineReached(deadline, deadline)).toBe(true);
    expect(deferralDeadlineReached(null, deadline)).toBe(false);
  });

  it('forfeits below 1,000 once a year has passed since the last sales term, after deferring until then', () => {
    // Last sales in the term ending 2027-02-01; later terms bring no sales statements.
    const deadline = deferralDeadline(jst('2027-02-01T00:00:00'), null);
    expect(decide(800, 10_000, deadline, jst('2028-01-01T00:00:00')).outcome).toBe('defer');
    expect(decide(800, 10_000, deadline, jst('2028-02-01T00:00:00'))).toMatchObject({ outcome: 'forfeit', forfeitStatementNet: -800 });
  });

  it('a leap day would map to Feb 28 of the next year, not overflow into March', () => {
    expect(deferralDeadline(jst('2028-02-29T00:00:00'), null)).toEqual(jst('2029-02-28T00:00:00'));
  });
});

describe('decision invariants (property)', () => {
  it('every net gets exactly the state its range calls for, and payouts are never below 750', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -1_000_000, max: 1_000_000 }),
        fc.integer({ min: 1000, max: 50_000 }),
        fc.boolean(),
        (net, minimum, pastDeadline) => {
          const decision = decide(net, minimum, jst('2028-01-01T00:00:00'), pastDeadline ? jst('2028-01-01T00:00:00') : jst('2027-12-01T00:00:00'));
          if (net < 0) expect(decision.outcome).toBe('claim');
          else if (net >= minimum) expect(decision).toMatchObject({ outcome: 'transfer', reason: 'minimum_reached' });
          else if (!pastDeadline) expect(decision.outcome).toBe('defer');
          else expect(decision.outcome).toBe(net >= 1000 ? 'transfer' : 'forfeit');
          if (decision.outcome === 'transfer') expect(decision.payout).toBeGreaterThanOrEqual(750);
          if (decision.outcome === 'forfeit' && decision.forfeitStatementNet !== null) expect(decision.net + decision.forfeitStatementNet).toBe(0);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('one owner through a term close (closeOwnerBalance, service-rules §4 "Balance")', () => {
  const due = { date: '2027-08-31', at: jst('2027-08-31T00:00:00') };
  const collecting = (net: number, deadline: Date | null = null): BalanceState => ({ ...NEW_BALANCE, net, deadline });
  const run = (balance: BalanceState | null, salesNet: number | null, minimum = 10_000, closeAt = close) => closeOwnerBalance({ balance, salesNet, minimum, closeAt, due });

  it('"0 ≤ net < minimum → payout deferred: the balance stays collecting and the next term\'s statements are added to it (balance.merged)"', () => {
    const t = run(collecting(3000, jst('2027-12-01T00:00:00')), 2000);
    expect(t.decision.outcome).toBe('defer');
    expect(t.statements).toEqual([{ type: 'sales', net: 2000 }]);
    expect(t.after).toMatchObject({ state: 'collecting', net: 5000, dueDate: null, closed: false });
    expect(t.events.map((e) => e.type)).toEqual(['balance.merged']);
    expect(t.events[0]).toMatchObject({ atClose: false, balance: { net: 5000, state: 'collecting' } });
    expect(t.changed).toBe(true);
  });

  it('"The deferral deadline is the end of the term of the latest sales statement + 1 year; it only moves later"', () => {
    expect(run(collecting(100), 100).after.deadline).toEqual(jst('2028-07-01T00:00:00'));
    const later = jst('2029-01-01T00:00:00');
    expect(run(collecting(100, later), 100).after.deadline).toEqual(later);
    // No sales statement this term: the deadline stays.
    expect(run(collecting(100, jst('2027-12-01T00:00:00')), null).after.deadline).toEqual(jst('2027-12-01T00:00:00'));
  });

  it('a deferred balance with nothing new this term is left exactly as it was (nothing written, no event)', () => {
    const t = run(collecting(3000, jst('2027-12-01T00:00:00')), null);
    expect(t).toMatchObject({ changed: false, statements: [], events: [] });
  });

  it('"net < 0 → claim", due on the term\'s due date, balance.fixed; an owner without a balance gets one (balance.created first)', () => {
    const t = run(null, -500);
    expect(t.decision.outcome).toBe('claim');
    expect(t.statements).toEqual([{ type: 'sales', net: -500 }]);
    expect(t.after).toMatchObject({ state: 'claim', net: -500, dueDate: '2027-08-31', dueAt: due.at, closed: false });
    expect(t.events.map((e) => e.type)).toEqual(['balance.created', 'balance.fixed']);
    expect(t.events[0]!.balance).toEqual(NEW_BALANCE);
  });

  it('"net ≥ the minimum → transfer, with a transfer_fee statement of -250 added; event balance.fixed"', () => {
    const t = run(collecting(4000, jst('2028-01-01T00:00:00')), 6000);
    expect(t.statements).toEqual([
      { type: 'sales', net: 6000 },
      { type: 'transfer_fee', net: -250 },
    ]);
    expect(t.after).toMatchObject({ state: 'transfer', net: 9750, dueDate: '2027-08-31', closed: false });
    expect(t.events.map((e) => e.type)).toEqual(['balance.merged', 'balance.fixed']);
  });

  it('"past the deadline at a close: net < 1,000 → forfeited: a forfeit statement of -net, the balance is transfer, closed with closed_date"', () => {
    const t = run(collecting(999, close), null);
    expect(t.decision.outcome).toBe('forfeit');
    expect(t.statements).toEqual([{ type: 'forfeit', net: -999 }]);
    expect(t.after).toMatchObject({ state: 'transfer', net: 0, closed: true, closedDate: '2027-07-01', dueDate: null });
    expect(t.events.map((e) => e.type)).toEqual(['balance.fixed', 'balance.closed']);
    // A zero balance has nothing to forfeit: no statement, still closed.
    expect(run(collecting(0, close), null).statements).toEqual([]);
  });

  it('"past the deadline at a close: … net ≥ 1,000 → paid out" (a transfer with its fee)', () => {
    const t = run(collecting(1000, close), null);
    expect(t.decision).toMatchObject({ outcome: 'transfer', reason: 'deadline_reached' });
    expect(t.statements).toEqual([{ type: 'transfer_fee', net: -250 }]);
    expect(t.after).toMatchObject({ state: 'transfer', net: 750, dueDate: '2027-08-31' });
  });

  it('the balance net is always the sum of what it had and the statements the close added', () => {
    fc.assert(
      fc.property(fc.option(fc.integer({ min: -50_000, max: 50_000 }), { nil: null }), fc.option(fc.integer({ min: -50_000, max: 50_000 }), { nil: null }), fc.boolean(), (had, sales, pastDeadline) => {
        const balance = had === null ? null : collecting(had, pastDeadline ? close : jst('2030-01-01T00:00:00'));
        if (balance === null && sales === null) return;
        const t = run(balance, sales);
        expect(t.after.net).toBe((had ?? 0) + t.statements.reduce((sum, s) => sum + s.net, 0));
      }),
    );
  });
});
