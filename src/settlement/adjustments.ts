/**
 * Operator adjustments (v1 §2.6 `misc` statements, subjects `reallocation` and `other`): an amount
 * paid to (positive) or billed from (negative) one owner's balance, with the reason, booked into the
 * owner's term open at the booking instant and summed by the term close into the owner's `misc`
 * statement. `bookAdjustment` is the one entry point: the `kessai adjustments add` command and the
 * operator API call it. Exactly once: an optional request key (the operator's idempotency key)
 * books a retried request once.
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { AdjustmentsTable, Database } from '../db/schema';
import { KessaiError } from '../domain/errors';
import { MAX_TEXT_LENGTH } from '../domain/limits';
import { MERCHANT_OWNER_REF, PLATFORM_OWNER_REF } from '../domain/sales-statements';
import { assertAdjustment } from '../domain/service-statements';
import { toUnixSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { findTenant } from '../tenants/tenants';
import { openTermIdsOpening } from './terms';
import { bookOf } from '../test-clocks/clock-scope';

export type AdjustmentRow = Selectable<AdjustmentsTable>;

export interface AdjustmentObject {
  readonly id: string;
  readonly object: 'adjustment';
  readonly livemode: boolean;
  /** `merchant`, `platform` or `tenant`. */
  readonly owner: string;
  readonly tenant_id: string | null;
  readonly subject: string;
  readonly amount: number;
  readonly reason: string;
  /** The term whose `misc` statement will carry it. */
  readonly term_id: string;
  readonly created: number;
}

export function renderAdjustment(row: AdjustmentRow): AdjustmentObject {
  return {
    id: row.adjustment_id,
    object: 'adjustment',
    livemode: row.livemode,
    owner: row.owner,
    tenant_id: row.tenant_id,
    subject: row.subject,
    amount: row.amount,
    reason: row.reason,
    term_id: row.term_id,
    created: toUnixSeconds(row.created_at),
  };
}

export interface BookAdjustmentInput {
  /** Positive: paid to the owner; negative: billed. Not 0. */
  readonly amount: number;
  /** `reallocation` or `other`. */
  readonly subject: string;
  /** Why (1 to 500 characters); kept with the adjustment. */
  readonly reason: string;
  /** `merchant` (default), `platform`, or a tenant id of the account and mode. */
  readonly owner?: string;
  /** The operator's idempotency key: the same key books once and returns the first booking. */
  readonly requestKey?: string;
}

/** Resolves the `owner` of an adjustment: `invalid_param_key` for a bad value, `invalid_id` for an unknown tenant. */
async function ownerOf(trx: Kysely<Database>, caller: Pick<Caller, 'accountId' | 'livemode'>, owner: string): Promise<{ owner: AdjustmentRow['owner']; ownerRef: string; tenantId: string | null }> {
  if (owner === 'merchant') return { owner: 'merchant', ownerRef: MERCHANT_OWNER_REF, tenantId: null };
  if (owner === 'platform') return { owner: 'platform', ownerRef: PLATFORM_OWNER_REF, tenantId: null };
  if (!owner.startsWith('ten_')) throw new KessaiError('invalid_param_key', { param: 'owner', message: 'owner must be merchant, platform or a tenant id (ten_...)' });
  // A deleted tenant's balances still settle, so an adjustment may name it.
  await findTenant(trx, caller, owner, 'owner', { deleted: 'accepted' });
  return { owner: 'tenant', ownerRef: owner, tenantId: owner };
}

/**
 * Books an adjustment at the clock's instant into the owner's open term (opened if needed, as a
 * capture would). Bad input is refused with the parameter named and books nothing.
 */
export async function bookAdjustment(ctx: Pick<Context, 'db' | 'clock' | 'ids' | 'testClock'>, caller: Pick<Caller, 'accountId' | 'livemode'>, input: BookAdjustmentInput): Promise<AdjustmentObject> {
  const { amount, subject, reason } = assertAdjustment(input);
  const requestKey = input.requestKey;
  if (requestKey !== undefined && (requestKey.length === 0 || requestKey.length > MAX_TEXT_LENGTH)) {
    throw new KessaiError('invalid_string_length', { param: 'request_key', message: `request_key must be 1 to ${MAX_TEXT_LENGTH} characters` });
  }
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const account = await trx.selectFrom('accounts').select(['account_id', 'term_cycle']).where('account_id', '=', caller.accountId).executeTakeFirst();
    if (!account) throw new KessaiError('invalid_id', { param: 'account', message: `No such account: ${caller.accountId}` });
    const owner = await ownerOf(trx, caller, input.owner ?? 'merchant');
    if (requestKey !== undefined) {
      const earlier = await findByRequestKey(trx, caller, requestKey);
      if (earlier) return sameBooking(earlier, { amount, subject, reason, ownerRef: owner.ownerRef });
    }
    const [termId] = await openTermIdsOpening(trx, ctx.ids, [{ accountId: caller.accountId, livemode: caller.livemode, cycle: account.term_cycle, at: now, testClockId: bookOf(ctx) }]);
    const row = await trx
      .insertInto('adjustments')
      .values({
        account_id: caller.accountId,
        livemode: caller.livemode,
        adjustment_id: ctx.ids.next('adjustment'),
        owner: owner.owner,
        owner_ref: owner.ownerRef,
        tenant_id: owner.tenantId,
        subject,
        amount,
        reason,
        request_key: requestKey ?? null,
        term_id: termId!,
        created_at: now,
      })
      // A racing request with the same key committed first: its booking stands (read below).
      .onConflict((oc) => oc.columns(['account_id', 'livemode', 'request_key']).where('request_key', 'is not', null).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (row) return renderAdjustment(row);
    return sameBooking((await findByRequestKey(trx, caller, requestKey!))!, { amount, subject, reason, ownerRef: owner.ownerRef });
  });
}

async function findByRequestKey(trx: Kysely<Database>, caller: Pick<Caller, 'accountId' | 'livemode'>, requestKey: string): Promise<AdjustmentRow | undefined> {
  return trx.selectFrom('adjustments').selectAll().where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('request_key', '=', requestKey).executeTakeFirst();
}

/** A request key used again: the first booking, if the request is the same; otherwise a refusal. */
function sameBooking(earlier: AdjustmentRow, request: { amount: number; subject: string; reason: string; ownerRef: string }): AdjustmentObject {
  if (earlier.amount !== request.amount || earlier.subject !== request.subject || earlier.reason !== request.reason || earlier.owner_ref !== request.ownerRef) {
    throw new KessaiError('invalid_param_key', { param: 'request_key', message: `request_key was used for another adjustment (${earlier.adjustment_id})` });
  }
  return renderAdjustment(earlier);
}

/** The adjustments of an account and mode, newest first (at most `limit`). */
export async function listAdjustments(ctx: Pick<Context, 'db'>, caller: Pick<Caller, 'accountId' | 'livemode'>, limit = 100): Promise<AdjustmentObject[]> {
  const rows = await ctx.db
    .selectFrom('adjustments')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .orderBy('created_at', 'desc')
    .orderBy('adjustment_id', 'desc')
    .limit(limit)
    .execute();
  return rows.map(renderAdjustment);
}
