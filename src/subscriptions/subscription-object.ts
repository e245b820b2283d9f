/**
 * The v1 subscription object (§2.5) from a stored subscription and the plan objects it embeds.
 * Shared by the subscription operations and the renewal job, so both show the same object.
 */
import type { Selectable } from 'kysely';
import type { SubscriptionsTable } from '../db/schema';
import { toUnixSeconds } from '../domain/time';

export type SubscriptionRow = Selectable<SubscriptionsTable>;

/** What a subscription embeds of a plan: the plan object as plans.retrieve shows it. */
export type EmbeddedPlan = { readonly id: string; readonly object: 'plan'; readonly [field: string]: unknown };

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type SubscriptionObject = {
  readonly id: string;
  readonly object: 'subscription';
  readonly livemode: boolean;
  readonly created: number;
  readonly start: number;
  readonly customer: string;
  readonly plan: EmbeddedPlan;
  readonly next_cycle_plan: EmbeddedPlan | null;
  readonly status: SubscriptionRow['status'];
  readonly prorate: boolean;
  readonly current_period_start: number;
  readonly current_period_end: number;
  readonly trial_start: number | null;
  readonly trial_end: number | null;
  readonly paused_at: number | null;
  readonly canceled_at: number | null;
  readonly resumed_at: number | null;
  readonly metadata: Readonly<Record<string, string>>;
};

const seconds = (instant: Date | null): number | null => (instant === null ? null : toUnixSeconds(instant));

export function renderSubscription(row: SubscriptionRow, plan: EmbeddedPlan, nextCyclePlan: EmbeddedPlan | null): SubscriptionObject {
  return {
    id: row.subscription_id,
    object: 'subscription',
    livemode: row.livemode,
    created: toUnixSeconds(row.created_at),
    start: toUnixSeconds(row.start_at),
    customer: row.customer_id,
    plan,
    next_cycle_plan: nextCyclePlan,
    status: row.status,
    prorate: row.prorate,
    current_period_start: toUnixSeconds(row.current_period_start),
    current_period_end: toUnixSeconds(row.current_period_end),
    trial_start: seconds(row.trial_start),
    trial_end: seconds(row.trial_end),
    paused_at: seconds(row.paused_at),
    canceled_at: seconds(row.canceled_at),
    resumed_at: seconds(row.resumed_at),
    metadata: row.metadata,
  };
}

/**
 * When the renewal job next has work for a subscription in this state (the `renews_at` column):
 * a trial ends at trial_end, an active period renews and a canceled one ends at the period end (or
 * at the cancel, when that came later); a paused subscription waits for resume.
 */
export function renewsAt(row: Pick<SubscriptionRow, 'status' | 'trial_end' | 'current_period_end' | 'deleted_at' | 'canceled_at'>): Date | null {
  if (row.deleted_at !== null) return null;
  switch (row.status) {
    case 'trial':
      return row.trial_end;
    case 'active':
      return row.current_period_end;
    case 'canceled':
      // Deleted at its period end; one canceled after its period had already ended (a paused
      // subscription with a past period end) is deleted at the cancel, never before it.
      return row.canceled_at !== null && row.canceled_at.getTime() > row.current_period_end.getTime() ? row.canceled_at : row.current_period_end;
    case 'paused':
      // Not billed; but one canceled before it was paused keeps its deletion at the period end
      // (pausing does not undo a cancel; resume does).
      if (row.canceled_at === null) return null;
      return row.canceled_at.getTime() > row.current_period_end.getTime() ? row.canceled_at : row.current_period_end;
  }
}
