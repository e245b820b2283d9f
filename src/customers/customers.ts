/**
 * Customers (v1 §4.4): a merchant's payer, holding cards and a default card. Create, retrieve,
 * update, delete (softly), list, as typed commands; the v1 codec (src/api/v1/customers.ts) reads
 * the parameters and renders the results. Every change writes its `customer.*` event in the same
 * transaction (service rules §5).
 */
import { clockOfNewCustomer } from '../test-clocks/test-clocks';
import type { Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database } from '../db/schema';
import { reject } from '../domain/errors';
import { mergeMetadata, type MetadataFlavour } from '../domain/metadata';
import { toUnixSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvents, type ApiVersion, type EventInput } from '../events/outbox';
import { DEFAULT_LIMIT, inPage, listObject, type ListObject, type Page } from '../operations/pagination';
import { renderCard, type CardObject } from './card-object';
import { attachCardFromToken, cardDeletionEvents, cardPagesOf, cardsUrl, requireCustomerCard, setDefaultCard, type DeletedObject } from './cards';
import { findCustomer, renderV2Customer, type CustomerRow } from './customer-record';

export const CUSTOMERS_URL = '/v1/customers';

/**
 * A chosen customer id: half-width letters, digits, `_` and `-`, 1 to 100 characters. The service
 * does not publish its rule; this one keeps ids safe in URL paths and form syntax (docs/decisions/customers-and-cards.md).
 */
export { FLEXIBLE_ID_PATTERN } from '../operations/params';

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type CustomerObject = {
  readonly id: string;
  readonly object: 'customer';
  readonly livemode: boolean;
  readonly created: number;
  readonly default_card: string | null;
  readonly email: string | null;
  readonly description: string | null;
  readonly metadata: Readonly<Record<string, string>>;
  readonly cards: ListObject<CardObject>;
  /** The id of the test clock the customer is on (docs/decisions/test-clocks.md); null when none. */
  readonly test_clock: string | null;
};

export function renderCustomer(row: CustomerRow, cards: ListObject<CardObject>): CustomerObject {
  return {
    id: row.customer_id,
    object: 'customer',
    livemode: row.livemode,
    created: toUnixSeconds(row.created_at),
    default_card: row.default_card_id,
    email: row.email,
    description: row.description,
    metadata: row.metadata,
    cards,
    test_clock: row.test_clock_id,
  };
}

/** A customer as an operation returns it: its row and the default page of its cards (v1 §2.8). */
export interface CustomerWithCards {
  readonly row: CustomerRow;
  readonly cards: ListObject<CardObject>;
}

/** The one renderer of a customer, over what an operation returns. */
export function renderCustomerWithCards(customer: CustomerWithCards): CustomerObject {
  return renderCustomer(customer.row, customer.cards);
}

function emptyCardPage(customerId: string): ListObject<CardObject> {
  return listObject([], { limit: DEFAULT_LIMIT }, cardsUrl(customerId));
}

/** The customer with the default page of its cards. */
async function withCards(executor: Kysely<Database>, caller: Caller, row: CustomerRow): Promise<CustomerWithCards> {
  const pages = await cardPagesOf(executor, caller, [row.customer_id]);
  return { row, cards: pages.get(row.customer_id) ?? emptyCardPage(row.customer_id) };
}

function eventOf(caller: Caller, type: string, data: { readonly id: string; readonly object: string }, at: Date): EventInput {
  return { accountId: caller.accountId, livemode: caller.livemode, type, data, at };
}

/**
 * A change of `email` or `description`: undefined when not sent, null when sent empty (clears it).
 * Checked by the codec that built it.
 */
export interface CustomerContact {
  readonly email?: string | null;
  readonly description?: string | null;
}

/** `customers.create` as a command. */
export interface CreateCustomerCommand {
  /** A chosen id, or undefined for a generated one. */
  readonly id: string | undefined;
  readonly contact: CustomerContact;
  /** A token that becomes the customer's default card. */
  readonly card: string | undefined;
  readonly metadata: Readonly<Record<string, string>>;
  /** The test clock the customer is attached to (test mode; default: the account's default clock, if any). */
  readonly testClock?: string | undefined;
}

/**
 * Inserts a new customer row (v1 and v2 create alike); a taken id is `already_exist_id` on `id`. A
 * soft-deleted customer keeps its id, so a chosen id is never reused (its charges still name it).
 */
export async function insertCustomer(
  trx: Kysely<Database>,
  caller: Caller,
  values: { readonly id: string; readonly contact: CustomerContact; readonly metadata: Readonly<Record<string, unknown>>; readonly testClock?: string | undefined },
  now: Date,
): Promise<CustomerRow> {
  const testClockId = await clockOfNewCustomer(trx, caller, values.testClock);
  const inserted = await trx
    .insertInto('customers')
    .values({
      account_id: caller.accountId,
      livemode: caller.livemode,
      customer_id: values.id,
      test_clock_id: testClockId,
      email: values.contact.email ?? null,
      description: values.contact.description ?? null,
      default_card_id: null,
      metadata: JSON.stringify(values.metadata),
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.columns(['account_id', 'livemode', 'customer_id']).doNothing())
    .returningAll()
    .executeTakeFirst();
  if (!inserted) return reject('already_exist_id', 'id', `Customer ${values.id} already exists.`);
  return inserted;
}

/** Creates a customer (and its default card from `card`), writing `customer.created` and `customer.card.created`. */
export async function createCustomer(ctx: Context, caller: Caller, command: CreateCustomerCommand): Promise<CustomerWithCards> {
  const { contact, card: tokenId, metadata } = command;
  const now = ctx.clock.now();
  const customerId = command.id ?? ctx.ids.next('customer');
  return ctx.db.transaction().execute(async (trx) => {
    const inserted = await insertCustomer(trx, caller, { id: customerId, contact, metadata, testClock: command.testClock }, now);
    const events: EventInput[] = [];
    let row = inserted;
    if (tokenId !== undefined) {
      const card = await attachCardFromToken(trx, caller, customerId, tokenId, now, {});
      await setDefaultCard(trx, caller, customerId, card.card_id, now);
      row = { ...row, default_card_id: card.card_id };
    }
    const customer = await withCards(trx, caller, row);
    events.push(eventOf(caller, 'customer.created', renderCustomerWithCards(customer), now));
    for (const card of customer.cards.data) events.push(eventOf(caller, 'customer.card.created', card, now));
    await recordEvents(trx, ctx.ids, events);
    return customer;
  });
}

export async function retrieveCustomer(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<CustomerWithCards> {
  const row = await findCustomer(ctx.db, caller, command.id, 'id');
  return withCards(ctx.db, caller, row);
}

/** `customers.update` as a command. */
export interface UpdateCustomerCommand {
  readonly id: string;
  readonly contact: CustomerContact;
  /** A token: adds the card and makes it the default. */
  readonly card: string | undefined;
  /** A card the customer holds, made the default. */
  readonly defaultCard: string | undefined;
  /** The metadata parameter as sent, merged into the stored metadata by `flavour`'s rules. */
  readonly metadata: { readonly update: unknown; readonly flavour: MetadataFlavour } | undefined;
}

/**
 * `customers.update`: `email`, `description`, `metadata`, `card` (a token: adds the card and makes
 * it the default), `default_card` (a card the customer holds: `dont_has_this_card` otherwise).
 * When both are sent, `default_card` is applied last and wins.
 */
export async function updateCustomer(ctx: Context, caller: Caller, command: UpdateCustomerCommand): Promise<CustomerWithCards> {
  const { id: customerId, contact, card: tokenId, defaultCard: defaultCardId } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findCustomer(trx, caller, customerId, 'id', true);
    const metadata = command.metadata === undefined ? current.metadata : (mergeMetadata(current.metadata, command.metadata.update, command.metadata.flavour) as Record<string, string>);
    const events: EventInput[] = [];
    let defaultCard = current.default_card_id;
    if (tokenId !== undefined) {
      const card = await attachCardFromToken(trx, caller, customerId, tokenId, now, {});
      defaultCard = card.card_id;
      events.push(eventOf(caller, 'customer.card.created', renderCard(card), now));
    }
    if (defaultCardId !== undefined) defaultCard = (await requireCustomerCard(trx, caller, customerId, defaultCardId, 'default_card')).card_id;
    const row: CustomerRow = { ...current, ...contact, default_card_id: defaultCard, metadata, updated_at: now };
    await trx
      .updateTable('customers')
      .set({ ...contact, default_card_id: defaultCard, metadata: JSON.stringify(metadata), updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('customer_id', '=', customerId)
      .execute();
    const customer = await withCards(trx, caller, row);
    events.push(eventOf(caller, 'customer.updated', renderCustomerWithCards(customer), now));
    await recordEvents(trx, ctx.ids, events);
    return customer;
  });
}

/**
 * `customers.delete`: the customer and its cards are deleted softly in one transaction, with a
 * `customer.card.deleted` event per card and then `customer.deleted` (v2: the v2 event).
 */
export async function deleteCustomer(ctx: Context, caller: Caller, command: { readonly id: string; readonly apiVersion?: ApiVersion }): Promise<DeletedObject> {
  const customerId = command.id;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findCustomer(trx, caller, customerId, 'id', true);
    const customer = renderCustomerWithCards(await withCards(trx, caller, current));
    const cards = await trx
      .updateTable('cards')
      .set({ deleted_at: now, updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('customer_id', '=', customerId)
      .where('deleted_at', 'is', null)
      .returningAll()
      .execute();
    await trx
      .updateTable('customers')
      .set({ deleted_at: now, updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('customer_id', '=', customerId)
      .execute();
    // Oldest card first, so the events read in the order the cards were added.
    const ordered = [...cards].sort((a, b) => a.created_at.getTime() - b.created_at.getTime() || a.card_id.localeCompare(b.card_id));
    // The v2 API's deletion reports the v2 customer in a v2 event (v2 §6.1); the cards' events stay v1.
    const deletedEvent = command.apiVersion === 'v2' ? { ...eventOf(caller, 'customer.deleted', renderV2Customer(current), now), apiVersion: 'v2' as const } : eventOf(caller, 'customer.deleted', customer, now);
    await recordEvents(trx, ctx.ids, [...cardDeletionEvents(caller, ordered, now), deletedEvent]);
    return { deleted: true, id: customerId, livemode: caller.livemode } as const;
  });
}

/** `customers.list`: one page (v1 §4.1), newest first, ties broken by id (descending), one past the limit. */
export async function listCustomers(ctx: Context, caller: Caller, page: Page): Promise<CustomerWithCards[]> {
  const rows = await ctx.db
    .selectFrom('customers')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('deleted_at', 'is', null)
    .$call(inPage(page, 'customer_id'))
    .execute();
  // One query for the cards of every customer on the page, not one per customer.
  const cardPages = await cardPagesOf(ctx.db, caller, rows.slice(0, page.limit).map((row) => row.customer_id));
  return rows.map((row) => ({ row, cards: cardPages.get(row.customer_id) ?? emptyCardPage(row.customer_id) }));
}
