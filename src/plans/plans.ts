/**
 * Plans (v1 §2.4, §4.5): what a subscription charges and on which calendar. Create, retrieve,
 * update (name and metadata only), delete (softly, refused while subscribed), list. Every change
 * writes its `plan.*` event in the same transaction (service rules §5).
 */
import type { Caller } from '../accounts/accounts';
import { FLEXIBLE_ID_PATTERN, MAX_DESCRIPTION_LENGTH } from '../customers/customers';
import { FIRST_BILLING_DAY, LAST_BILLING_DAY, PLAN_INTERVALS, type PlanInterval } from '../domain/billing-calendar';
import { reject } from '../domain/errors';
import { createMetadata, mergeMetadata } from '../domain/metadata';
import type { Context } from '../engine/context';
import { recordEvent, type EventInput } from '../events/outbox';
import { defineOperation } from '../operations/define';
import { listObject, PAGINATION_PARAMS, readPage, type ListObject, inPage } from '../operations/pagination';
import { hasParam, optionalInteger, optionalString, readParams, requireString, type Params } from '../operations/params';
import { findPlan, renderPlan, type PlanObject, type PlanRow } from './plan-record';

export const PLANS_URL = '/v1/plans';

/** v1 §4.5 and §8: "Plan amount 50 to 9,999,999 yen". */
export const MIN_PLAN_AMOUNT = 50;
export const MAX_PLAN_AMOUNT = 9_999_999;
/** v1 §8: "Plan trial_days 0 to 365". */
export const MAX_TRIAL_DAYS = 365;
/** v1 §2.4: "currency: jpy only". Lower case only, as the service writes it everywhere. */
export const PLAN_CURRENCY = 'jpy';
/** Longest plan `name`, in characters: the same decision as a customer's description. */
export const MAX_PLAN_NAME_LENGTH = MAX_DESCRIPTION_LENGTH;

/** The deleted-object response (v1 §2.9). */
export type DeletedPlan = { readonly deleted: true; readonly id: string; readonly livemode: boolean };

/** `name` as sent: undefined when absent, null when sent empty (clears it, as customers' fields do). */
function readName(params: Params): string | null | undefined {
  const name = optionalString(params, 'name', { code: 'invalid_string_length' });
  if (name === undefined) return undefined;
  if ([...name].length > MAX_PLAN_NAME_LENGTH) reject('invalid_string_length', 'name', `name must be at most ${MAX_PLAN_NAME_LENGTH} characters`);
  return name === '' ? null : name;
}

/** A required integer: absent is `missing_param`, anything else out of range is `code`. */
function requireInteger(params: Params, key: string, options: { readonly min: number; readonly max: number; readonly code: 'invalid_plan_amount' }): number {
  const value = optionalInteger(params, key, options);
  if (value === undefined) return reject('missing_param', key, `${key} is required`);
  return value;
}

function isPlanInterval(value: string): value is PlanInterval {
  return (PLAN_INTERVALS as readonly string[]).includes(value);
}

function eventOf(caller: Caller, type: string, data: PlanObject, at: Date): EventInput {
  return { accountId: caller.accountId, livemode: caller.livemode, type, data, at };
}

/**
 * `plans.create`: `amount`, `currency`, `interval` (required), `id` (chosen id), `name`,
 * `trial_days`, `billing_day`, `metadata`. Checked in that order, so one bad request always gives
 * the same error.
 *
 * `billing_day` on a yearly plan is accepted and stored: v1 §4.5 says "A yearly plan with
 * billing_day can be created but fails when used for a subscription", and service rules §1.3 names
 * that failure `invalid_plan` (assertSubscribablePlan). The catalogue's
 * `billing_day_for_non_monthly_plan` would contradict the first sentence here and the second at
 * subscription time, so kessai raises it nowhere (docs/decisions.md).
 */
export async function createPlan(ctx: Context, caller: Caller, input: unknown): Promise<PlanObject> {
  const params = readParams(input, ['amount', 'currency', 'interval', 'id', 'name', 'trial_days', 'billing_day', 'metadata']);
  const amount = requireInteger(params, 'amount', { min: MIN_PLAN_AMOUNT, max: MAX_PLAN_AMOUNT, code: 'invalid_plan_amount' });
  const currency = requireString(params, 'currency', { code: 'invalid_currency' });
  if (currency !== PLAN_CURRENCY) reject('invalid_currency', 'currency', `currency must be ${PLAN_CURRENCY}, got ${JSON.stringify(currency)}`);
  const interval = requireString(params, 'interval', { code: 'invalid_interval' });
  if (!isPlanInterval(interval)) return reject('invalid_interval', 'interval', `interval must be month or year, got ${JSON.stringify(interval)}`);
  const chosenId = optionalString(params, 'id', { code: 'invalid_flexible_id' });
  if (chosenId !== undefined && !FLEXIBLE_ID_PATTERN.test(chosenId)) {
    reject('invalid_flexible_id', 'id', 'id must be 1 to 100 half-width letters, digits, underscores or hyphens');
  }
  const name = readName(params) ?? null;
  const trialDays = optionalInteger(params, 'trial_days', { min: 0, max: MAX_TRIAL_DAYS, code: 'invalid_trial_days' }) ?? 0;
  const billingDay = optionalInteger(params, 'billing_day', { min: FIRST_BILLING_DAY, max: LAST_BILLING_DAY, code: 'invalid_billing_day' }) ?? null;
  const metadata = hasParam(params, 'metadata') ? (createMetadata(params.metadata, 'v1') as Record<string, string>) : {};
  const now = ctx.clock.now();
  const planId = chosenId ?? ctx.ids.next('plan');
  return ctx.db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('plans')
      .values({
        account_id: caller.accountId,
        livemode: caller.livemode,
        plan_id: planId,
        amount,
        currency,
        interval,
        name,
        trial_days: trialDays,
        billing_day: billingDay,
        metadata: JSON.stringify(metadata),
        created_at: now,
        updated_at: now,
      })
      // A soft-deleted plan keeps its id, so a chosen id is never reused (its subscriptions' charges name it).
      .onConflict((oc) => oc.columns(['account_id', 'livemode', 'plan_id']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!row) return reject('already_exist_id', 'id', `Plan ${planId} already exists.`);
    const plan = renderPlan(row);
    await recordEvent(trx, ctx.ids, eventOf(caller, 'plan.created', plan, now));
    return plan;
  });
}

export async function retrievePlan(ctx: Context, caller: Caller, input: unknown): Promise<PlanObject> {
  const params = readParams(input, ['id']);
  return renderPlan(await findPlan(ctx.db, caller, requireString(params, 'id'), 'id'));
}

/**
 * `plans.update`: `name` and `metadata` only (v1 §4.5); amount, interval and the calendar of a plan
 * are fixed, because subscriptions already bill by them. Any other parameter is `invalid_param_key`
 * naming it.
 */
export async function updatePlan(ctx: Context, caller: Caller, input: unknown): Promise<PlanObject> {
  const params = readParams(input, ['id', 'name', 'metadata']);
  const planId = requireString(params, 'id');
  const name = readName(params);
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findPlan(trx, caller, planId, 'id', true);
    const metadata = hasParam(params, 'metadata') ? (mergeMetadata(current.metadata, params.metadata, 'v1') as Record<string, string>) : current.metadata;
    const changes = { ...(name === undefined ? {} : { name }), updated_at: now };
    await trx
      .updateTable('plans')
      .set({ ...changes, metadata: JSON.stringify(metadata) })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('plan_id', '=', planId)
      .execute();
    const plan = renderPlan({ ...current, ...changes, metadata } satisfies PlanRow);
    await recordEvent(trx, ctx.ids, eventOf(caller, 'plan.updated', plan, now));
    return plan;
  });
}

/**
 * `plans.delete`: refused with `exist_subscribers` while any subscription that is not deleted
 * names the plan, as its plan or as its `next_cycle_plan` (service rules §1.6: "A plan with
 * subscribers (not deleted) cannot be deleted"; a canceled or paused subscription still counts
 * until it is deleted). Otherwise the plan is deleted softly and `plan.deleted` carries the plan as
 * it was.
 */
export async function deletePlan(ctx: Context, caller: Caller, input: unknown): Promise<DeletedPlan> {
  const params = readParams(input, ['id']);
  const planId = requireString(params, 'id');
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    // Locked before the subscriber check: see findPlan for the other half of this protocol.
    const current = await findPlan(trx, caller, planId, 'id', true);
    const subscriber = await trx
      .selectFrom('subscriptions')
      .select('subscription_id')
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('deleted_at', 'is', null)
      .where((eb) => eb.or([eb('plan_id', '=', planId), eb('next_cycle_plan_id', '=', planId)]))
      .limit(1)
      .executeTakeFirst();
    if (subscriber) return reject('exist_subscribers', 'id', `Plan ${planId} has subscribers (for example ${subscriber.subscription_id}) and cannot be deleted.`);
    await trx
      .updateTable('plans')
      .set({ deleted_at: now, updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('plan_id', '=', planId)
      .execute();
    await recordEvent(trx, ctx.ids, eventOf(caller, 'plan.deleted', renderPlan(current), now));
    return { deleted: true, id: planId, livemode: caller.livemode } as const;
  });
}

/** `plans.list`: pagination (v1 §4.1), newest first, ties broken by id (descending). */
export async function listPlans(ctx: Context, caller: Caller, input: unknown): Promise<ListObject<PlanObject>> {
  const params = readParams(input, PAGINATION_PARAMS);
  const page = readPage(params);
  const rows = await ctx.db
    .selectFrom('plans')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('deleted_at', 'is', null)
    .$call(inPage(page, 'plan_id'))
    .execute();
  return listObject(rows.map(renderPlan), page, PLANS_URL);
}

export const PLAN_OPERATIONS = [
  defineOperation('plans.create', createPlan),
  defineOperation('plans.retrieve', retrievePlan),
  defineOperation('plans.update', updatePlan),
  defineOperation('plans.delete', deletePlan),
  defineOperation('plans.list', listPlans),
] as const;
