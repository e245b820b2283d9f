/**
 * The sales statements of a term (service rules §4 "Statement"): conservation and "every yen lands
 * in exactly one statement", as a property over random charges, refunds and disputes (chargebacks).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { captureBreakdown, refundBreakdown, type PlatformSplit } from '../../src/domain/fees';
import { termSalesStatements, type ChargeAggregate, type DisputeAggregate, type RefundAggregate } from '../../src/domain/sales-statements';

const tenants = ['ten_a', 'ten_b', 'ten_c'] as const;
const included: Readonly<Record<string, boolean>> = { ten_a: false, ten_b: true, ten_c: true };

const chargeArb = fc.record({
  amount: fc.integer({ min: 50, max: 9_999_999 }),
  feeRate: fc.constantFrom('3.00', '3.30', '2.59', '3.25', '0.00'),
  tenant: fc.constantFrom(null, ...tenants),
  platformPercent: fc.integer({ min: 0, max: 9_500 }),
  refunds: fc.array(fc.integer({ min: 1, max: 100 }), { maxLength: 3 }),
  // Disputed after its refunds: the chargeback takes what is left (src/disputes).
  disputed: fc.boolean(),
});

/** Refunds or disputes of one (tenant, fee mode) group, summed. */
interface TakenBack {
  readonly tenantId: string | null;
  readonly payjpFeeIncluded: boolean;
  readonly count: number;
  readonly amount: number;
  readonly feeOffset: number;
  readonly platformFeeOffset: number;
}

describe('termSalesStatements', () => {
  it('property: money in (captured − refunded − disputed) = Σ owners\' nets + the service\'s fees, and each owner\'s net is exactly its shares', () => {
    fc.assert(
      fc.property(fc.array(chargeArb, { maxLength: 40 }), (charges) => {
        const chargeAgg = new Map<string, ChargeAggregate>();
        const refundAgg = new Map<string, TakenBack>();
        const disputeAgg = new Map<string, TakenBack>();
        const expected = new Map<string, number>();
        const credit = (owner: string, amount: number) => expected.set(owner, (expected.get(owner) ?? 0) + amount);
        for (const c of charges) {
          const inc = c.tenant === null ? false : included[c.tenant]!;
          // A platform fee within v1 §4.2 of the amount: 0–95 % (5–95 % when included).
          const percent = inc ? Math.max(500, c.platformPercent) : c.platformPercent;
          const platformFee = c.tenant === null ? 0 : Math.floor((c.amount * percent) / 10_000);
          const platform: PlatformSplit | null = c.tenant === null ? null : { platformFee, payjpFeeIncluded: inc };
          const split = captureBreakdown({ amount: c.amount, feeRate: c.feeRate, platform });
          const key = `${c.tenant}|${inc}`;
          const agg = chargeAgg.get(key) ?? { tenantId: c.tenant, payjpFeeIncluded: inc, count: 0, gross: 0, fee: 0, platformFee: 0 };
          chargeAgg.set(key, { ...agg, count: agg.count + 1, gross: agg.gross + c.amount, fee: agg.fee + split.fee, platformFee: agg.platformFee + split.platformFee });
          credit(c.tenant ?? 'merchant', split.ownerShare);
          if (c.tenant !== null) credit('platform', split.platformShare);
          // A refund or a chargeback of `amount`: both give back what fees.ts refundBreakdown says.
          const takeBack = (into: Map<string, TakenBack>, amount: number) => {
            const r = refundBreakdown({ amount: c.amount, refunded: amount, feeRate: c.feeRate, platform });
            const agg = into.get(key) ?? { tenantId: c.tenant, payjpFeeIncluded: inc, count: 0, amount: 0, feeOffset: 0, platformFeeOffset: 0 };
            into.set(key, { ...agg, count: agg.count + 1, amount: agg.amount + amount, feeOffset: agg.feeOffset + r.refundFeeOffset, platformFeeOffset: agg.platformFeeOffset + r.refundPlatformFeeOffset });
            credit(c.tenant ?? 'merchant', -r.ownerShare);
            if (c.tenant !== null) credit('platform', -r.platformShare);
          };
          let left = c.amount;
          for (const percentOfLeft of c.refunds) {
            const refunded = Math.max(1, Math.floor((left * percentOfLeft) / 100));
            if (refunded > left) break;
            left -= refunded;
            takeBack(refundAgg, refunded);
            if (left === 0) break;
          }
          if (c.disputed && left > 0) takeBack(disputeAgg, left);
        }
        const refunds = [...refundAgg.values()].map((a): RefundAggregate => ({ ...a, refunded: a.amount, refundFeeOffset: a.feeOffset, refundPlatformFeeOffset: a.platformFeeOffset }));
        const disputes = [...disputeAgg.values()].map((a): DisputeAggregate => ({ ...a, disputed: a.amount, chargebackFeeOffset: a.feeOffset, chargebackPlatformFeeOffset: a.platformFeeOffset }));
        const sales = termSalesStatements([...chargeAgg.values()], refunds, disputes);
        expect(sales.disputeCount).toBe(disputes.reduce((sum, d) => sum + d.count, 0));
        const nets = sales.statements.reduce((sum, s) => sum + s.net, 0);
        expect(sales.moneyIn).toBe(nets + sales.serviceFees);
        // Every yen lands in exactly one statement: each owner's net is the sum of its own shares.
        for (const statement of sales.statements) {
          expect(statement.net).toBe(expected.get(statement.ownerRef) ?? 0);
          expect(statement.net).toBe(statement.items.reduce((sum, i) => sum + i.amount, 0));
        }
        expect(new Set(sales.statements.map((s) => s.ownerRef)).size).toBe(sales.statements.length);
      }),
      { numRuns: 300 },
    );
  });

  it('the worked example (10,000, 10 %, 3 %): tenant 8,700 / platform 1,000 when the fee is not included', () => {
    const sales = termSalesStatements([{ tenantId: 'ten_x', payjpFeeIncluded: false, count: 1, gross: 10_000, fee: 300, platformFee: 1_000 }], []);
    expect(sales.statements.map((s) => [s.ownerRef, s.net])).toEqual([
      ['platform', 1_000],
      ['ten_x', 8_700],
    ]);
  });

  it('a chargeback (service rules §4): the owner gives the disputed amount back, the service its fee, the platform its platform fee', () => {
    // 10,000 captured at 3 % with a 1,000 platform fee, 4,000 refunded, the remaining 6,000 disputed.
    const refund = refundBreakdown({ amount: 10_000, refunded: 4_000, feeRate: '3.00', platform: { platformFee: 1_000, payjpFeeIncluded: false } });
    const dispute = refundBreakdown({ amount: 10_000, refunded: 6_000, feeRate: '3.00', platform: { platformFee: 1_000, payjpFeeIncluded: false } });
    const group = { tenantId: 'ten_x', payjpFeeIncluded: false, count: 1 };
    const sales = termSalesStatements(
      [{ ...group, gross: 10_000, fee: 300, platformFee: 1_000 }],
      [{ ...group, refunded: 4_000, refundFeeOffset: refund.refundFeeOffset, refundPlatformFeeOffset: refund.refundPlatformFeeOffset }],
      [{ ...group, disputed: 6_000, chargebackFeeOffset: dispute.refundFeeOffset, chargebackPlatformFeeOffset: dispute.refundPlatformFeeOffset }],
    );
    const items = Object.fromEntries(sales.statements.map((s) => [s.ownerRef, Object.fromEntries(s.items.map((i) => [i.subject, i.amount]))]));
    expect(items.ten_x).toEqual({
      gross_sales: 10_000,
      fee: -300,
      platform_fee: -1_000,
      gross_refund: -4_000,
      refund_fee_offset: 120,
      refund_platform_fee_offset: 400,
      chargeback: -6_000,
      chargeback_fee_offset: 180,
      chargeback_platform_fee_offset: 600,
    });
    expect(items.platform).toEqual({ platform_fee: 1_000, refund_platform_fee_offset: -400, chargeback_platform_fee_offset: -600 });
    // Everything was given back: every owner nets 0 and the service keeps no fee.
    expect(sales.statements.map((s) => s.net)).toEqual([0, 0]);
    expect(sales).toMatchObject({ chargeCount: 1, refundCount: 1, disputeCount: 1, moneyIn: 0, serviceFees: 0 });
  });

  it('an empty term has no statements and balances trivially', () => {
    expect(termSalesStatements([], [], [])).toMatchObject({ statements: [], moneyIn: 0, serviceFees: 0, disputeCount: 0 });
  });
});
