/**
 * The platform parameters of `charges.create` (v1 §4.2 `tenant`, `platform_fee`): resolved and
 * validated here, stored on the charge by the charge code. The fee split itself happens at capture
 * (src/settlement/capture.ts), on the captured amount.
 */
import type { Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database } from '../db/schema';
import { chargePlatformFee } from '../domain/fees';
import { findTenant } from './tenants';

/** What `charges.create` writes into the charge row's platform columns. */
export interface ChargeTenantColumns {
  readonly tenant_id: string | null;
  /** The platform fee of `amount`: given, or floor(amount × rate / 100). */
  readonly platform_fee: number | null;
  /** The tenant's rate when the fee was derived from it; null when `platform_fee` was given. */
  readonly platform_fee_rate: string | null;
  readonly payjp_fee_included: boolean | null;
  readonly total_platform_fee: number;
}

export interface ChargeTenantInput {
  /** The `tenant` parameter, undefined when not sent. */
  readonly tenant?: string | undefined;
  /** The `platform_fee` parameter as an integer, undefined when not sent. */
  readonly platformFee?: number | undefined;
  /** The charge `amount` (already validated). */
  readonly amount: number;
}

/**
 * Resolves `tenant` and `platform_fee`: an unknown tenant is `invalid_id` on `tenant`; a
 * `platform_fee` without a tenant is `invalid_param_key` on `platform_fee`; out of the v1 §4.2
 * range (5–100 % with `payjp_fee_included`, else 0–95 %) is `invalid_amount` on `platform_fee`.
 * The tenant row is read FOR SHARE so a concurrent delete waits for the charge.
 */
export async function resolveChargeTenant(trx: Kysely<Database>, caller: Pick<Caller, 'accountId' | 'livemode'>, input: ChargeTenantInput): Promise<ChargeTenantColumns> {
  if (input.tenant === undefined) {
    const none = chargePlatformFee(input.amount, null, input.platformFee ?? null);
    return { tenant_id: null, platform_fee: none.platformFee, platform_fee_rate: none.platformFeeRate, payjp_fee_included: null, total_platform_fee: none.totalPlatformFee };
  }
  const tenant = await findTenant(trx, caller, input.tenant, 'tenant', { lock: 'share' });
  const fee = chargePlatformFee(input.amount, { platformFeeRate: tenant.platform_fee_rate, payjpFeeIncluded: tenant.payjp_fee_included }, input.platformFee ?? null);
  return {
    tenant_id: tenant.tenant_id,
    platform_fee: fee.platformFee,
    platform_fee_rate: fee.platformFeeRate,
    payjp_fee_included: tenant.payjp_fee_included,
    total_platform_fee: fee.totalPlatformFee,
  };
}
