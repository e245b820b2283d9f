/**
 * Reading and writing subscription rows for the subscription operations: finding one, rendering
 * one or a page of them with their embedded plans, and storing a changed row with its `renews_at`.
 */
import type { Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { CardRow } from '../customers/card-object';
import type { Database } from '../db/schema';
import { assertSubscribablePlan } from '../domain/billing-calendar';
import { KessaiError, reject } from '../domain/errors';
import type { SubscribablePlan } from '../domain/proration';
import { renderPlan, type PlanRow } from '../plans/plan-record';
import { renderSubscription, renewsAt, type SubscriptionObject, type SubscriptionRow } from './subscription-object';

/**
 * The subscription, locked FOR UPDATE when `lock` is set: every operation that changes a
 * subscription locks it first, so it never races the renewal job or another call on the same row.
 * Unknown or deleted: `invalid_id` naming `param`. With `customerId`, a subscription of another
 * customer is unknown too (v1 §4.4 retrieves through the customer's path).
 */
export async function findSubscription(
  executor: Kysely<Database>,
  caller: Caller,
  subscriptionId: string,
  param: string,
  options: { readonly lock?: boolean; readonly customerId?: string } = {},
): Promise<SubscriptionRow> {
  let query = executor
    .selectFrom('subscriptions')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('subscription_id', '=', subscriptionId)
    .where('deleted_at', 'is', null);
  if (options.customerId !== undefined) query = query.where('customer_id', '=', options.customerId);
  if (options.lock === true) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) return reject('invalid_id', param, `No such subscription: ${subscriptionId}`);
  return row;
}

/**
 * The plan rows a set of subscriptions names, deleted ones included: a deleted subscription's
 * event still shows the plan it had. One query for a whole page.
 */
async function plansById(executor: Kysely<Database>, caller: Caller, planIds: readonly string[]): Promise<Map<string, PlanRow>> {
  const unique = [...new Set(planIds)];
  if (unique.length === 0) return new Map();
  const rows = await executor
    .selectFrom('plans')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('plan_id', 'in', unique)
    .execute();
  return new Map(rows.map((row) => [row.plan_id, row]));
}

/** A subscription as an operation returns it: its row and the plans it names (v1 §2.5 embeds them). */
export interface SubscriptionWithPlans {
  readonly row: SubscriptionRow;
  readonly plan: PlanRow;
  readonly nextCyclePlan: PlanRow | null;
}

/** The one renderer of a subscription, over what an operation returns. */
export function renderSubscriptionWithPlans(subscription: SubscriptionWithPlans): SubscriptionObject {
  const { row, plan, nextCyclePlan } = subscription;
  return renderSubscription(row, renderPlan(plan), nextCyclePlan === null ? null : renderPlan(nextCyclePlan));
}

/** Subscription rows with the plans they name, in the order given, the plans loaded in one query. */
export async function withPlans(executor: Kysely<Database>, caller: Caller, rows: readonly SubscriptionRow[]): Promise<SubscriptionWithPlans[]> {
  const plans = await plansById(executor, caller, rows.flatMap((row) => (row.next_cycle_plan_id === null ? [row.plan_id] : [row.plan_id, row.next_cycle_plan_id])));
  const planRow = (planId: string): PlanRow => {
    const plan = plans.get(planId);
    // Plans are deleted softly and never while subscribed, so a missing row is corrupt data.
    if (!plan) throw new Error(`subscription names plan ${planId}, which does not exist`);
    return plan;
  };
  return rows.map((row) => ({ row, plan: planRow(row.plan_id), nextCyclePlan: row.next_cycle_plan_id === null ? null : planRow(row.next_cycle_plan_id) }));
}

export async function subscriptionWithPlans(executor: Kysely<Database>, caller: Caller, row: SubscriptionRow): Promise<SubscriptionWithPlans> {
  const [subscription] = await withPlans(executor, caller, [row]);
  return subscription!;
}

/** The v1 objects of subscription rows, in the order given, with their plans loaded in one query. */
export async function subscriptionObjects(executor: Kysely<Database>, caller: Caller, rows: readonly SubscriptionRow[]): Promise<SubscriptionObject[]> {
  return (await withPlans(executor, caller, rows)).map(renderSubscriptionWithPlans);
}

/**
 * Stores every changeable column of `row`, and `renews_at` computed from it: the renewal job finds
 * its work by that column, so no write may leave it stale.
 */
export async function storeSubscription(trx: Kysely<Database>, row: SubscriptionRow): Promise<SubscriptionRow> {
  const stored: SubscriptionRow = { ...row, renews_at: renewsAt(row) };
  await trx
    .updateTable('subscriptions')
    .set({
      plan_id: stored.plan_id,
      next_cycle_plan_id: stored.next_cycle_plan_id,
      status: stored.status,
      prorate: stored.prorate,
      current_period_start: stored.current_period_start,
      current_period_end: stored.current_period_end,
      trial_start: stored.trial_start,
      trial_end: stored.trial_end,
      paused_at: stored.paused_at,
      canceled_at: stored.canceled_at,
      resumed_at: stored.resumed_at,
      renews_at: stored.renews_at,
      last_charge_id: stored.last_charge_id,
      metadata: JSON.stringify(stored.metadata),
      updated_at: stored.updated_at,
      deleted_at: stored.deleted_at,
    })
    .where('account_id', '=', stored.account_id)
    .where('livemode', '=', stored.livemode)
    .where('subscription_id', '=', stored.subscription_id)
    .execute();
  return stored;
}

/** A plan row as the billing rules see it. */
export function subscribablePlanOf(row: PlanRow): SubscribablePlan {
  return { interval: row.interval, billingDay: row.billing_day, amount: row.amount, trialDays: row.trial_days };
}

/**
 * §1.3 `invalid_plan` (a yearly plan with billing_day), naming the parameter that chose the plan:
 * `plan` on create and plan change, `next_cycle_plan` when it is scheduled.
 */
export function assertSubscribableAs(plan: PlanRow, param: string): SubscribablePlan {
  const subscribable = subscribablePlanOf(plan);
  try {
    assertSubscribablePlan(subscribable);
  } catch (error) {
    if (error instanceof KessaiError) throw new KessaiError(error.code, { param, message: `Plan ${plan.plan_id}: ${error.message}` });
    throw error;
  }
  return subscribable;
}

/**
 * The customer's default card, or undefined when it has none (or the customer is deleted). Charges
 * of a subscription always go to the customer's current default card.
 */
export async function defaultCardOf(executor: Kysely<Database>, caller: Caller, customerId: string): Promise<CardRow | undefined> {
  return executor
    .selectFrom('customers as cu')
    .innerJoin('cards as card', (join) =>
      join.onRef('card.account_id', '=', 'cu.account_id').onRef('card.livemode', '=', 'cu.livemode').onRef('card.card_id', '=', 'cu.default_card_id'),
    )
    .selectAll('card')
    .where('cu.account_id', '=', caller.accountId)
    .where('cu.livemode', '=', caller.livemode)
    .where('cu.customer_id', '=', customerId)
    .where('cu.deleted_at', 'is', null)
    .where('card.account_id', '=', caller.accountId)
    .where('card.deleted_at', 'is', null)
    .executeTakeFirst();
}

/**
 * §1.3 **Decision**: a customer may not hold two subscriptions to the same plan that are not
 * deleted (`already_subscribed`). The caller holds the customer row locked, which serialises the
 * check with every other create or plan change of the customer. Not a unique index: the renewal
 * job's next_cycle_plan switch must always succeed, even onto a plan the customer holds.
 */
export async function assertNotSubscribed(trx: Kysely<Database>, caller: Caller, customerId: string, planId: string, param: string, except?: string): Promise<void> {
  const existing = await trx
    .selectFrom('subscriptions')
    .select('subscription_id')
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('customer_id', '=', customerId)
    .where('plan_id', '=', planId)
    .where('deleted_at', 'is', null)
    .$if(except !== undefined, (q) => q.where('subscription_id', '!=', except!))
    .limit(1)
    .executeTakeFirst();
  if (existing) reject('already_subscribed', param, `Customer ${customerId} is already subscribed to plan ${planId} (${existing.subscription_id}).`);
}
