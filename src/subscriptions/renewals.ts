/**
 * The renewal job's feature code (service rules §1.5, with §1.3 at trial end): everything whose
 * `renews_at` has come by the slot is renewed, ended or charged for the first time, in batches,
 * each batch one transaction written with a handful of set-based statements:
 *
 *   1. lock one account's due subscriptions (ORDER BY renews_at …, FOR UPDATE SKIP LOCKED, LIMIT
 *      batch size; accounts take turns, see account-batches.ts);
 *   2. read their plans and their customers' default cards (one query each, whole batch);
 *   3. decide each subscription in memory (pure rules from src/domain/proration.ts);
 *   4. authorize every charge (one network call) and send their one INSERT (chargeCards' steps);
 *   5. while it runs, build everything that follows: charge events, subscription changes, their events;
 *   6. write the charge events, every subscription change (one `UPDATE … FROM json_to_recordset(…)`)
 *      and the subscription events, one statement each.
 *
 * Exactly-once: a subscription is locked while its batch runs, and the same transaction moves its
 * `renews_at` past the due instant (or clears it), so a replayed slot or a second worker finds
 * nothing left to do; the charges' (subscription, period start) unique index is the last line of
 * defence should anything slip through.
 *
 * Every instant written is the subscription's own due instant (`renews_at`), never the slot or the
 * wall clock: a late run renews with the instants it should have used.
 */
import { sql, type Kysely } from 'kysely';
import { bulkColumns, compositeKey, type BulkDocument, type ColumnsOf } from '../db/bulk-rows';
import type { Database } from '../db/schema';
import { toError } from '../domain/errors';
import { planRenewal, planTrialEnd, type ChargedPeriod, type SubscribablePlan } from '../domain/proration';
import { chargeOutcomes, insertPreparedCharges, prepareCharges, voidUnwritten, type ChargeOutcome, type ChargeRequest } from '../charges/charges';
import type { CardRow } from '../customers/card-object';
import type { Context } from '../engine/context';
import { dueAccounts, earliestDueAt } from '../engine/account-batches';
import { runBatches, type JobCounts, type SlotRun } from '../engine/job';
import { encodePreparedEvents, prepareEvents, recordPreparedEvents, type EventInput, type PreparedEvents } from '../events/outbox';
import { renderPlan, type PlanObject, type PlanRow } from '../plans/plan-record';
import { renderSubscription, type SubscriptionRow } from './subscription-object';
import { accountsOf, inAccounts } from '../db/account-scope';
import { customerInScope, LIVE_BOOK, type JobScope } from '../test-clocks/clock-scope';

/** What one renewal run did, stored in the run ledger. */
export type RenewalCounts = {
  /** Active subscriptions charged for a new period. */
  readonly renewed: number;
  /** Renewals and trial ends whose charge failed (or that had no card to charge): now paused. */
  readonly failed: number;
  /** Trials that ended with a successful first charge, now active. */
  readonly trials_ended: number;
  /** Canceled subscriptions that reached their period end, now deleted. */
  readonly deleted: number;
  /** Transactions committed. */
  readonly batches: number;
};

type BatchCounts = Omit<RenewalCounts, 'batches'> & { readonly selected: number };

/**
 * Processes everything due as of `run.slot`, account by account, batch after batch, until nothing
 * due is left (or the worker asks to stop, between batches): see account-batches.ts. Rows locked
 * by a concurrent API call or another run are skipped and are picked up by the next slot.
 */
export async function renewDueSubscriptions(ctx: Context, run: SlotRun): Promise<RenewalCounts & JobCounts> {
  return runBatches(
    ctx,
    run,
    ['renewed', 'failed', 'trials_ended', 'deleted'],
    (db, cap, among) => dueAccounts(db, 'subscriptions', sql`d.renews_at IS NOT NULL AND d.renews_at <= ${run.slot} AND ${customerInScope(ctx, 'd', among)}`, cap, among),
    (trx, accountIds, limit) => renewBatch(trx, ctx, accountIds, run.slot, limit),
  );
}

/** The earliest `renews_at` strictly after `after`, or null: where the simulator jumps next. */
export async function nextRenewalDueAt(db: Kysely<Database>, after: Date, scope: JobScope = LIVE_BOOK): Promise<Date | null> {
  return earliestDueAt(db, 'subscriptions', 'renews_at', sql`d.renews_at IS NOT NULL AND ${customerInScope(scope, 'd')}`, after);
}

/** The new state of one subscription, as the batch UPDATE writes it. */
type SubscriptionChange = Pick<
  SubscriptionRow,
  'status' | 'plan_id' | 'next_cycle_plan_id' | 'current_period_start' | 'current_period_end' | 'paused_at' | 'renews_at' | 'last_charge_id' | 'deleted_at' | 'updated_at'
>;

/** One due subscription and what the rules decided for it before any write. */
type Decision =
  | { readonly kind: 'delete'; readonly row: SubscriptionRow }
  /** Nothing to do but take it off the due list (a paused or deleted row that still had renews_at). */
  | { readonly kind: 'clear'; readonly row: SubscriptionRow }
  /** Could not be charged at all (no default card, deleted customer, a rule error): paused. */
  | { readonly kind: 'uncharged'; readonly row: SubscriptionRow; readonly plan: PlanRow; readonly reason: string }
  | { readonly kind: 'charge'; readonly row: SubscriptionRow; readonly plan: PlanRow; readonly period: ChargedPeriod; readonly trial: boolean; readonly request: ChargeRequest };

function subscribable(plan: PlanRow): SubscribablePlan {
  return { interval: plan.interval, billingDay: plan.billing_day, amount: plan.amount, trialDays: plan.trial_days };
}

/**
 * One batch inside the caller's transaction. Returns how many subscriptions it took (0: nothing
 * due is left) and what became of them.
 */
export async function renewBatch(
  trx: Kysely<Database>,
  ctx: Pick<Context, 'ids' | 'processor' | 'log' | 'clock' | 'testClock'>,
  accountIds: readonly string[],
  asOf: Date,
  limit: number,
): Promise<BatchCounts> {
  // 1. The accounts' due subscriptions, oldest due first, locked; rows another transaction holds are skipped.
  const due = await trx
    .selectFrom('subscriptions')
    .selectAll()
    .where(inAccounts('account_id', accountIds))
    .where('renews_at', 'is not', null)
    .where('renews_at', '<=', asOf)
    .where(customerInScope(ctx, 'subscriptions', accountIds))
    .orderBy('renews_at')
    .orderBy('account_id')
    .orderBy('livemode')
    .orderBy('subscription_id')
    .limit(limit)
    .forUpdate()
    .skipLocked()
    .execute();
  if (due.length === 0) return { selected: 0, renewed: 0, failed: 0, trials_ended: 0, deleted: 0 };

  // 2. Plans (current and next-cycle) and default cards of the whole batch, one query each.
  const [plans, cards] = await Promise.all([loadPlans(trx, due), loadDefaultCards(trx, due)]);

  // 3. Decide every subscription in memory.
  const decisions = due.map((row) => decide(row, plans, cards, ctx));

  // 4. Authorize every chargeable subscription in one call and send the charges' INSERT.
  const charged = decisions.filter((d): d is Extract<Decision, { kind: 'charge' }> => d.kind === 'charge');
  const prepared = await prepareCharges(trx, ctx, charged.map((d) => d.request));
  const inserting = insertPreparedCharges(trx, prepared);
  // Reported by the await below, not as an unhandled rejection.
  inserting.catch(() => undefined);
  // 5. While PostgreSQL inserts them, everything that follows is built (events rendered and
  // encoded for their statements but for their ids, the subscription changes serialised), as if
  // every charge was written: the subscriptions are locked, so none repeats a stored charge of its
  // period — checked below, and rebuilt if one did. One turn of the event loop first, so that the
  // INSERT is on its way. (This work was done while the connection sat idle; figures in
  // docs/decisions/performance.md.)
  if (prepared.rows.length > 0) await new Promise((resolve) => setImmediate(resolve));
  let charges = chargeOutcomes(prepared, new Set(prepared.rows.map((row) => row.charge_id)));
  let followUp = planFollowUp(decisions, charged, charges.outcomes, new Map(), plans);
  let chargeEvents = prepareEvents(charges.events);
  encodePreparedEvents(trx, chargeEvents);
  encodePreparedEvents(trx, followUp.events);
  const written = await inserting;
  if (written.size !== prepared.rows.length) {
    await voidUnwritten(ctx, prepared, written);
    charges = chargeOutcomes(prepared, written);
    const duplicates = await existingCharges(trx, charged.filter((_, i) => charges.outcomes[i]!.status === 'duplicate'));
    followUp = planFollowUp(decisions, charged, charges.outcomes, duplicates, plans);
    chargeEvents = prepareEvents(charges.events);
  }

  // 6. The charge events, every subscription change, the subscription events (ids drawn in this order).
  await recordPreparedEvents(trx, ctx.ids, chargeEvents);
  await writeChanges(trx, accountsOf(due, (row) => row.account_id), followUp.changes);
  await recordPreparedEvents(trx, ctx.ids, followUp.events);
  for (const decision of decisions) {
    if (decision.kind === 'uncharged') {
      ctx.log.warn({ account: decision.row.account_id, subscription: decision.row.subscription_id, reason: decision.reason }, 'renewal not charged; subscription paused');
    }
  }
  return { selected: due.length, ...followUp.counts };
}

/** What a batch writes after its charges: each subscription's new state and the events reporting them. */
interface FollowUp {
  /** The subscription changes as writeChanges' JSON document. */
  readonly changes: BulkDocument<ColumnsOf<typeof CHANGE_COLUMNS>>;
  readonly events: PreparedEvents;
  readonly counts: Omit<BatchCounts, 'selected'>;
}

/** The new state of every subscription of a batch, given what became of its charges (no I/O). */
function planFollowUp(
  decisions: readonly Decision[],
  charged: readonly Extract<Decision, { kind: 'charge' }>[],
  outcomes: readonly ChargeOutcome[],
  duplicates: ReadonlyMap<string, ExistingCharge>,
  plans: ReadonlyMap<string, PlanRow>,
): FollowUp {
  const outcomeOf = new Map<Decision, ChargeOutcome | ExistingCharge>();
  charged.forEach((decision, i) => {
    const outcome = outcomes[i]!;
    // A duplicate's stored charge always exists (the unique index said so); "failed" is only the type's fallback.
    const existing = duplicates.get(compositeKey(decision.row.account_id, decision.row.livemode, decision.row.subscription_id)) ?? { status: 'failed', row: { charge_id: '' } };
    outcomeOf.set(decision, outcome.status === 'duplicate' ? existing : outcome);
  });

  const changes: ChangedSubscription[] = [];
  const events: EventInput[] = [];
  const rendered = new Map<string, PlanObject>();
  const planObject = (plan: PlanRow): PlanObject => {
    const key = compositeKey(plan.account_id, plan.livemode, plan.plan_id);
    let object = rendered.get(key);
    if (object === undefined) {
      object = renderPlan(plan);
      rendered.set(key, object);
    }
    return object;
  };
  let renewed = 0;
  let failed = 0;
  let trialsEnded = 0;
  let deleted = 0;
  for (const decision of decisions) {
    const { row } = decision;
    const at = row.renews_at!;
    const unchanged: SubscriptionChange = {
      status: row.status,
      plan_id: row.plan_id,
      next_cycle_plan_id: row.next_cycle_plan_id,
      current_period_start: row.current_period_start,
      current_period_end: row.current_period_end,
      paused_at: row.paused_at,
      renews_at: null,
      last_charge_id: row.last_charge_id,
      deleted_at: row.deleted_at,
      updated_at: at,
    };
    let change: SubscriptionChange;
    let type: string | null;
    let plan: PlanRow | undefined;
    switch (decision.kind) {
      case 'clear':
        change = { ...unchanged, updated_at: row.updated_at };
        type = null;
        break;
      case 'delete':
        // §1.6: a canceled subscription ends (is deleted) at its period end.
        change = { ...unchanged, deleted_at: at };
        type = 'subscription.deleted';
        deleted += 1;
        break;
      case 'uncharged':
        plan = decision.plan;
        change = { ...unchanged, status: 'paused', plan_id: plan.plan_id, next_cycle_plan_id: null, paused_at: at };
        type = 'subscription.paused';
        failed += 1;
        break;
      case 'charge': {
        plan = decision.plan;
        const outcome = outcomeOf.get(decision)!;
        if (outcome.status === 'succeeded') {
          // Prepaid: the new period starts at the old period end (or the trial end), never at the slot.
          change = {
            ...unchanged,
            status: 'active',
            plan_id: plan.plan_id,
            next_cycle_plan_id: null,
            current_period_start: decision.period.periodStart,
            current_period_end: decision.period.periodEnd,
            renews_at: decision.period.periodEnd,
            last_charge_id: outcome.row.charge_id,
          };
          type = 'subscription.renewed';
          if (decision.trial) trialsEnded += 1;
          else renewed += 1;
        } else {
          // §1.5: the cycle stops; current_period_end stays (now in the past); no automatic retry.
          // The plan switch has still happened ("the switch always happens").
          change = { ...unchanged, status: 'paused', plan_id: plan.plan_id, next_cycle_plan_id: null, paused_at: at };
          type = 'subscription.paused';
          failed += 1;
        }
        break;
      }
    }
    changes.push({ row, change });
    if (type !== null) {
      const after: SubscriptionRow = { ...row, ...change };
      const current = plan ?? plans.get(compositeKey(row.account_id, row.livemode, row.plan_id));
      const next = after.next_cycle_plan_id === null ? undefined : plans.get(compositeKey(row.account_id, row.livemode, after.next_cycle_plan_id));
      if (current !== undefined) {
        events.push({
          accountId: row.account_id,
          livemode: row.livemode,
          type,
          data: renderSubscription(after, planObject(current), next === undefined ? null : planObject(next)),
          at,
        });
      }
    }
  }
  return {
    changes: CHANGE_COLUMNS.document(changes),
    events: prepareEvents(events),
    counts: { renewed, failed, trials_ended: trialsEnded, deleted },
  };
}

function decide(row: SubscriptionRow, plans: ReadonlyMap<string, PlanRow>, cards: ReadonlyMap<string, CardRow>, ctx: Pick<Context, 'log'>): Decision {
  if (row.deleted_at !== null) return { kind: 'clear', row };
  // A canceled subscription is deleted at its period end, also when it was paused since.
  if (row.status === 'canceled' || (row.status === 'paused' && row.canceled_at !== null)) return { kind: 'delete', row };
  if (row.status === 'paused') return { kind: 'clear', row };
  const at = row.renews_at!;
  const current = plans.get(compositeKey(row.account_id, row.livemode, row.plan_id));
  // §1.5 "if next_cycle_plan is set, the plan switches to it first (the switch always happens)".
  // Applied at a trial end too: the rule is stated for both, and the first charge then uses the
  // plan the subscription will actually run on.
  const switched = row.next_cycle_plan_id === null ? current : plans.get(compositeKey(row.account_id, row.livemode, row.next_cycle_plan_id));
  const plan = switched ?? current;
  if (plan === undefined) {
    // Plans are deleted softly and never hard-deleted, so this is a broken reference; leave the row
    // off the due list rather than stall every later batch behind it.
    ctx.log.error({ account: row.account_id, subscription: row.subscription_id, plan: row.plan_id }, 'subscription names a plan that does not exist; taken off the renewal list');
    return { kind: 'clear', row };
  }
  // **Decision:** no default card (none registered, or it was deleted) or a deleted customer is a
  // failed renewal: the subscription is paused at the due instant like a declined one, so the
  // merchant sees the same state and can resume it once a card is there. No charge row is written
  // (a charge needs a card), so only `subscription.paused` is recorded, no `charge.failed`.
  const card = cards.get(compositeKey(row.account_id, row.livemode, row.customer_id));
  if (card === undefined) return { kind: 'uncharged', row, plan, reason: 'the customer has no default card (or was deleted)' };
  let period: ChargedPeriod;
  try {
    period = row.status === 'trial' ? planTrialEnd({ plan: subscribable(plan), trialEnd: at, prorate: row.prorate }) : planRenewal(subscribable(plan), row.current_period_end);
  } catch (error) {
    // A rule refusing a stored plan (e.g. a yearly plan with billing_day) must not stall the job:
    // one bad subscription is paused, the batch goes on.
    return { kind: 'uncharged', row, plan, reason: toError(error).message };
  }
  return {
    kind: 'charge',
    row,
    plan,
    period,
    trial: row.status === 'trial',
    request: {
      accountId: row.account_id,
      livemode: row.livemode,
      customerId: row.customer_id,
      card,
      amount: period.amount,
      at,
      kind: 'renewal',
      subscriptionId: row.subscription_id,
      periodStart: period.periodStart,
    },
  };
}

/** Plans named by the batch (current and next-cycle), by (account, mode, plan id). */
async function loadPlans(trx: Kysely<Database>, due: readonly SubscriptionRow[]): Promise<Map<string, PlanRow>> {
  const wanted = new Map<string, [string, boolean, string]>();
  for (const row of due) {
    wanted.set(compositeKey(row.account_id, row.livemode, row.plan_id), [row.account_id, row.livemode, row.plan_id]);
    if (row.next_cycle_plan_id !== null) wanted.set(compositeKey(row.account_id, row.livemode, row.next_cycle_plan_id), [row.account_id, row.livemode, row.next_cycle_plan_id]);
  }
  const keys = [...wanted.values()];
  // Deleted plans are read too: a subscription keeps billing on the plan it has.
  const result = await sql<PlanRow>`
    SELECT p.* FROM plans p
    JOIN unnest(${keys.map((k) => k[0])}::text[], ${keys.map((k) => k[1])}::boolean[], ${keys.map((k) => k[2])}::text[]) AS k(a, l, id)
      ON p.account_id = k.a AND p.livemode = k.l AND p.plan_id = k.id
    WHERE ${inAccounts('p.account_id', accountsOf(due, (row) => row.account_id))}`.execute(trx);
  return new Map(result.rows.map((plan) => [compositeKey(plan.account_id, plan.livemode, plan.plan_id), plan]));
}

/** The live default card of each live customer in the batch, by (account, mode, customer id). */
async function loadDefaultCards(trx: Kysely<Database>, due: readonly SubscriptionRow[]): Promise<Map<string, CardRow>> {
  const wanted = new Map<string, SubscriptionRow>();
  for (const row of due) wanted.set(compositeKey(row.account_id, row.livemode, row.customer_id), row);
  // One primary-key probe per customer, forced by the LATERAL subquery (OFFSET 0 keeps the planner
  // from flattening it): as a plain join the planner hashed the whole customers table for every
  // batch (random_page_cost 4 makes 5,000 probes look dearer than a scan), which grows with the
  // table, not with the batch. The statement names the batch's accounts (account-scope.ts): Citus
  // routes it, fence and all, to their shard.
  const rows = [...wanted.values()];
  const accountIds = accountsOf(rows, (row) => row.account_id);
  const cards = (
    await sql<CardRow>`
    SELECT card.* FROM unnest(${rows.map((row) => row.account_id)}::text[], ${rows.map((row) => row.livemode)}::boolean[], ${rows.map((row) => row.customer_id)}::text[]) AS k(a, l, id)
    CROSS JOIN LATERAL (
      SELECT card.* FROM customers cu
      JOIN cards card ON ${inAccounts('card.account_id', accountIds)} AND card.account_id = cu.account_id AND card.livemode = cu.livemode AND card.card_id = cu.default_card_id AND card.deleted_at IS NULL
      WHERE ${inAccounts('cu.account_id', accountIds)} AND cu.account_id = k.a AND cu.livemode = k.l AND cu.customer_id = k.id AND cu.deleted_at IS NULL
      OFFSET 0) card`.execute(trx)
  ).rows;
  return new Map(cards.map((card) => [compositeKey(card.account_id, card.livemode, card.customer_id), card]));
}

type ExistingCharge = { readonly status: 'succeeded' | 'failed'; readonly row: { readonly charge_id: string } };

/**
 * The charges that already existed for a (subscription, period start) — the unique index fired.
 * With the rows locked this should never happen; if it does, the stored charge decides the outcome,
 * so the subscription still moves on instead of coming back due in every batch.
 */
async function existingCharges(trx: Kysely<Database>, decisions: readonly Extract<Decision, { kind: 'charge' }>[]): Promise<Map<string, ExistingCharge>> {
  if (decisions.length === 0) return new Map();
  const result = await sql<{ account_id: string; livemode: boolean; subscription_id: string; charge_id: string; paid: boolean }>`
    SELECT c.account_id, c.livemode, c.subscription_id, c.charge_id, c.paid FROM charges c
    JOIN unnest(${decisions.map((d) => d.row.account_id)}::text[], ${decisions.map((d) => d.row.livemode)}::boolean[],
                ${decisions.map((d) => d.row.subscription_id)}::text[], ${decisions.map((d) => d.period.periodStart.toISOString())}::timestamptz[]) AS k(a, l, s, ps)
      ON c.account_id = k.a AND c.livemode = k.l AND c.subscription_id = k.s AND c.period_start = k.ps`.execute(trx);
  return new Map(result.rows.map((c) => [compositeKey(c.account_id, c.livemode, c.subscription_id), { status: c.paid ? 'succeeded' : 'failed', row: { charge_id: c.charge_id } }]));
}

type ChangedSubscription = { readonly row: SubscriptionRow; readonly change: SubscriptionChange };

/** Every subscription change of the batch, written in one statement (writeChanges). */
const CHANGE_COLUMNS = bulkColumns<ChangedSubscription>()({
  a: ['text', (c) => c.row.account_id],
  l: ['boolean', (c) => c.row.livemode],
  id: ['text', (c) => c.row.subscription_id],
  status: ['text', (c) => c.change.status],
  plan_id: ['text', (c) => c.change.plan_id],
  next_plan: ['text', (c) => c.change.next_cycle_plan_id],
  ps: ['instant', (c) => c.change.current_period_start],
  pe: ['instant', (c) => c.change.current_period_end],
  paused_at: ['instant', (c) => c.change.paused_at],
  renews_at: ['instant', (c) => c.change.renews_at],
  last_charge: ['text', (c) => c.change.last_charge_id],
  deleted_at: ['instant', (c) => c.change.deleted_at],
  updated_at: ['instant', (c) => c.change.updated_at],
});

/** Writes every subscription change of a batch (CHANGE_COLUMNS' document) in one statement. */
async function writeChanges(trx: Kysely<Database>, accountIds: readonly string[], changes: BulkDocument<ColumnsOf<typeof CHANGE_COLUMNS>>): Promise<void> {
  const u = CHANGE_COLUMNS.table('u', changes);
  await sql`
    UPDATE subscriptions s SET
      status = ${u.col('status')}, plan_id = ${u.col('plan_id')}, next_cycle_plan_id = ${u.col('next_plan')}, current_period_start = ${u.col('ps')},
      current_period_end = ${u.col('pe')}, paused_at = ${u.col('paused_at')}, renews_at = ${u.col('renews_at')},
      last_charge_id = ${u.col('last_charge')}, deleted_at = ${u.col('deleted_at')}, updated_at = ${u.col('updated_at')}
    FROM ${u.from}
    WHERE ${inAccounts('s.account_id', accountIds)} AND s.account_id = u.a AND s.livemode = u.l AND s.subscription_id = u.id`.execute(trx);
}
