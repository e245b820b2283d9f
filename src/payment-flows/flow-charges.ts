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
import { instantFromEpochMs } from '../db/epoch-ms';

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

/** Writes the charge rows of the captures and hands them to settlement, in the caller's transaction. */
export async function recordFlowCaptures(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'clock'>, captures: readonly FlowCapture[]): Promise<string[]> {
  if (captures.length === 0) return [];
  const accounts = [...new Set(captures.map((c) => c.flow.account_id))];
  const rates = await trx.selectFrom('account_fee_rates').select(['account_id', 'brand', 'fee_rate']).where('account_id', 'in', accounts).execute();
  const rateOf = new Map(rates.map((r) => [`${r.account_id}\u0000${r.brand}`, r.fee_rate]));
  const rows = captures.map(({ flow, captureNumber, amount, at }) => {
    const brand = flow.card_brand ?? PAYPAY_RATE_BRAND;
    const feeRate = rateOf.get(`${flow.account_id}\u0000${brand}`) ?? DEFAULT_FEE_RATES[brand as keyof typeof DEFAULT_FEE_RATES] ?? '3.00';
    return {
      a: flow.account_id,
      l: flow.livemode,
      c: ctx.ids.next('charge'),
      amt: amount,
      card: flow.card_id ?? flow.payment_method_id ?? PAYPAY_METHOD_ID,
      cus: flow.customer_id,
      d: flow.description,
      fr: feeRate,
      t: at.getTime(),
      f: flow.payment_flow_id,
      n: captureNumber,
    };
  });
  const inserted = await sql<{ account_id: string; livemode: boolean; charge_id: string }>`
    INSERT INTO charges (account_id, livemode, charge_id, amount, currency, paid, captured, captured_at, amount_captured, card_id, customer_id,
                         description, fee_rate, created_at, updated_at, payment_flow_id, payment_flow_capture)
    SELECT a, l, c, amt, 'jpy', true, true, ${instantFromEpochMs('t')}, amt, card, cus, d, fr, ${instantFromEpochMs('t')}, ${instantFromEpochMs('t')}, f, n
    FROM json_to_recordset(${JSON.stringify(rows)}::json)
      AS r(a text, l boolean, c text, amt bigint, card text, cus text, d text, fr numeric, t bigint, f text, n smallint)
    ON CONFLICT (account_id, livemode, payment_flow_id, payment_flow_capture) WHERE payment_flow_id IS NOT NULL DO NOTHING
    RETURNING account_id, livemode, charge_id`.execute(trx);
  await settleCaptured(
    trx,
    ctx,
    inserted.rows.map((row) => ({ accountId: row.account_id, livemode: row.livemode, chargeId: row.charge_id })),
  );
  return inserted.rows.map((row) => row.charge_id);
}
