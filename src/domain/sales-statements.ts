/**
 * The sales statements of one closing term (service rules §4 "Statement"), from the term's
 * charges, refunds and disputes aggregated per (tenant, payjp_fee_included). Pure: the term-close job
 * aggregates with SQL GROUP BY and hands the few resulting rows here.
 *
 * Owners and their items (positive = paid to the owner, negative = billed), mirroring
 * fees.ts captureBreakdown/refundBreakdown summed over the term:
 * - the merchant (charges without a tenant): gross_sales, fee, gross_refund, refund_fee_offset;
 * - each tenant: gross_sales, platform_fee (−), gross_refund, refund_platform_fee_offset, and the
 *   service fee items (fee, refund_fee_offset) only when payjp_fee_included is false;
 * - the platform: platform_fee (+), refund_platform_fee_offset (−), and the service fee items of
 *   the charges whose tenants have payjp_fee_included true (the platform pays them).
 * A dispute (chargeback) takes the disputed amount back from whoever a refund of it would:
 * `chargeback` (−) where `gross_refund` would be, `chargeback_fee_offset` (+) where
 * `refund_fee_offset` would be, `chargeback_platform_fee_offset` (+ tenant, − platform) where
 * `refund_platform_fee_offset` would be. The money went back to the buyer through the card network
 * instead of through the merchant, and the service gives its fee on it back as for a refund.
 *
 * Conservation, checked on every call: captured − refunded − disputed = Σ owners' nets + the
 * service's fees (fee − refund_fee_offset − chargeback_fee_offset): every yen that came in lands in
 * exactly one statement or with the service.
 */

export const STATEMENT_TYPES = ['sales', 'service_fee', 'forfeit', 'transfer_fee', 'misc'] as const;
export type StatementType = (typeof STATEMENT_TYPES)[number];

/** v1 §2.6 statement item subjects, in the order a statement lists them. */
export const STATEMENT_SUBJECTS = [
  'gross_sales',
  'fee',
  'platform_fee',
  'gross_refund',
  'refund_fee_offset',
  'refund_platform_fee_offset',
  'chargeback',
  'chargeback_fee_offset',
  'chargeback_platform_fee_offset',
  'proplan',
  'plan_fee',
  'forfeit',
  'reallocation',
  'transfer_fee',
  'other',
] as const;
export type StatementSubject = (typeof STATEMENT_SUBJECTS)[number];

/** Display names of the subjects (the statement item's `name`). */
export const SUBJECT_NAMES: Readonly<Record<StatementSubject, string>> = {
  gross_sales: '売上',
  fee: '決済手数料',
  platform_fee: 'プラットフォーム利用料',
  gross_refund: '返金',
  refund_fee_offset: '返金による手数料返還',
  refund_platform_fee_offset: '返金によるプラットフォーム利用料返還',
  chargeback: 'チャージバック',
  chargeback_fee_offset: 'チャージバックによる手数料返還',
  chargeback_platform_fee_offset: 'チャージバックによるプラットフォーム利用料返還',
  proplan: 'プロプラン利用料',
  plan_fee: 'プラン利用料',
  forfeit: '失効',
  reallocation: '振替',
  transfer_fee: '振込手数料',
  other: 'その他',
};

/** service rules §4: tax rate 0.00 on sales items, 10.00 on service fees (the transfer fee is one). */
export const SALES_TAX_RATE = '0.00';
export const SERVICE_FEE_TAX_RATE = '10.00';

/** The platform's statements and balance: the account itself, collecting its platform fees. */
export const PLATFORM_OWNER_REF = 'platform';
export const MERCHANT_OWNER_REF = 'merchant';

export type OwnerKind = 'merchant' | 'tenant' | 'platform';

/** Captured charges of a term with the same tenant and payjp_fee_included. */
export interface ChargeAggregate {
  readonly tenantId: string | null;
  readonly payjpFeeIncluded: boolean;
  readonly count: number;
  /** Σ captured amount. */
  readonly gross: number;
  /** Σ service fee. */
  readonly fee: number;
  /** Σ platform fee (0 without a tenant). */
  readonly platformFee: number;
}

/** Refunds of a term with the same tenant and payjp_fee_included (of their charges). */
export interface RefundAggregate {
  readonly tenantId: string | null;
  readonly payjpFeeIncluded: boolean;
  readonly count: number;
  readonly refunded: number;
  readonly refundFeeOffset: number;
  readonly refundPlatformFeeOffset: number;
}

/** Disputes opened in a term with the same tenant and payjp_fee_included (of their charges). */
export interface DisputeAggregate {
  readonly tenantId: string | null;
  readonly payjpFeeIncluded: boolean;
  readonly count: number;
  readonly disputed: number;
  readonly chargebackFeeOffset: number;
  readonly chargebackPlatformFeeOffset: number;
}

export interface StatementItemDraft {
  readonly subject: StatementSubject;
  readonly amount: number;
  readonly taxRate: string;
}

export interface StatementDraft {
  readonly owner: OwnerKind;
  /** 'merchant', 'platform' or the tenant id. */
  readonly ownerRef: string;
  readonly tenantId: string | null;
  readonly type: StatementType;
  readonly title: string;
  readonly items: readonly StatementItemDraft[];
  /** Σ items. */
  readonly net: number;
}

export interface TermSales {
  /** One sales statement per owner with activity, ordered merchant, platform, tenants by id. */
  readonly statements: readonly StatementDraft[];
  readonly chargeCount: number;
  readonly refundCount: number;
  readonly disputeCount: number;
  /** captured − refunded − disputed. */
  readonly moneyIn: number;
  /** What the service keeps: Σ fee − Σ refund_fee_offset − Σ chargeback_fee_offset. */
  readonly serviceFees: number;
}

export const STATEMENT_TITLES = {
  merchant: '売上明細',
  tenant: 'テナント売上明細',
  platform: 'プラットフォーム利用料明細',
  transfer_fee: '振込手数料',
  forfeit: '残高失効',
} as const;

/** A statement from its items; the net is their sum by construction (v1 §2.6). */
export function statementDraft(owner: OwnerKind, ownerRef: string, tenantId: string | null, type: StatementType, title: string, items: readonly StatementItemDraft[]): StatementDraft {
  const ordered = [...items].sort((a, b) => STATEMENT_SUBJECTS.indexOf(a.subject) - STATEMENT_SUBJECTS.indexOf(b.subject));
  const net = ordered.reduce((sum, item) => sum + item.amount, 0);
  return { owner, ownerRef, tenantId, type, title, items: ordered, net };
}

/** Throws unless the statement's net is the sum of its items (an invariant checked in code). */
export function assertStatementNet(statement: Pick<StatementDraft, 'net' | 'items' | 'ownerRef' | 'type'>): void {
  const sum = statement.items.reduce((total, item) => total + item.amount, 0);
  if (sum !== statement.net) throw new Error(`statement ${statement.type} of ${statement.ownerRef}: net ${statement.net} is not the sum of its items ${sum}`);
}

class ItemsOf {
  readonly amounts = new Map<StatementSubject, number>();
  add(subject: StatementSubject, amount: number): void {
    // `0 + x` keeps a negated zero from ever becoming -0.
    this.amounts.set(subject, (this.amounts.get(subject) ?? 0) + amount + 0);
  }
  items(): StatementItemDraft[] {
    return [...this.amounts].map(([subject, amount]) => ({ subject, amount, taxRate: SALES_TAX_RATE }));
  }
}

/** The subjects money taken back from a sale is booked under: by a refund, or by a chargeback. */
interface TakeBackSubjects {
  readonly amount: StatementSubject;
  readonly feeOffset: StatementSubject;
  readonly platformFeeOffset: StatementSubject;
}
const REFUND_SUBJECTS: TakeBackSubjects = { amount: 'gross_refund', feeOffset: 'refund_fee_offset', platformFeeOffset: 'refund_platform_fee_offset' };
const CHARGEBACK_SUBJECTS: TakeBackSubjects = { amount: 'chargeback', feeOffset: 'chargeback_fee_offset', platformFeeOffset: 'chargeback_platform_fee_offset' };

type OwnerItems = (owner: OwnerKind, ownerRef: string, tenantId: string | null) => ItemsOf;

/**
 * Books money taken back from sales (a refund or a chargeback aggregate), mirroring the sale: the
 * owner gives the amount back and gets the fee offsets; a tenant's platform fee offset is the
 * platform's to give; the service fee offset goes to whoever paid the fee (fees.ts).
 */
function takeBack(
  of: OwnerItems,
  group: { readonly tenantId: string | null; readonly payjpFeeIncluded: boolean },
  money: { readonly amount: number; readonly feeOffset: number; readonly platformFeeOffset: number },
  subjects: TakeBackSubjects,
): void {
  if (group.tenantId === null) {
    const merchant = of('merchant', MERCHANT_OWNER_REF, null);
    merchant.add(subjects.amount, -money.amount);
    merchant.add(subjects.feeOffset, money.feeOffset);
    return;
  }
  const tenant = of('tenant', group.tenantId, group.tenantId);
  const platform = of('platform', PLATFORM_OWNER_REF, null);
  tenant.add(subjects.amount, -money.amount);
  tenant.add(subjects.platformFeeOffset, money.platformFeeOffset);
  platform.add(subjects.platformFeeOffset, -money.platformFeeOffset);
  (group.payjpFeeIncluded ? platform : tenant).add(subjects.feeOffset, money.feeOffset);
}

/**
 * The sales statements of a term. Items appear where they apply: an owner's statement lists a
 * subject when at least one charge, refund or dispute of the term contributed to it (even if it sums to 0).
 */
export function termSalesStatements(charges: readonly ChargeAggregate[], refunds: readonly RefundAggregate[], disputes: readonly DisputeAggregate[] = []): TermSales {
  const owners = new Map<string, { owner: OwnerKind; tenantId: string | null; items: ItemsOf }>();
  const of: OwnerItems = (owner, ownerRef, tenantId) => {
    let entry = owners.get(ownerRef);
    if (entry === undefined) {
      entry = { owner, tenantId, items: new ItemsOf() };
      owners.set(ownerRef, entry);
    }
    return entry.items;
  };
  let moneyIn = 0;
  let serviceFees = 0;
  let chargeCount = 0;
  let refundCount = 0;
  let disputeCount = 0;
  for (const c of charges) {
    moneyIn += c.gross;
    serviceFees += c.fee;
    chargeCount += c.count;
    if (c.tenantId === null) {
      const merchant = of('merchant', MERCHANT_OWNER_REF, null);
      merchant.add('gross_sales', c.gross);
      merchant.add('fee', -c.fee);
      continue;
    }
    const tenant = of('tenant', c.tenantId, c.tenantId);
    const platform = of('platform', PLATFORM_OWNER_REF, null);
    tenant.add('gross_sales', c.gross);
    tenant.add('platform_fee', -c.platformFee);
    platform.add('platform_fee', c.platformFee);
    // fees.ts: with payjp_fee_included the platform fee contains the service fee, so the platform pays it.
    (c.payjpFeeIncluded ? platform : tenant).add('fee', -c.fee);
  }
  for (const r of refunds) {
    moneyIn -= r.refunded;
    serviceFees -= r.refundFeeOffset;
    refundCount += r.count;
    takeBack(of, r, { amount: r.refunded, feeOffset: r.refundFeeOffset, platformFeeOffset: r.refundPlatformFeeOffset }, REFUND_SUBJECTS);
  }
  for (const d of disputes) {
    moneyIn -= d.disputed;
    serviceFees -= d.chargebackFeeOffset;
    disputeCount += d.count;
    takeBack(of, d, { amount: d.disputed, feeOffset: d.chargebackFeeOffset, platformFeeOffset: d.chargebackPlatformFeeOffset }, CHARGEBACK_SUBJECTS);
  }
  const rank = (ref: string): string => (ref === MERCHANT_OWNER_REF ? '0' : ref === PLATFORM_OWNER_REF ? '1' : `2${ref}`);
  const statements = [...owners]
    .sort(([a], [b]) => (rank(a) < rank(b) ? -1 : rank(a) > rank(b) ? 1 : 0))
    .map(([ref, entry]) => statementDraft(entry.owner, ref, entry.tenantId, 'sales', STATEMENT_TITLES[entry.owner], entry.items.items()));
  const nets = statements.reduce((sum, s) => sum + s.net, 0);
  // Money in = money out: every yen of the term is in one owner's statement or is the service's fee.
  if (moneyIn !== nets + serviceFees) throw new Error(`term does not balance: money in ${moneyIn} ≠ statements ${nets} + service fees ${serviceFees}`);
  for (const statement of statements) assertStatementNet(statement);
  return { statements, chargeCount, refundCount, disputeCount, moneyIn, serviceFees };
}
