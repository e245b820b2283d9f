/**
 * The claim rows of charges in `idempotency_keys` (charge-claims.ts takes and drops them; a create
 * intent is one, create-intents.ts): their key, and the DELETE of one if it is still the same
 * claim. Apart from charge-claims.ts so that the statements that drop a claim in their own write
 * (insertCreatedCharge, charge-record.ts) can build that DELETE.
 */
import type { ExpressionBuilder, Kysely } from 'kysely';
import type { Database } from '../db/schema';

/** The claim row's key is this prefix and the charge id. */
export const CLAIM_PREFIX = 'charge:';

/** A claim taken by one operation on one charge; `claimedAt` is also the operation's business instant. */
export interface ChargeClaim {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly chargeId: string;
  readonly operation: string;
  readonly claimedAt: Date;
}

/** The claim row's key and guard, as stored: what claimRowDeletion binds. */
export interface ClaimRowValues {
  readonly accountId: string;
  readonly livemode: boolean;
  readonly claimKey: string;
  readonly claimOperation: string;
  readonly claimedAt: Date;
}

export const claimRowOf = (claim: ChargeClaim): ClaimRowValues => ({ accountId: claim.accountId, livemode: claim.livemode, claimKey: CLAIM_PREFIX + claim.chargeId, claimOperation: claim.operation, claimedAt: claim.claimedAt });

/**
 * The claim row is still this claim (its key, operation and instant): the guard of its DELETE
 * (claimRowDeletion) and of the UPDATE that claims a create intent again (create-intents.ts). The
 * values are only bound (they may be fixedStatement's slots).
 */
export const claimRowIs = (v: ClaimRowValues) => (eb: ExpressionBuilder<Database, 'idempotency_keys'>) =>
  eb.and([eb('account_id', '=', v.accountId), eb('livemode', '=', v.livemode), eb('idempotency_key', '=', v.claimKey), eb('request_hash', '=', v.claimOperation), eb('created_at', '=', v.claimedAt)]);

/** The DELETE of the claim row if it is still this claim: dropClaim's, and the guard of a write that drops it in its own statement (insertCreatedCharge). */
export function claimRowDeletion(executor: Kysely<Database>, v: ClaimRowValues) {
  return executor.deleteFrom('idempotency_keys').where(claimRowIs(v));
}
