/**
 * Captured flow money as `charges` rows, so settlement counts v2 sales exactly like v1 ones
 * (service rules §4: "A charge belongs to the term in which it is captured"). One row per capture:
 * a partial capture and the later remainder can fall into different terms. (flow, capture number)
 * is the natural key, so a capture is never written twice. Rows are written captured, with no hold
 * of their own (the flow holds the authorization), so the v1 hold jobs never touch them.
 */
import { sql, type Kysely } from 'kysely';
import { DEFAULT_FEE_RATES } from '../accounts/accounts';
import type { Database } from '../db/schema';
import type { Context } from '../engine/context';
import { settleCaptured } from '../settlement/capture';
import { PAYPAY_METHOD_ID } from './payment-method';
import type { PaymentFlowRow } from './payment-flow-object';
import { bulkColumns, compositeKey } from '../db/bulk-rows';

export interface FlowCapture {
  readonly flow: PaymentFlowRow;
  /** 1 for the first capture, 2 for the remainder after a partial one. */
  readonly captureNumber: number;
  readonly amount: number;
  readonly at: Date;
}

/**
 * **Decision:** PayPay has no card brand and so no brand fee rate; its charges use the account's
 * Visa rate (the account's base card rate), falling back to the default 3.00 %.
 */
const PAYPAY_RATE_BRAND = 'Visa';

/** A capture's charge row (recordFlowCaptures). */
const FLOW_CHARGE_COLUMNS = bulkColumns<{
  readonly flow: FlowCapture['flow'];
  readonly chargeId: string;
  readonly amount: number;
  readonly feeRate: string;
  readonly at: Date;
  readonly captureNumber: number;
}>()({
  a: ['text', (r) => r.flow.account_id],
  l: ['boolean', (r) => r.flow.livemode],
  c: ['text', 'chargeId'],
  amt: ['bigint', 'amount'],
  card: ['text', (r) => r.flow.card_id ?? r.flow.payment_method_id ?? PAYPAY_METHOD_ID],
  cus: ['text', (r) => r.flow.customer_id],
  d: ['text', (r) => r.flow.description],
  fr: ['numeric', 'feeRate'],
  t: ['instant', 'at'],
  f: ['text', (r) => r.flow.payment_flow_id],
  n: ['smallint', 'captureNumber'],
});

/** Writes the charge rows of the captures and hands them to settlement, in the caller's transaction. */
export async function recordFlowCaptures(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'clock'>, captures: readonly FlowCapture[]): Promise<string[]> {
  if (captures.length === 0) return [];
  const accounts = [...new Set(captures.map((c) => c.flow.account_id))];
  const rates = await trx.selectFrom('account_fee_rates').select(['account_id', 'brand', 'fee_rate']).where('account_id', 'in', accounts).execute();
  const rateOf = new Map(rates.map((r) => [compositeKey(r.account_id, r.brand), r.fee_rate]));
  const rows = captures.map(({ flow, captureNumber, amount, at }) => {
    const brand = flow.card_brand ?? PAYPAY_RATE_BRAND;
    const feeRate = rateOf.get(compositeKey(flow.account_id, brand)) ?? DEFAULT_FEE_RATES[brand as keyof typeof DEFAULT_FEE_RATES] ?? '3.00';
    return { flow, chargeId: ctx.ids.next('charge'), amount, feeRate, at, captureNumber };
  });
  const r = FLOW_CHARGE_COLUMNS.table('r', rows);
  const inserted = await sql<{ account_id: string; livemode: boolean; charge_id: string }>`
    INSERT INTO charges (account_id, livemode, charge_id, amount, currency, paid, captured, captured_at, amount_captured, card_id, customer_id,
                         description, fee_rate, created_at, updated_at, payment_flow_id, payment_flow_capture)
    SELECT ${r.cols('a', 'l', 'c', 'amt')}, 'jpy', true, true, ${r.cols('t', 'amt', 'card', 'cus', 'd', 'fr', 't', 't', 'f', 'n')}
    FROM ${r.from}
    ON CONFLICT (account_id, livemode, payment_flow_id, payment_flow_capture) WHERE payment_flow_id IS NOT NULL DO NOTHING
    RETURNING account_id, livemode, charge_id`.execute(trx);
  await settleCaptured(
    trx,
    ctx,
    inserted.rows.map((row) => ({ accountId: row.account_id, livemode: row.livemode, chargeId: row.charge_id })),
  );
  return inserted.rows.map((row) => row.charge_id);
}
