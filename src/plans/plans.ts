/**
 * Plans (v1 §2.4, §4.5): what a subscription charges and on which calendar. Create, retrieve,
 * update (name and metadata only), delete (softly, refused while subscribed), list. Every change
 * writes its `plan.*` event in the same transaction (service rules §5).
 */
import type { Caller } from '../accounts/accounts';
import { PLAN_INTERVALS, type PlanInterval } from '../domain/billing-calendar';
import { reject } from '../domain/errors';
import { mergeMetadata, type MetadataFlavour } from '../domain/metadata';
import type { Context } from '../engine/context';
import { recordEvent, type EventInput } from '../events/outbox';
import { inPage, type Page } from '../operations/pagination';
import { findPlan, renderPlan, type PlanObject, type PlanRow } from './plan-record';

export const PLANS_URL = '/v1/plans';

/** v1 §2.4: "currency: jpy only". Lower case only, as the service writes it everywhere. */
export const PLAN_CURRENCY = 'jpy';

/** The deleted-object response (v1 §2.9). */
export type DeletedPlan = { readonly deleted: true; readonly id: string; readonly livemode: boolean };

export function isPlanInterval(value: string): value is PlanInterval {
  return (PLAN_INTERVALS as readonly string[]).includes(value);
}

function eventOf(caller: Caller, type: string, data: PlanObject, at: Date): EventInput {
  return { accountId: caller.accountId, livemode: caller.livemode, type, data, at };
}

/** `plans.create` as a command: every value checked by the codec that built it. */
export interface CreatePlanCommand {
  readonly amount: number;
  readonly currency: typeof PLAN_CURRENCY;
  readonly interval: PlanInterval;
  /** A chosen id, or undefined for a generated one. */
  readonly id: string | undefined;
  readonly name: string | null;
  readonly trialDays: number;
  readonly billingDay: number | null;
  readonly metadata: Readonly<Record<string, string>>;
}

/**
 * Creates a plan and writes `plan.created`. A chosen id already taken is `already_exist_id`.
 *
 * `billing_day` on a yearly plan is accepted and stored: v1 §4.5 says "A yearly plan with
 * billing_day can be created but fails when used for a subscription", and service rules §1.3 names
 * that failure `invalid_plan` (assertSubscribablePlan). The catalogue's
 * `billing_day_for_non_monthly_plan` would contradict the first sentence here and the second at
 * subscription time, so kessai raises it nowhere (docs/decisions/subscriptions.md, "Plans").
 */
export async function createPlan(ctx: Context, caller: Caller, command: CreatePlanCommand): Promise<PlanRow> {
  const now = ctx.clock.now();
  const planId = command.id ?? ctx.ids.next('plan');
  return ctx.db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('plans')
      .values({
        account_id: caller.accountId,
        livemode: caller.livemode,
        plan_id: planId,
        amount: command.amount,
        currency: command.currency,
        interval: command.interval,
        name: command.name,
        trial_days: command.trialDays,
        billing_day: command.billingDay,
        metadata: JSON.stringify(command.metadata),
        created_at: now,
        updated_at: now,
      })
      // A soft-deleted plan keeps its id, so a chosen id is never reused (its subscriptions' charges name it).
      .onConflict((oc) => oc.columns(['account_id', 'livemode', 'plan_id']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!row) return reject('already_exist_id', 'id', `Plan ${planId} already exists.`);
    await recordEvent(trx, ctx.ids, eventOf(caller, 'plan.created', renderPlan(row), now));
    return row;
  });
}

export async function retrievePlan(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<PlanRow> {
  return findPlan(ctx.db, caller, command.id, 'id');
}

/** `plans.update` as a command: `name` (null clears it) and a metadata change under its API's rules. */
export interface UpdatePlanCommand {
  readonly id: string;
  readonly name: string | null | undefined;
  /** The metadata parameter as sent, merged into the stored metadata by `flavour`'s rules. */
  readonly metadata: { readonly update: unknown; readonly flavour: MetadataFlavour } | undefined;
}

/**
 * Changes `name` and `metadata` only (v1 §4.5); amount, interval and the calendar of a plan are
 * fixed, because subscriptions already bill by them.
 */
export async function updatePlan(ctx: Context, caller: Caller, command: UpdatePlanCommand): Promise<PlanRow> {
  const { id: planId, name } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findPlan(trx, caller, planId, 'id', true);
    const metadata = command.metadata === undefined ? current.metadata : (mergeMetadata(current.metadata, command.metadata.update, command.metadata.flavour) as Record<string, string>);
    const changes = { ...(name === undefined ? {} : { name }), updated_at: now };
    await trx
      .updateTable('plans')
      .set({ ...changes, metadata: JSON.stringify(metadata) })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('plan_id', '=', planId)
      .execute();
    const row = { ...current, ...changes, metadata } satisfies PlanRow;
    await recordEvent(trx, ctx.ids, eventOf(caller, 'plan.updated', renderPlan(row), now));
    return row;
  });
}

/**
 * `plans.delete`: refused with `exist_subscribers` while any subscription that is not deleted
 * names the plan, as its plan or as its `next_cycle_plan` (service rules §1.6: "A plan with
 * subscribers (not deleted) cannot be deleted"; a canceled or paused subscription still counts
 * until it is deleted). Otherwise the plan is deleted softly and `plan.deleted` carries the plan as
 * it was.
 */
export async function deletePlan(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<DeletedPlan> {
  const planId = command.id;
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

/** One page of plans (v1 §4.1), newest first, ties broken by id (descending), one past the limit. */
export async function listPlans(ctx: Context, caller: Caller, page: Page): Promise<PlanRow[]> {
  const rows = await ctx.db
    .selectFrom('plans')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('deleted_at', 'is', null)
    .$call(inPage(page, 'plan_id'))
    .execute();
  return rows;
}
