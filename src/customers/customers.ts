/**
 * Customers (v1 §4.4): a merchant's payer, holding cards and a default card. Create, retrieve,
 * update, delete (softly), list. Every change writes its `customer.*` event in the same
 * transaction (service rules §5).
 */
import type { Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { Database } from '../db/schema';
import { reject } from '../domain/errors';
import { createMetadata, mergeMetadata } from '../domain/metadata';
import { toUnixSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvents, type EventInput } from '../events/outbox';
import { defineOperation } from '../operations/define';
import { DEFAULT_LIMIT, listObject, PAGINATION_PARAMS, readPage, type ListObject, inPage } from '../operations/pagination';
import { hasParam, optionalFlexibleId, optionalString, readParams, requireString, type Params } from '../operations/params';
import { renderCard, type CardObject } from './card-object';
import { attachCardFromToken, cardDeletionEvents, cardPagesOf, cardsUrl, EMAIL_PATTERN, requireCustomerCard, setDefaultCard, type DeletedObject } from './cards';
import { findCustomer, type CustomerRow } from './customer-record';

export const CUSTOMERS_URL = '/v1/customers';

/**
 * A chosen customer id: half-width letters, digits, `_` and `-`, 1 to 100 characters. The service
 * does not publish its rule; this one keeps ids safe in URL paths and form syntax (docs/decisions.md).
 */
export { FLEXIBLE_ID_PATTERN } from '../operations/params';
/** Longest `description`, in characters (a decision, like the real service's 255). */
export const MAX_DESCRIPTION_LENGTH = 255;

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
  };
}

/** The customer as the API shows it, with the default page of its cards (v1 §2.8). */
async function customerObject(executor: Kysely<Database>, caller: Caller, row: CustomerRow): Promise<CustomerObject> {
  const pages = await cardPagesOf(executor, caller, [row.customer_id]);
  return renderCustomer(row, pages.get(row.customer_id) ?? listObject([], { limit: DEFAULT_LIMIT }, cardsUrl(row.customer_id)));
}

/** `email` and `description` as sent: undefined when absent, null when sent empty (clears it). */
function readContact(params: Params): { email?: string | null; description?: string | null } {
  const out: { email?: string | null; description?: string | null } = {};
  const email = optionalString(params, 'email', { code: 'invalid_email' });
  if (email !== undefined) {
    if (email !== '' && !EMAIL_PATTERN.test(email)) reject('invalid_email', 'email', 'email must be an e-mail address of at most 255 characters');
    out.email = email === '' ? null : email;
  }
  const description = optionalString(params, 'description', { code: 'invalid_string_length' });
  if (description !== undefined) {
    if ([...description].length > MAX_DESCRIPTION_LENGTH) reject('invalid_string_length', 'description', `description must be at most ${MAX_DESCRIPTION_LENGTH} characters`);
    out.description = description === '' ? null : description;
  }
  return out;
}

function eventOf(caller: Caller, type: string, data: { readonly id: string; readonly object: string }, at: Date): EventInput {
  return { accountId: caller.accountId, livemode: caller.livemode, type, data, at };
}

/** `customers.create`: `id` (chosen id), `email`, `description`, `card` (token → default card), `metadata`. */
export async function createCustomer(ctx: Context, caller: Caller, input: unknown): Promise<CustomerObject> {
  const params = readParams(input, ['id', 'email', 'description', 'card', 'metadata']);
  const chosenId = optionalFlexibleId(params);
  const contact = readContact(params);
  const tokenId = optionalString(params, 'card');
  const metadata = hasParam(params, 'metadata') ? (createMetadata(params.metadata, 'v1') as Record<string, string>) : {};
  const now = ctx.clock.now();
  const customerId = chosenId ?? ctx.ids.next('customer');
  return ctx.db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto('customers')
      .values({
        account_id: caller.accountId,
        livemode: caller.livemode,
        customer_id: customerId,
        email: contact.email ?? null,
        description: contact.description ?? null,
        default_card_id: null,
        metadata: JSON.stringify(metadata),
        created_at: now,
        updated_at: now,
      })
      // A soft-deleted customer keeps its id, so a chosen id is never reused (its charges still name it).
      .onConflict((oc) => oc.columns(['account_id', 'livemode', 'customer_id']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!inserted) return reject('already_exist_id', 'id', `Customer ${customerId} already exists.`);
    const events: EventInput[] = [];
    let row = inserted;
    if (tokenId !== undefined) {
      const card = await attachCardFromToken(trx, caller, customerId, tokenId, now, {});
      await setDefaultCard(trx, caller, customerId, card.card_id, now);
      row = { ...row, default_card_id: card.card_id };
    }
    const customer = await customerObject(trx, caller, row);
    events.push(eventOf(caller, 'customer.created', customer, now));
    for (const card of customer.cards.data) events.push(eventOf(caller, 'customer.card.created', card, now));
    await recordEvents(trx, ctx.ids, events);
    return customer;
  });
}

export async function retrieveCustomer(ctx: Context, caller: Caller, input: unknown): Promise<CustomerObject> {
  const params = readParams(input, ['id']);
  const row = await findCustomer(ctx.db, caller, requireString(params, 'id'), 'id');
  return customerObject(ctx.db, caller, row);
}

/**
 * `customers.update`: `email`, `description`, `metadata`, `card` (a token: adds the card and makes
 * it the default), `default_card` (a card the customer holds: `dont_has_this_card` otherwise).
 * When both are sent, `default_card` is applied last and wins.
 */
export async function updateCustomer(ctx: Context, caller: Caller, input: unknown): Promise<CustomerObject> {
  const params = readParams(input, ['id', 'email', 'description', 'default_card', 'card', 'metadata']);
  const customerId = requireString(params, 'id');
  const contact = readContact(params);
  const tokenId = optionalString(params, 'card');
  const defaultCardId = optionalString(params, 'default_card');
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findCustomer(trx, caller, customerId, 'id', true);
    const metadata = hasParam(params, 'metadata') ? (mergeMetadata(current.metadata, params.metadata, 'v1') as Record<string, string>) : current.metadata;
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
    const customer = await customerObject(trx, caller, row);
    events.push(eventOf(caller, 'customer.updated', customer, now));
    await recordEvents(trx, ctx.ids, events);
    return customer;
  });
}

/**
 * `customers.delete`: the customer and its cards are deleted softly in one transaction, with a
 * `customer.card.deleted` event per card and then `customer.deleted`.
 */
export async function deleteCustomer(ctx: Context, caller: Caller, input: unknown): Promise<DeletedObject> {
  const params = readParams(input, ['id']);
  const customerId = requireString(params, 'id');
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findCustomer(trx, caller, customerId, 'id', true);
    const customer = await customerObject(trx, caller, current);
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
    await recordEvents(trx, ctx.ids, [...cardDeletionEvents(caller, ordered, now), eventOf(caller, 'customer.deleted', customer, now)]);
    return { deleted: true, id: customerId, livemode: caller.livemode } as const;
  });
}

/** `customers.list`: pagination (v1 §4.1), newest first, ties broken by id (descending). */
export async function listCustomers(ctx: Context, caller: Caller, input: unknown): Promise<ListObject<CustomerObject>> {
  const params = readParams(input, PAGINATION_PARAMS);
  const page = readPage(params);
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
  const customers = rows.map((row) => renderCustomer(row, cardPages.get(row.customer_id) ?? listObject([], { limit: DEFAULT_LIMIT }, cardsUrl(row.customer_id))));
  return listObject(customers, page, CUSTOMERS_URL);
}

export const CUSTOMER_OPERATIONS = [
  defineOperation('customers.create', createCustomer),
  defineOperation('customers.retrieve', retrieveCustomer),
  defineOperation('customers.update', updateCustomer),
  defineOperation('customers.delete', deleteCustomer),
  defineOperation('customers.list', listCustomers),
] as const;
