/**
 * Sign-ups in bulk, for the simulator's subscriber generators. Each new subscriber is what the
 * three calls `tokens.create` → `customers.create` (card: that token) → `subscriptions.create`
 * make at the subscriber's own instant: the same rows, the same events in the same order per
 * subscriber, the same API objects. A whole batch is written with one statement per table and
 * one charge call instead of three transactions of a dozen round trips each, which is where a
 * year of 10,000 generated subscribers spent most of its time.
 *
 * Built from the operations' own pieces (commands, row builders, §1.3 creation plan,
 * chargeCards, renderers), so the rules are the operations'. What a fresh customer makes moot is
 * skipped: no customer lock, no default-card lookup, no already_subscribed check, no duplicate-card
 * check. Ids are drawn per batch rather than call by call, so they differ from a run of the three
 * calls (the money, instants and states do not: test/integration/new-subscribers.test.ts).
 *
 * Runs inside the caller's transaction. A subscriber whose subscription parameters are refused,
 * or whose first charge is declined, gets the error its `subscriptions.create` call would have got
 * (a declined charge stays recorded, as the call leaves it); its token and customer stand.
 */
import { sql, type Kysely } from 'kysely';
import { utf8Text } from '../db/utf8-param';
import type { Caller } from '../accounts/accounts';
import { chargeCardsUnrecorded, type ChargeRequest } from '../charges/charges';
import { renderCard, type CardRow } from '../customers/card-object';
import { cardOfToken, cardsUrl } from '../customers/cards';
import type { CustomerRow } from '../customers/customer-record';
import { renderCustomer, type CustomerObject } from '../customers/customers';
import { renderToken, tokenRowOf, type TokenObject, type TokenRow } from '../customers/tokens';
import type { Database } from '../db/schema';
import { KessaiError, toError } from '../domain/errors';
import { planCreation } from '../domain/proration';
import type { Context } from '../engine/context';
import { drawEventIds, recordEventsWithIds, type EventInput } from '../events/outbox';
import { CHILD_LIST_PAGE, listObject } from '../operations/pagination';
import { findPlan, renderPlan, type PlanObject, type PlanRow } from '../plans/plan-record';
import { cardDeclined } from './subscription-charges';
import { renderSubscription, renewsAt, type SubscriptionObject, type SubscriptionRow } from './subscription-object';
import { assertSubscribableAs } from './subscription-record';
import { subscriptionDraft, type CreateSubscriptionCommand } from './subscriptions';

export interface NewSubscriber {
  /** The instant of the three calls. */
  readonly at: Date;
  /** `tokens.create` parameters: `{ card: { number, exp_month, exp_year, cvc } }`. */
  readonly token: unknown;
  /**
   * The `subscriptions.create` command without its customer (it is the new customer), decoded by the
   * caller's codec, or the error resolving or decoding its parameters gave.
   */
  readonly subscription: Omit<CreateSubscriptionCommand, 'customerId'> | KessaiError;
}

export interface NewSubscriberResult {
  readonly token: TokenObject;
  readonly customer: CustomerObject;
  readonly subscription: SubscriptionObject | KessaiError;
}

/**
 * Writes rows of one table in one statement: the rows travel as one JSON document (one UTF-8
 * parameter) expanded by json_populate_recordset into the table's own column types, instead of a
 * multi-row VALUES list that the query builder compiles and node-postgres serialises parameter by
 * parameter (figures in docs/decisions/performance.md, "Measured figures moved out of comments"). The rows come from one row builder, so they have the same columns, named by the first
 * row's defined values, written as given (instants as JSON.stringify prints a Date, exact to the
 * millisecond; metadata as nested JSON for jsonb).
 */
async function insertRows(trx: Kysely<Database>, table: 'tokens' | 'customers' | 'cards' | 'subscriptions', rows: readonly object[]): Promise<void> {
  if (rows.length === 0) return;
  const names = Object.entries(rows[0]!).flatMap(([column, value]) => (value === undefined ? [] : [column]));
  const columns = sql.join(names.map((column) => sql.ref(column)));
  await sql`INSERT INTO ${sql.table(table)} (${columns}) SELECT ${columns} FROM json_populate_recordset(NULL::${sql.table(table)}, ${utf8Text(JSON.stringify(rows))}::json)`.execute(trx);
}

/**
 * Signs up `people` (in instant order) on the caller's account. Their cards must be ones the
 * network accepts (the simulator checks each with tokenizedCardOf first and runs a refused one's
 * calls one by one); a refused card here throws.
 */
export async function subscribeNewCustomers(trx: Kysely<Database>, ctx: Pick<Context, 'ids' | 'processor' | 'clock'>, caller: Caller, people: readonly NewSubscriber[]): Promise<NewSubscriberResult[]> {
  if (people.length === 0) return [];
  // tokens.create, then customers.create with the token: the token is used at once.
  const tokens: TokenRow[] = people.map((person) => tokenRowOf(ctx, caller, person.token, person.at));
  const customers: CustomerRow[] = [];
  const cards: CardRow[] = [];
  const customerObjects: CustomerObject[] = [];
  // Each subscriber's events, in the order its three calls write them, with their ids: written
  // together at the end, subscriber by subscriber, so subscribers sharing an instant list their
  // events as their calls one after the other would (events of an instant are listed in writing
  // order). Ids are drawn where each kind of event is made, in the same order as ever.
  const signUpEvents: EventInput[] = [];
  const event = (type: string, data: EventInput['data'], at: Date): EventInput => ({ accountId: caller.accountId, livemode: caller.livemode, type, data, at });
  people.forEach((person, i) => {
    const token = tokens[i]!;
    const customerId = ctx.ids.next('customer');
    const card = cardOfToken(token, customerId, person.at, {});
    const customer: CustomerRow = {
      account_id: caller.accountId,
      livemode: caller.livemode,
      customer_id: customerId,
      test_clock_id: null,
      email: null,
      description: null,
      default_card_id: card.card_id,
      default_payment_method_id: null,
      metadata: {},
      created_at: person.at,
      updated_at: person.at,
      deleted_at: null,
    };
    const object = renderCustomer(customer, listObject([renderCard(card)], CHILD_LIST_PAGE, cardsUrl(customerId)));
    cards.push(card);
    customers.push(customer);
    customerObjects.push(object);
    signUpEvents.push(event('token.created', renderToken(token), person.at), event('customer.created', object, person.at), event('customer.card.created', renderCard(card), person.at));
  });
  await insertRows(trx, 'tokens', tokens.map((token) => ({ ...token, used_at: token.created_at })));
  await insertRows(trx, 'customers', customers);
  await insertRows(trx, 'cards', cards);
  const signUpIds = drawEventIds(ctx.ids, signUpEvents);

  // subscriptions.create, in its order of checks: parameters, plan, subscribable, §1.3 plan, charge.
  const plans = new Map<string, PlanRow | KessaiError>();
  const planOf = async (planId: string): Promise<PlanRow | KessaiError> => {
    let plan = plans.get(planId);
    if (plan === undefined) {
      plan = await findPlan(trx, caller, planId, 'plan', 'share').catch((error: unknown) => {
        if (error instanceof KessaiError) return error;
        throw error;
      });
      plans.set(planId, plan);
    }
    return plan;
  };
  type Draft = { readonly i: number; readonly row: SubscriptionRow; readonly plan: PlanRow; readonly charge: ChargeRequest | null };
  const outcomes: (SubscriptionObject | KessaiError | Draft)[] = [];
  for (const [i, person] of people.entries()) {
    try {
      if (person.subscription instanceof KessaiError) throw person.subscription;
      const request: CreateSubscriptionCommand = { ...person.subscription, customerId: customers[i]!.customer_id };
      const plan = await planOf(request.planId);
      if (plan instanceof KessaiError) throw plan;
      const creation = planCreation({ plan: assertSubscribableAs(plan, 'plan'), now: person.at, trialEnd: request.trialEnd, prorate: request.prorate });
      const row = subscriptionDraft(caller, ctx.ids.next('subscription'), request.customerId, request.planId, creation, request.metadata, person.at);
      const charge: ChargeRequest | null =
        creation.chargeNow === null || creation.chargeNow <= 0
          ? null
          : {
              accountId: caller.accountId,
              livemode: caller.livemode,
              customerId: row.customer_id,
              card: cards[i]!,
              amount: creation.chargeNow,
              at: person.at,
              kind: 'charge',
              subscriptionId: row.subscription_id,
              periodStart: creation.currentPeriodStart,
            };
      outcomes.push({ i, row, plan, charge });
    } catch (error) {
      if (!(error instanceof KessaiError)) throw toError(error);
      outcomes.push(error);
    }
  }
  const drafts = outcomes.filter((o): o is Draft => !(o instanceof KessaiError) && 'row' in o);
  const charged = drafts.filter((d) => d.charge !== null);
  const charges = await chargeCardsUnrecorded(trx, ctx, charged.map((d) => d.charge!));
  const chargeIds = drawEventIds(ctx.ids, charges.events);
  const chargeOf = new Map(charged.map((d, k) => [d, charges.outcomes[k]!]));

  const stored: SubscriptionRow[] = [];
  // By subscriber: its charge's event and its subscription.created event, each with its id.
  const later = new Map<number, { event: EventInput; id: string }[]>();
  const createdEvents: { i: number; event: EventInput }[] = [];
  let chargeEvent = 0;
  const placed = new Set<(typeof charges.termEvents)[number]>();
  const planObjects = new Map<string, PlanObject>();
  for (const draft of drafts) {
    const outcome = chargeOf.get(draft);
    let row = draft.row;
    if (outcome !== undefined) {
      if (outcome.status === 'duplicate') throw new Error(`new subscription ${row.subscription_id} already has a charge for its first period`);
      // A term this batch's captures opened is created by the first capture in it, before that
      // charge's event, as that subscriber's call would write it.
      const opened = outcome.status === 'succeeded' ? charges.termEvents.filter((term) => !placed.has(term) && term.event.at.getTime() === people[draft.i]!.at.getTime()) : [];
      for (const term of opened) placed.add(term);
      later.set(draft.i, [...opened, { event: charges.events[chargeEvent]!, id: chargeIds[chargeEvent]! }]);
      chargeEvent += 1;
      if (outcome.status === 'failed') {
        outcomes[draft.i] = cardDeclined(outcome);
        continue;
      }
      row = { ...row, last_charge_id: outcome.row.charge_id };
    }
    row = { ...row, renews_at: renewsAt(row) };
    let plan = planObjects.get(draft.plan.plan_id);
    if (plan === undefined) {
      plan = renderPlan(draft.plan);
      planObjects.set(draft.plan.plan_id, plan);
    }
    const object = renderSubscription(row, plan, null);
    stored.push(row);
    createdEvents.push({ i: draft.i, event: event('subscription.created', object, row.created_at) });
    outcomes[draft.i] = object;
  }
  await insertRows(trx, 'subscriptions', stored);
  const createdIds = drawEventIds(ctx.ids, createdEvents.map(({ event }) => event));
  if (placed.size !== charges.termEvents.length) throw new Error('a term opened by a bulk sign-up has no capture at its instant');
  createdEvents.forEach(({ i, event }, k) => later.set(i, [...(later.get(i) ?? []), { event, id: createdIds[k]! }]));
  const events: EventInput[] = [];
  const eventIds: string[] = [];
  people.forEach((_, i) => {
    for (const k of [3 * i, 3 * i + 1, 3 * i + 2]) {
      events.push(signUpEvents[k]!);
      eventIds.push(signUpIds[k]!);
    }
    for (const { event, id } of later.get(i) ?? []) {
      events.push(event);
      eventIds.push(id);
    }
  });
  await recordEventsWithIds(trx, events, eventIds);

  return people.map((_, i) => {
    const subscription = outcomes[i]!;
    return {
      token: renderToken(tokens[i]!),
      customer: customerObjects[i]!,
      subscription: subscription instanceof KessaiError || !('row' in subscription) ? subscription : unsettled(subscription),
    };
  });
}

/** A draft left without an outcome: every draft is either stored or declined above. */
function unsettled(draft: { readonly row: SubscriptionRow }): never {
  throw new Error(`subscription ${draft.row.subscription_id} was neither stored nor declined`);
}
