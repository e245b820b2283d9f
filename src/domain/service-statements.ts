/**
 * The statements of a term that do not come from payments (v1 §2.6, service rules §4):
 * - `service_fee`: the merchant account's own paid plan of the service, billed monthly (subjects
 *   `proplan` for the Pro plan, `plan_fee` for any other paid plan); always billed (negative);
 * - `misc`: operator adjustments (subjects `reallocation`, a transfer between balances, and
 *   `other`), positive (paid to the owner) or negative (billed), each with a reason.
 * Pure: the billing job and the adjustment command store rows; the term close sums them per
 * (owner, subject) with SQL and hands the sums here.
 */
import { reject } from './errors';
import { MAX_AMOUNT } from './limits';
import { assertYen } from './money';
import { MERCHANT_OWNER_REF, PLATFORM_OWNER_REF, SERVICE_FEE_TAX_RATE, statementDraft, type OwnerKind, type StatementDraft } from './sales-statements';

/** The subjects a paid plan is billed under: the Pro plan, or another paid plan. */
export const SERVICE_PLAN_SUBJECTS = ['proplan', 'plan_fee'] as const;
export type ServicePlanSubject = (typeof SERVICE_PLAN_SUBJECTS)[number];

/** The subjects of an operator adjustment. */
export const ADJUSTMENT_SUBJECTS = ['reallocation', 'other'] as const;
export type AdjustmentSubject = (typeof ADJUSTMENT_SUBJECTS)[number];

/** A monthly plan fee is at most this (yen), the largest amount of v1 §8; the fee of a plan that ends is 0. */
export const MONTHLY_PLAN_FEE_MAX = MAX_AMOUNT;
/** An adjustment is at most this many yen either way. */
export const ADJUSTMENT_AMOUNT_MAX = 99_999_999;
/** An adjustment's reason: 1 to this many characters. */
export const ADJUSTMENT_REASON_MAX_LENGTH = 500;

/**
 * Adjustments are not sales and not a fee of the service: their items carry tax rate 0.00 (a
 * reallocation moves money already taxed where it came from; `other` corrects an amount).
 */
export const ADJUSTMENT_TAX_RATE = '0.00';

export const SERVICE_STATEMENT_TITLES = {
  service_fee: 'サービス利用料明細',
  misc: '調整明細',
} as const;

/** Checks a plan setting's values (the operator's input): `invalid_param_key` naming the bad one. */
export function assertServicePlan(subject: string, monthlyFee: number): { subject: ServicePlanSubject; monthlyFee: number } {
  if (!(SERVICE_PLAN_SUBJECTS as readonly string[]).includes(subject)) reject('invalid_param_key', 'subject', `subject must be one of ${SERVICE_PLAN_SUBJECTS.join(', ')}`);
  if (!Number.isSafeInteger(monthlyFee) || monthlyFee < 0 || monthlyFee > MONTHLY_PLAN_FEE_MAX) {
    reject('invalid_amount', 'monthly_fee', `monthly_fee must be a whole number of yen from 0 to ${MONTHLY_PLAN_FEE_MAX}`);
  }
  return { subject: subject as ServicePlanSubject, monthlyFee };
}

/** An adjustment as the operator books it, checked: `invalid_param_key` / `invalid_amount` naming the bad value. */
export interface AdjustmentInput {
  readonly amount: number;
  readonly subject: string;
  readonly reason: string;
}

export function assertAdjustment(input: AdjustmentInput): { amount: number; subject: AdjustmentSubject; reason: string } {
  if (!Number.isSafeInteger(input.amount) || input.amount === 0 || Math.abs(input.amount) > ADJUSTMENT_AMOUNT_MAX) {
    reject('invalid_amount', 'amount', `amount must be a non-zero whole number of yen between -${ADJUSTMENT_AMOUNT_MAX} and ${ADJUSTMENT_AMOUNT_MAX} (positive: paid to the owner, negative: billed)`);
  }
  if (!(ADJUSTMENT_SUBJECTS as readonly string[]).includes(input.subject)) reject('invalid_param_key', 'subject', `subject must be one of ${ADJUSTMENT_SUBJECTS.join(', ')}`);
  const reason = typeof input.reason === 'string' ? input.reason.trim() : '';
  if (reason.length === 0 || [...reason].length > ADJUSTMENT_REASON_MAX_LENGTH) {
    reject('invalid_string_length', 'reason', `reason must be 1 to ${ADJUSTMENT_REASON_MAX_LENGTH} characters`);
  }
  return { amount: input.amount, subject: input.subject as AdjustmentSubject, reason };
}

/** A term's billed plan fees of one subject (Σ of the billing rows, positive yen). */
export interface PlanFeeSum {
  readonly subject: ServicePlanSubject;
  readonly amount: number;
}

/** A term's adjustments of one owner and subject (Σ of signed amounts). */
export interface AdjustmentSum {
  readonly owner: OwnerKind;
  readonly ownerRef: string;
  readonly tenantId: string | null;
  readonly subject: AdjustmentSubject;
  readonly amount: number;
}

/**
 * The merchant's `service_fee` statement of a term from its billed plan fees: one item per subject,
 * billed (negative), tax rate 10.00 (service rules §4); null when nothing was billed.
 */
export function serviceFeeStatement(fees: readonly PlanFeeSum[]): StatementDraft | null {
  if (fees.length === 0) return null;
  const items = fees.map((fee) => ({ subject: fee.subject, amount: 0 - assertYen(fee.amount, `${fee.subject} amount`), taxRate: SERVICE_FEE_TAX_RATE }));
  return statementDraft('merchant', MERCHANT_OWNER_REF, null, 'service_fee', SERVICE_STATEMENT_TITLES.service_fee, items);
}

/**
 * The `misc` statements of a term, one per owner with adjustments (merchant, platform, then tenants
 * by id), one item per subject with the signed sum (a subject appears when an adjustment of it was
 * booked, even if the amounts cancel out).
 */
export function miscStatements(adjustments: readonly AdjustmentSum[]): StatementDraft[] {
  const owners = new Map<string, { owner: OwnerKind; tenantId: string | null; amounts: Map<AdjustmentSubject, number> }>();
  for (const a of adjustments) {
    const entry = owners.get(a.ownerRef) ?? { owner: a.owner, tenantId: a.tenantId, amounts: new Map<AdjustmentSubject, number>() };
    entry.amounts.set(a.subject, (entry.amounts.get(a.subject) ?? 0) + assertYen(a.amount, `${a.subject} amount`));
    owners.set(a.ownerRef, entry);
  }
  const rank = (ref: string): string => (ref === MERCHANT_OWNER_REF ? '0' : ref === PLATFORM_OWNER_REF ? '1' : `2${ref}`);
  return [...owners]
    .sort(([a], [b]) => (rank(a) < rank(b) ? -1 : rank(a) > rank(b) ? 1 : 0))
    .map(([ref, entry]) =>
      statementDraft(entry.owner, ref, entry.tenantId, 'misc', SERVICE_STATEMENT_TITLES.misc, [...entry.amounts].map(([subject, amount]) => ({ subject, amount, taxRate: ADJUSTMENT_TAX_RATE }))),
    );
}
