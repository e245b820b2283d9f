/**
 * Subscriptions (v1 §2.5, §3.2, §4.6; service rules §1): create, retrieve, list, update (trial,
 * plan change, next_cycle_plan, metadata), pause, resume, cancel, delete. Renewals, trial ends and
 * the deletion of canceled subscriptions at period end are the renewal job's (./renewals).
 *
 * The operations are typed commands with their execution; the v1 codec
 * (src/api/v1/subscriptions.ts) reads the parameters and renders the results. Every operation
 * checks everything before it writes, so a rejected call changes nothing. The one exception is a
 * declined card: the failed charge row and its `charge.failed` event are kept and the subscription
 * is left as it was ("charge first", §1.3). An operation that charges (create, a plan change,
 * resume) holds no row lock while the card network answers: it decides and claims under its locks,
 * asks the network with no transaction open, and decides again and records under its locks
 * (claimedCharge, src/engine/network-claims.ts); the others run in one transaction.
 * Lock order, everywhere: subscription, then customer, then plan.
 */
import type { Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { findCharge } from '../charges/charge-record';
import type { CardRow } from '../customers/card-object';
import type { DeletedObject } from '../customers/cards';
import { findCustomer } from '../customers/customer-record';
import type { SubscriptionStatus } from '../db/column-types';
import type { Database } from '../db/schema';
import { trialFor, type TrialEndRequest } from '../domain/billing-calendar';
import { reject } from '../domain/errors';
import { mergeMetadata, type MetadataFlavour } from '../domain/metadata';
import { planCreation, planTrialEnd, proratedPlanChangeCharge, type CreationPlan, type SubscribablePlan } from '../domain/proration';
import type { Context } from '../engine/context';
import { answeredNetwork, runClaimed, STALE, takeNetworkClaim, type ClaimedObject } from '../engine/network-claims';
import { recordEvent, type EventInput } from '../events/outbox';
import { inPage, type Page } from '../operations/pagination';
import type { AuthorizationRequest } from '../processor/card-network';
import { findPlan } from '../plans/plan-record';
import { chargeSubscription, refundRemainder, settle, subscriptionAuthorization, type RefundRequest, type Settled, type SubscriptionChargeRequest } from './subscription-charges';
import { renewsAt, type SubscriptionObject, type SubscriptionRow } from './subscription-object';
import {
  assertNotSubscribed,
  assertSubscribableAs,
  defaultCardOf,
  findSubscription,
  renderSubscriptionWithPlans,
  storeSubscription,
  subscribablePlanOf,
  subscriptionWithPlans,
  withPlans,
  type SubscriptionWithPlans,
} from './subscription-record';

export const SUBSCRIPTIONS_URL = '/v1/subscriptions';

export const SUBSCRIPTION_STATUSES: readonly SubscriptionStatus[] = ['trial', 'active', 'canceled', 'paused'];

function eventOf(caller: Caller, type: string, data: SubscriptionObject, at: Date): EventInput {
  return { accountId: caller.accountId, livemode: caller.livemode, type, data, at };
}

/** The customer's default card, which every subscription charge uses; `doesnt_have_card` without one. */
async function requireDefaultCard(trx: Kysely<Database>, caller: Caller, customerId: string, param: string | undefined): Promise<CardRow> {
  const card = await defaultCardOf(trx, caller, customerId);
  if (!card) return reject('doesnt_have_card', param, `Customer ${customerId} has no default card.`);
  return card;
}

/** The plan a subscription is on now (never deleted while subscribed, so always found). */
async function currentPlan(trx: Kysely<Database>, caller: Caller, row: SubscriptionRow): Promise<SubscribablePlan> {
  return subscribablePlanOf(await findPlan(trx, caller, row.plan_id, 'plan'));
}

/**
 * Takes the customer's row lock without requiring the customer to be live: a plan change of a
 * deleted customer's subscription must still serialise with other plan changes.
 */
async function lockCustomer(trx: Kysely<Database>, caller: Caller, customerId: string): Promise<void> {
  await trx
    .selectFrom('customers')
    .select('customer_id')
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('customer_id', '=', customerId)
    .forUpdate()
    .execute();
}

/** A charge an operation makes now, the period it pays for, and the paid charge already holding that period start (if any). */
type ChargeNow = { readonly amount: number; readonly periodStart: Date; readonly follows?: string };

/**
 * Makes `charge` (if any) at `at` and returns the row with `last_charge_id` set, or the decline.
 * `at` is the operation's `now`, read once, so the charge instant and the period start agree. The
 * row is not written here: on a decline the caller returns without writing it.
 */
async function chargeFirst(
  trx: Kysely<Database>,
  ctx: Context,
  caller: Caller,
  row: SubscriptionRow,
  card: CardRow | undefined,
  charge: ChargeNow | null,
  at: Date,
): Promise<Settled<SubscriptionRow>> {
  if (charge === null || charge.amount <= 0) return { done: row };
  if (card === undefined) throw new Error('a charge needs the card looked up before it');
  const outcome = await chargeSubscription(trx, ctx, chargeRequest(caller, row, card, charge, at));
  if (outcome.status === 'declined') return { declined: outcome.error };
  return { done: { ...row, last_charge_id: outcome.row.charge_id } };
}

function chargeRequest(caller: Caller, row: SubscriptionRow, card: CardRow, charge: ChargeNow, at: Date): SubscriptionChargeRequest {
  return { caller, customerId: row.customer_id, card, amount: charge.amount, at, subscriptionId: row.subscription_id, periodStart: charge.periodStart, ...(charge.follows === undefined ? {} : { follows: charge.follows }) };
}

/**
 * What a charging operation decided under its locks: the row it writes, the charge it makes first
 * (null: none) with the card, its instant, and how it writes the row once charged.
 */
interface Decision<T> {
  readonly row: SubscriptionRow;
  readonly card: CardRow | undefined;
  readonly charge: ChargeNow | null;
  readonly now: Date;
  readonly write: (trx: Kysely<Database>, row: SubscriptionRow) => Promise<T>;
}

/** The authorization a decision asks the network for, or null when it charges nothing. */
function authorizationOfDecision<T>(caller: Caller, decision: Decision<T>): AuthorizationRequest | null {
  const { row, card, charge, now } = decision;
  if (charge === null || charge.amount <= 0 || card === undefined) return null;
  return subscriptionAuthorization(chargeRequest(caller, row, card, charge, now));
}

/**
 * The decision with its charge marked as following the subscription's last charge when that one is
 * paid and began the same period: an operation at the instant a period was charged (on a frozen
 * test clock, a plan change right after subscribing or after an advance to a renewal). Such a
 * change is answered like the same change a moment later: the new charge is made and the earlier
 * one stands; the period's key stays with the earlier one.
 */
async function withFollows<T>(trx: Kysely<Database>, caller: Caller, decision: Decision<T>): Promise<Decision<T>> {
  const { charge, row } = decision;
  if (charge === null || charge.amount <= 0 || row.last_charge_id === null) return decision;
  const last = await findCharge(trx, caller, row.last_charge_id);
  if (!last.paid || (last.period_start ?? last.created_at).getTime() !== charge.periodStart.getTime()) return decision;
  return { ...decision, charge: { ...charge, follows: row.last_charge_id } };
}

/**
 * A subscription operation that may charge first, with no row lock held while the card network
 * answers (src/engine/network-claims.ts): `decide` runs in the claim step, under the operation's
 * locks, with `at` undefined (it reads the clock after its locks); without a charge the decision is
 * written at once; with one, `object` is claimed with the authorization as the recovery point and
 * the network asked with no transaction open. The record step decides again under the locks at
 * the claim's instant: if it asks for the same authorization the charge is written from the
 * network's answer (a decline keeps its failed charge and leaves the subscription as it was), else
 * the approval is released and the operation starts again; a refusal found then releases it too.
 */
async function claimedCharge<T>(
  ctx: Context,
  caller: Caller,
  object: ClaimedObject,
  operation: string,
  busyParam: string,
  decide: (trx: Kysely<Database>, at: Date | undefined) => Promise<Decision<T>>,
): Promise<T> {
  const result = await runClaimed<AuthorizationRequest, Settled<T>>(
    ctx,
    {
      claim: async (trx) => {
        const decision = await withFollows(trx, caller, await decide(trx, undefined));
        const authorization = authorizationOfDecision(caller, decision);
        if (authorization === null) return { done: { done: await decision.write(trx, decision.row) } };
        const claim = await takeNetworkClaim(trx, object, operation, decision.now, { authorizations: [authorization] });
        return { claim, authorizations: [authorization], plan: authorization };
      },
      record: async (trx, asked, answers, claim) => {
        const decision = await withFollows(trx, caller, await decide(trx, claim.claimedAt));
        const authorization = authorizationOfDecision(caller, decision);
        if (authorization === null || JSON.stringify(authorization) !== JSON.stringify(asked)) return STALE;
        const answered = { ...ctx, processor: answeredNetwork(ctx.processor, [asked], answers) };
        const charged = await chargeFirst(trx, answered, caller, decision.row, decision.card, decision.charge, decision.now);
        if ('declined' in charged) return charged;
        return { done: await decision.write(trx, charged.done) };
      },
    },
    busyParam,
  );
  return settle(result);
}

/** Stores a changed subscription and writes its event; returns the subscription the API answers with. */
async function commitChange(trx: Kysely<Database>, ctx: Context, caller: Caller, row: SubscriptionRow, eventType: string, at: Date): Promise<SubscriptionWithPlans> {
  const stored = await storeSubscription(trx, row);
  const subscription = await subscriptionWithPlans(trx, caller, stored);
  await recordEvent(trx, ctx.ids, eventOf(caller, eventType, renderSubscriptionWithPlans(subscription), at));
  return subscription;
}

/** `subscriptions.create` as a command: every value checked by the codec that built it. */
export interface CreateSubscriptionCommand {
  readonly customerId: string;
  readonly planId: string;
  readonly trialEnd: TrialEndRequest;
  readonly prorate: boolean | undefined;
  readonly metadata: Record<string, string>;
}

/** A new subscription row as §1.3 plans it, before its first charge and `renews_at`. */
export function subscriptionDraft(
  caller: Caller,
  subscriptionId: string,
  customerId: string,
  planId: string,
  creation: CreationPlan,
  metadata: Record<string, string>,
  now: Date,
): SubscriptionRow {
  return {
    account_id: caller.accountId,
    livemode: caller.livemode,
    subscription_id: subscriptionId,
    customer_id: customerId,
    plan_id: planId,
    next_cycle_plan_id: null,
    status: creation.status,
    prorate: creation.prorate,
    start_at: now,
    current_period_start: creation.currentPeriodStart,
    current_period_end: creation.currentPeriodEnd,
    trial_start: creation.trialStart,
    trial_end: creation.trialEnd,
    paused_at: null,
    canceled_at: null,
    resumed_at: null,
    renews_at: null,
    last_charge_id: null,
    metadata,
    created_at: now,
    updated_at: now,
    deleted_at: null,
  };
}

/**
 * `subscriptions.create` (service rules §1.3): `customer`*, `plan`*, `trial_end`, `prorate`,
 * `metadata`. Checks, in order: the customer and plan exist, the plan is subscribable
 * (`invalid_plan`), `trial_end`, a default card (`doesnt_have_card`), no second subscription to
 * the plan (`already_subscribed`). Then the first charge, if §1.3 makes one now; declined, nothing
 * is created and the call fails with the card error.
 */
export async function createSubscription(ctx: Context, caller: Caller, command: CreateSubscriptionCommand): Promise<SubscriptionWithPlans> {
  const { customerId, planId, trialEnd, prorate, metadata } = command;
  // The claim is on the customer: like its row lock, it serialises the already_subscribed check.
  const customer: ClaimedObject = { accountId: caller.accountId, livemode: caller.livemode, resource: 'customer', resourceId: customerId };
  let subscriptionId: string | undefined;
  return claimedCharge(ctx, caller, customer, 'subscriptions.create', 'customer', async (trx, at) => {
    // The customer lock serialises the already_subscribed check; the plan lock (shared: subscribers
    // do not wait on each other, and no two plan locks can deadlock) keeps plans.delete out.
    await findCustomer(trx, caller, customerId, 'customer', true);
    const now = at ?? ctx.clock.now();
    const planRow = await findPlan(trx, caller, planId, 'plan', 'share');
    const plan = assertSubscribableAs(planRow, 'plan');
    const creation = planCreation({ plan, now, trialEnd, prorate });
    const card = await requireDefaultCard(trx, caller, customerId, 'customer');
    await assertNotSubscribed(trx, caller, customerId, planId, 'plan');
    // Drawn once: the record step decides again for the same subscription (its charge's reference).
    if (at === undefined) subscriptionId = ctx.ids.next('subscription');
    const draft = subscriptionDraft(caller, subscriptionId!, customerId, planId, creation, metadata, now);
    return {
      row: draft,
      card,
      charge: creation.chargeNow === null ? null : { amount: creation.chargeNow, periodStart: creation.currentPeriodStart },
      now,
      write: async (trx, charged) => {
        const row: SubscriptionRow = { ...charged, renews_at: renewsAt(charged) };
        await trx
          .insertInto('subscriptions')
          .values({ ...row, metadata: JSON.stringify(row.metadata) })
          .execute();
        const subscription = await subscriptionWithPlans(trx, caller, row);
        await recordEvent(trx, ctx.ids, eventOf(caller, 'subscription.created', renderSubscriptionWithPlans(subscription), now));
        return subscription;
      },
    };
  });
}

/** `subscriptions.retrieve` as a command: with `customerId`, a subscription of another customer is unknown. */
export interface RetrieveSubscriptionCommand {
  readonly id: string;
  readonly customerId: string | undefined;
}

export async function retrieveSubscription(ctx: Context, caller: Caller, command: RetrieveSubscriptionCommand): Promise<SubscriptionWithPlans> {
  const { id, customerId } = command;
  const row = await findSubscription(ctx.db, caller, id, 'id', customerId === undefined ? {} : { customerId });
  return subscriptionWithPlans(ctx.db, caller, row);
}

/** `subscriptions.list` as a command: one page (v1 §4.1) and the filters, each undefined when not sent. */
export interface ListSubscriptionsCommand {
  readonly page: Page;
  readonly planId: string | undefined;
  readonly customerId: string | undefined;
  readonly status: SubscriptionStatus | undefined;
}

/**
 * `subscriptions.list`: one page of the subscriptions the filters select, newest first, ties broken
 * by id (descending), one past the limit.
 */
export async function listSubscriptions(ctx: Context, caller: Caller, command: ListSubscriptionsCommand): Promise<SubscriptionWithPlans[]> {
  const { page, planId, customerId, status } = command;
  const rows = await ctx.db
    .selectFrom('subscriptions')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('deleted_at', 'is', null)
    .$if(planId !== undefined, (q) => q.where('plan_id', '=', planId!))
    .$if(customerId !== undefined, (q) => q.where('customer_id', '=', customerId!))
    .$if(status !== undefined, (q) => q.where('status', '=', status!))
    .$call(inPage(page, 'subscription_id'))
    .execute();
  return withPlans(ctx.db, caller, rows);
}

/** `subscriptions.update` as a command: each change undefined when not sent. */
export interface UpdateSubscriptionCommand {
  readonly id: string;
  readonly trialEnd: TrialEndRequest;
  /** The new plan's id. */
  readonly planId: string | undefined;
  readonly prorate: boolean | undefined;
  /** A plan id to switch to at the next renewal, or `''` to clear it. */
  readonly nextCyclePlanId: string | undefined;
  /** The metadata parameter as sent, merged into the stored metadata by `flavour`'s rules. */
  readonly metadata: { readonly update: unknown; readonly flavour: MetadataFlavour } | undefined;
}

/**
 * `subscriptions.update`: `trial_end`, `plan`, `prorate`, `next_cycle_plan`, `metadata` (§1.6).
 *
 * - `plan` on an `active` subscription: the new plan is charged in full now and a new cycle starts
 *   now (to the next billing instant for a billing_day plan). **Decision** with prorate (sent or
 *   stored): floor(new amount × remaining days / period days), the period end kept. On a `trial`,
 *   `paused` or `canceled` subscription the plan switches without a charge: the next charge (trial
 *   end, resume) bills the new plan. `already_subscribed` when the customer holds the new plan in
 *   another subscription.
 * - `trial_end` timestamp: a trial from now to then (moved onto a billing instant with billing_day
 *   and `prorate=false`), no charge; the status becomes `trial` unless paused or canceled, whose
 *   resume then finds the trial. `trial_end=now` on a trial ends it with the first charge now.
 * - `prorate` changes only together with `plan` (`cannot_change_prorate_status`).
 * - `next_cycle_plan`: a plan id schedules the switch at the next renewal; `''` clears it.
 */
export async function updateSubscription(ctx: Context, caller: Caller, command: UpdateSubscriptionCommand): Promise<SubscriptionWithPlans> {
  const { id, trialEnd, planId: newPlanId, prorate, nextCyclePlanId } = command;
  const subscription: ClaimedObject = { accountId: caller.accountId, livemode: caller.livemode, resource: 'subscription', resourceId: id };
  return claimedCharge(ctx, caller, subscription, 'subscriptions.update', 'id', async (trx, at) => {
    const current = await findSubscription(trx, caller, id, 'id', { lock: true });
    // Read after the row lock: a renewal committed while this call waited is then in the past.
    const now = at ?? ctx.clock.now();
    if (prorate !== undefined && newPlanId === undefined && prorate !== current.prorate) {
      reject('cannot_change_prorate_status', 'prorate', 'prorate can only be changed together with plan');
    }
    const metadata = command.metadata === undefined ? current.metadata : (mergeMetadata(current.metadata, command.metadata.update, command.metadata.flavour) as Record<string, string>);
    let row: SubscriptionRow = { ...current, metadata, updated_at: now };
    let plan: SubscribablePlan;
    let sameCalendar = true;
    if (newPlanId !== undefined) {
      const before = await currentPlan(trx, caller, current);
      await lockCustomer(trx, caller, current.customer_id);
      const planRow = await findPlan(trx, caller, newPlanId, 'plan', 'share');
      plan = assertSubscribableAs(planRow, 'plan');
      // Pro-rating keeps the current period end, which is only meaningful when the new plan bills
      // on the same calendar (same interval and billing_day) as the old one.
      sameCalendar = before.interval === plan.interval && before.billingDay === plan.billingDay;
      await assertNotSubscribed(trx, caller, current.customer_id, newPlanId, 'plan', current.subscription_id);
      row = { ...row, plan_id: newPlanId, prorate: prorate ?? current.prorate };
    } else {
      plan = await currentPlan(trx, caller, current);
    }
    if (nextCyclePlanId !== undefined) {
      if (nextCyclePlanId === '') row = { ...row, next_cycle_plan_id: null };
      else {
        assertSubscribableAs(await findPlan(trx, caller, nextCyclePlanId, 'next_cycle_plan', 'share'), 'next_cycle_plan');
        row = { ...row, next_cycle_plan_id: nextCyclePlanId };
      }
    }

    let charge: ChargeNow | null = null;
    if (trialEnd instanceof Date) {
      const trial = trialFor({ plan, now, trialEnd, prorate })!;
      const status = current.status === 'paused' || current.status === 'canceled' ? current.status : 'trial';
      row = { ...row, status, trial_start: trial.trialStart, trial_end: trial.trialEnd, current_period_start: now, current_period_end: trial.trialEnd };
    } else if (trialEnd === 'now' && current.status === 'trial') {
      // The trial ends now: its first charge, as the renewal job would make it at trial end (§1.3).
      const period = planTrialEnd({ plan, trialEnd: now, prorate: row.prorate });
      charge = { amount: period.amount, periodStart: period.periodStart };
      row = { ...row, status: 'active', trial_end: now, current_period_start: period.periodStart, current_period_end: period.periodEnd };
    } else if (newPlanId !== undefined && current.status === 'active') {
      if (row.prorate && sameCalendar) {
        charge = { amount: proratedPlanChangeCharge(plan.amount, current.current_period_start, current.current_period_end, now), periodStart: now };
      } else {
        const period = planTrialEnd({ plan, trialEnd: now, prorate: false });
        charge = { amount: period.amount, periodStart: period.periodStart };
        row = { ...row, current_period_start: period.periodStart, current_period_end: period.periodEnd };
      }
    }
    const card = charge === null ? undefined : await requireDefaultCard(trx, caller, current.customer_id, undefined);
    return { row, card, charge, now, write: (trx, charged) => commitChange(trx, ctx, caller, charged, 'subscription.updated', now) };
  });
}

/** `subscriptions.pause`: no charges until resumed (§1.6); `already_paused` when paused. */
export async function pauseSubscription(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<SubscriptionWithPlans> {
  const { id } = command;
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findSubscription(trx, caller, id, 'id', { lock: true });
    // Read after the row lock: a renewal committed while this call waited is then in the past.
    const now = ctx.clock.now();
    if (current.status === 'paused') reject('already_paused', undefined, `Subscription ${id} is already paused.`);
    return commitChange(trx, ctx, caller, { ...current, status: 'paused', paused_at: now, updated_at: now }, 'subscription.paused', now);
  });
}

/** `subscriptions.resume` as a command: `trial_end` and `prorate` undefined when not sent. */
export interface ResumeSubscriptionCommand {
  readonly id: string;
  readonly trialEnd: TrialEndRequest;
  readonly prorate: boolean | undefined;
}

/**
 * `subscriptions.resume` (§1.6), from `paused` or `canceled` (`subscription_worked` otherwise):
 * - `trial_end` timestamp: a new trial to then;
 * - inside the trial (and `trial_end` not `now`): back to `trial`;
 * - the current period is over, or `trial_end=now` cuts the trial short: charged now (the full
 *   amount, or pro-rated to the billing day with prorate, sent or stored) and a new period starts
 *   now; a declined charge leaves the subscription as it was and fails the call;
 * - otherwise: `active` with the same period.
 * `paused_at` and `canceled_at` are cleared and `resumed_at` set.
 */
export async function resumeSubscription(ctx: Context, caller: Caller, command: ResumeSubscriptionCommand): Promise<SubscriptionWithPlans> {
  const { id, trialEnd, prorate } = command;
  const subscription: ClaimedObject = { accountId: caller.accountId, livemode: caller.livemode, resource: 'subscription', resourceId: id };
  return claimedCharge(ctx, caller, subscription, 'subscriptions.resume', 'id', async (trx, at) => {
    const current = await findSubscription(trx, caller, id, 'id', { lock: true });
    // Read after the row lock: a renewal committed while this call waited is then in the past.
    const now = at ?? ctx.clock.now();
    if (current.status !== 'paused' && current.status !== 'canceled') reject('subscription_worked', undefined, `Subscription ${id} is ${current.status}, not paused or canceled.`);
    const plan = await currentPlan(trx, caller, current);
    let row: SubscriptionRow = { ...current, paused_at: null, canceled_at: null, resumed_at: now, updated_at: now };
    let charge: ChargeNow | null = null;
    const insideTrial = current.trial_end !== null && current.trial_end.getTime() > now.getTime();
    if (trialEnd instanceof Date) {
      const trial = trialFor({ plan, now, trialEnd, prorate })!;
      row = { ...row, status: 'trial', trial_start: trial.trialStart, trial_end: trial.trialEnd, current_period_start: now, current_period_end: trial.trialEnd };
    } else if (insideTrial && trialEnd !== 'now') {
      row = { ...row, status: 'trial' };
    } else if (current.current_period_end.getTime() <= now.getTime() || (insideTrial && trialEnd === 'now')) {
      const period = planTrialEnd({ plan, trialEnd: now, prorate: prorate ?? current.prorate });
      charge = { amount: period.amount, periodStart: period.periodStart };
      row = { ...row, status: 'active', current_period_start: period.periodStart, current_period_end: period.periodEnd, ...(insideTrial ? { trial_end: now } : {}) };
    } else {
      row = { ...row, status: 'active' };
    }
    const card = charge === null ? undefined : await requireDefaultCard(trx, caller, current.customer_id, undefined);
    return { row, card, charge, now, write: (trx, charged) => commitChange(trx, ctx, caller, charged, 'subscription.resumed', now) };
  });
}

/** `subscriptions.cancel`: ends (is deleted) at the current period end (§1.6); `already_canceled` when canceled. */
export async function cancelSubscription(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<SubscriptionWithPlans> {
  const { id } = command;
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findSubscription(trx, caller, id, 'id', { lock: true });
    // Read after the row lock: a renewal committed while this call waited is then in the past.
    const now = ctx.clock.now();
    if (current.status === 'canceled') reject('already_canceled', undefined, `Subscription ${id} is already canceled.`);
    return commitChange(trx, ctx, caller, { ...current, status: 'canceled', canceled_at: now, updated_at: now }, 'subscription.canceled', now);
  });
}

/**
 * `subscriptions.delete`: at once, softly (charges keep pointing at the row). `prorate=true` refunds
 * the unused part of the last charge (§1.6); when `prorate` is not sent, the subscription's own
 * prorate flag asks for it (v1 §4.6 rule 3). Answers with the deleted-object response.
 */
export async function deleteSubscription(ctx: Context, caller: Caller, command: { readonly id: string; readonly prorate: boolean | undefined }): Promise<DeletedObject> {
  const { id, prorate } = command;
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findSubscription(trx, caller, id, 'id', { lock: true });
    // Read after the row lock: a renewal committed while this call waited is then in the past.
    const now = ctx.clock.now();
    const refund: RefundRequest | null = prorate === true ? 'explicit' : prorate === undefined && current.prorate ? 'by_subscription' : null;
    // The refund comes first: its 180-day check may still reject the call before anything is written.
    if (refund !== null) await refundRemainder(trx, ctx, current, now, refund);
    const subscription = renderSubscriptionWithPlans(await subscriptionWithPlans(trx, caller, current));
    await storeSubscription(trx, { ...current, deleted_at: now, updated_at: now });
    await recordEvent(trx, ctx.ids, eventOf(caller, 'subscription.deleted', subscription, now));
    return { deleted: true, id, livemode: caller.livemode } as const;
  });
}

/** `GET /v1/customers/{id}/subscriptions/{subscription_id}` (v1 §4.4): a subscription of that live customer. */
export async function retrieveCustomerSubscription(ctx: Context, caller: Caller, command: RetrieveSubscriptionCommand & { readonly customerId: string }): Promise<SubscriptionWithPlans> {
  await findCustomer(ctx.db, caller, command.customerId, 'customer');
  return retrieveSubscription(ctx, caller, command);
}

/** `GET /v1/customers/{id}/subscriptions` (v1 §4.4): that live customer's subscriptions, with `plan` and `status` filters. */
export async function listCustomerSubscriptions(ctx: Context, caller: Caller, command: ListSubscriptionsCommand & { readonly customerId: string }): Promise<SubscriptionWithPlans[]> {
  await findCustomer(ctx.db, caller, command.customerId, 'customer');
  return listSubscriptions(ctx, caller, command);
}
