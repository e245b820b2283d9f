/**
 * Writing captured charges and refunds for settlement tests the way the money-moving paths do:
 * the row first, then the settlement hook in the same transaction.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../../src/db/schema';
import type { Context } from '../../src/engine/context';
import { settleCaptured, settleRefunds } from '../../src/settlement/capture';
import { resolveChargeTenant } from '../../src/tenants/charge-tenant';

export interface CaptureSpec {
  readonly accountId: string;
  readonly livemode?: boolean;
  readonly chargeId: string;
  readonly amount: number;
  /** Captured amount, default `amount`. */
  readonly captured?: number;
  readonly at: Date;
  readonly feeRate?: string;
  readonly tenant?: string;
  readonly platformFee?: number;
}

/** A captured charge, settled through settleCaptured. */
export async function captureCharge(db: Kysely<Database>, ctx: Pick<Context, 'ids' | 'clock'>, spec: CaptureSpec): Promise<void> {
  const livemode = spec.livemode ?? false;
  await db.transaction().execute(async (trx) => {
    const platform = await resolveChargeTenant(trx, { accountId: spec.accountId, livemode }, { tenant: spec.tenant, platformFee: spec.platformFee, amount: spec.amount });
    const captured = spec.captured ?? spec.amount;
    await trx
      .insertInto('charges')
      .values({
        account_id: spec.accountId,
        livemode,
        charge_id: spec.chargeId,
        amount: spec.amount,
        paid: true,
        captured: true,
        captured_at: spec.at,
        amount_captured: captured,
        amount_refunded: spec.amount - captured,
        card_id: 'car_settlement',
        customer_id: null,
        subscription_id: null,
        period_start: null,
        description: null,
        failure_code: null,
        failure_message: null,
        fee_rate: spec.feeRate ?? '3.00',
        refund_reason: null,
        three_d_secure_status: null,
        expired_at: null,
        metadata: '{}',
        created_at: spec.at,
        updated_at: spec.at,
        tenant_id: platform.tenant_id,
        platform_fee: platform.platform_fee,
        platform_fee_rate: platform.platform_fee_rate,
        payjp_fee_included: platform.payjp_fee_included,
        total_platform_fee: platform.total_platform_fee,
      })
      .execute();
    await settleCaptured(trx, ctx, [{ accountId: spec.accountId, livemode, chargeId: spec.chargeId }]);
  });
}

/** A refund row of a charge, settled through settleRefunds. */
export async function refundCharge(
  db: Kysely<Database>,
  ctx: Pick<Context, 'ids' | 'clock'>,
  spec: { accountId: string; livemode?: boolean; chargeId: string; refundId: string; amount: number; at: Date },
): Promise<void> {
  const livemode = spec.livemode ?? false;
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('refunds')
      .values({ account_id: spec.accountId, livemode, refund_id: spec.refundId, charge_id: spec.chargeId, amount: spec.amount, reason: null, created_at: spec.at })
      .execute();
    await settleRefunds(trx, ctx, [{ accountId: spec.accountId, livemode, refundId: spec.refundId }]);
  });
}
