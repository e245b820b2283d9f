/**
 * Settlement's hooks on the money-moving paths (contract between the charge/hold code and the
 * settlement code). Every path that captures a charge or writes a refund row calls these in the
 * same transaction, once per batch, after its rows are written:
 * - `settleCaptured`: fills the settlement fields of freshly captured charges (fee, platform fee
 *   split, `term_id` of the term containing `captured_at`, opening that term if needed).
 * - `settleRefunds`: fills the fee offsets and `term_id` of freshly written refund rows.
 * Both are set-based (one or a few statements per batch) and idempotent.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema';
import type { Context } from '../engine/context';

export interface ChargeKey {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly chargeId: string;
}

export interface RefundKey {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly refundId: string;
}

// Placeholder bodies until the settlement work lands; the signatures are the contract.
export async function settleCaptured(_trx: Kysely<Database>, _ctx: Pick<Context, 'ids' | 'clock'>, _charges: readonly ChargeKey[]): Promise<void> {}

export async function settleRefunds(_trx: Kysely<Database>, _ctx: Pick<Context, 'ids' | 'clock'>, _refunds: readonly RefundKey[]): Promise<void> {}
