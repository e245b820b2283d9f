/**
 * Finding and rendering a plan row of the caller's account and mode. Shared by the plan operations
 * and by subscriptions, which embed the plan object (v1 §2.5) and bill by its amount and calendar.
 * A deleted plan is not found: it exists only for the history of the subscriptions and charges
 * that named it.
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database, PlansTable } from '../db/schema';
import { reject } from '../domain/errors';
import { toUnixSeconds } from '../domain/time';

export type PlanRow = Selectable<PlansTable>;

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type PlanObject = {
  readonly id: string;
  readonly object: 'plan';
  readonly livemode: boolean;
  readonly created: number;
  readonly amount: number;
  readonly currency: string;
  readonly interval: 'month' | 'year';
  readonly name: string | null;
  readonly trial_days: number;
  /**
   * As stored: a yearly plan created with billing_day shows it (v1 §4.5 lets it be created), so the
   * merchant can see why subscribing to it fails with `invalid_plan`.
   */
  readonly billing_day: number | null;
  readonly metadata: Readonly<Record<string, string>>;
};

export function renderPlan(row: PlanRow): PlanObject {
  return {
    id: row.plan_id,
    object: 'plan',
    livemode: row.livemode,
    created: toUnixSeconds(row.created_at),
    amount: row.amount,
    currency: row.currency,
    interval: row.interval,
    name: row.name,
    trial_days: row.trial_days,
    billing_day: row.billing_day,
    metadata: row.metadata,
  };
}

/**
 * The plan, locked FOR UPDATE when `lock` is set. plans.delete locks it before looking for
 * subscribers, so anything that attaches a subscription to a plan (create, plan change,
 * next_cycle_plan) must find the plan with `lock` too: then either the delete sees the new
 * subscription, or the attach waits for the delete and finds the plan gone.
 * Unknown or deleted: `invalid_id` naming `param` (404, "No such plan: pln_x").
 */
export async function findPlan(executor: Kysely<Database>, caller: Caller, planId: string, param: string, lock: boolean | 'share' = false): Promise<PlanRow> {
  let query = executor
    .selectFrom('plans')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('plan_id', '=', planId)
    .where('deleted_at', 'is', null);
  // 'share' for code that attaches the plan to a subscription (blocks plans.delete, not other
  // subscribers); true (FOR UPDATE) for changing or deleting the plan itself.
  if (lock === 'share') query = query.forShare();
  else if (lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) return reject('invalid_id', param, `No such plan: ${planId}`);
  return row;
}
