/**
 * A customer's stored cards (v1 §2.3, §4.4): created from a token, updated (billing details and
 * metadata only), deleted softly, listed newest first, as typed commands; the v1 codec
 * (src/api/v1/cards.ts) reads the parameters and renders the results. Every change writes its
 * `customer.card.*` event in the same transaction (service rules §5).
 */
import { sql, type Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { isUniqueViolation } from '../db/errors';
import type { Database } from '../db/schema';
import { KessaiError, reject } from '../domain/errors';
import { mergeMetadata, type MetadataFlavour } from '../domain/metadata';
import type { Context } from '../engine/context';
import { recordEvent, type EventInput } from '../events/outbox';
import { CHILD_LIST_PAGE, listObject, type ListObject, type Page } from '../operations/pagination';
import { renderCard, type CardObject, type CardRow } from './card-object';
import { finishedTokenThreeDSecure } from './token-three-d-secure';
import { findCustomer } from './customer-record';
import { consumeToken, type TokenRow } from './tokens';

export function cardsUrl(customerId: string): string {
  return `/v1/customers/${customerId}/cards`;
}

const SAME_CARD = { param: 'card', message: 'The customer already has a card with the same number and expiry.' } as const;

function sameCardError(): KessaiError {
  return new KessaiError('already_have_the_same_card', SAME_CARD);
}

/** The card a token becomes when attached to a customer at `at` (the token's card id and details). */
export function cardOfToken(token: TokenRow, customerId: string, at: Date, metadata: Readonly<Record<string, string>>): CardRow {
  return {
    account_id: token.account_id,
    livemode: token.livemode,
    card_id: token.card_id,
    customer_id: customerId,
    fingerprint: token.fingerprint,
    brand: token.brand,
    last4: token.last4,
    exp_month: token.exp_month,
    exp_year: token.exp_year,
    funding: token.funding,
    country: token.country,
    issuer: token.issuer,
    name: token.name,
    address_zip: null,
    address_state: null,
    address_city: null,
    address_line1: null,
    address_line2: null,
    email: null,
    phone: null,
    cvc_check: token.cvc_check,
    three_d_secure_status: null,
    metadata,
    created_at: at,
    updated_at: at,
    deleted_at: null,
  };
}

/**
 * Turns a token into a card of the customer, inside the caller's transaction: consumes the token,
 * refuses a card with the same number (fingerprint) and expiry the customer already holds
 * (`already_have_the_same_card`), inserts the card. The caller has locked the customer row, so the
 * check-then-insert does not race; the unique index stays the last line of defence.
 */
export async function attachCardFromToken(
  trx: Kysely<Database>,
  caller: Caller,
  customerId: string,
  tokenId: string,
  at: Date,
  metadata: Readonly<Record<string, string>>,
): Promise<CardRow> {
  const token = await consumeToken(trx, caller, tokenId, 'card', at);
  const duplicate = await trx
    .selectFrom('cards')
    .select('card_id')
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('customer_id', '=', customerId)
    .where('fingerprint', '=', token.fingerprint)
    .where('exp_month', '=', token.exp_month)
    .where('exp_year', '=', token.exp_year)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  if (duplicate) throw sameCardError();
  // A token that finished 3-D Secure gives the card its status.
  const row = { ...cardOfToken(token, customerId, at, metadata), three_d_secure_status: (await finishedTokenThreeDSecure(trx, caller, tokenId)) ?? null };
  try {
    await trx.insertInto('cards').values({ ...row, metadata: JSON.stringify(metadata) }).execute();
  } catch (error) {
    // The same card was attached by a concurrent request.
    if (isUniqueViolation(error)) throw new KessaiError('already_have_the_same_card', { ...SAME_CARD, cause: error });
    throw error;
  }
  return row;
}

/** The live (not deleted) card of a customer, or undefined. */
async function findCard(executor: Kysely<Database>, caller: Caller, customerId: string, cardId: string, lock = false): Promise<CardRow | undefined> {
  let query = executor
    .selectFrom('cards')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('customer_id', '=', customerId)
    .where('card_id', '=', cardId)
    .where('deleted_at', 'is', null);
  if (lock) query = query.forUpdate();
  return query.executeTakeFirst();
}

/** A card the customer holds, for `default_card` (`dont_has_this_card` otherwise). */
export async function requireCustomerCard(executor: Kysely<Database>, caller: Caller, customerId: string, cardId: string, param: string): Promise<CardRow> {
  const card = await findCard(executor, caller, customerId, cardId);
  if (!card) return reject('dont_has_this_card', param, `Customer ${customerId} does not have card ${cardId}.`);
  return card;
}

async function cardOrNotFound(executor: Kysely<Database>, caller: Caller, customerId: string, cardId: string, lock = false): Promise<CardRow> {
  const card = await findCard(executor, caller, customerId, cardId, lock);
  if (!card) return reject('invalid_id', 'id', `No such card: ${cardId}`);
  return card;
}

/**
 * One page of cards of each of several customers, in one query (a customer list renders the cards
 * of up to 100 customers): rows numbered per customer, newest first, keeping `limit + 1` of each so
 * `has_more` is known. Every customer asked for has an entry.
 */
async function cardRowPagesOf(executor: Kysely<Database>, caller: Caller, customerIds: readonly string[], page: Page): Promise<Map<string, CardRow[]>> {
  const byCustomer = new Map<string, CardRow[]>(customerIds.map((id) => [id, []]));
  if (customerIds.length === 0) return byCustomer;
  const rows = await executor
    .selectFrom((eb) =>
      eb
        .selectFrom('cards')
        .selectAll()
        .select(sql<number>`row_number() OVER (PARTITION BY customer_id ORDER BY created_at DESC, card_id DESC)`.as('position'))
        .where('account_id', '=', caller.accountId)
        .where('livemode', '=', caller.livemode)
        .where('customer_id', 'in', [...customerIds])
        .where('deleted_at', 'is', null)
        .$if(page.createdFrom !== undefined, (q) => q.where('created_at', '>=', page.createdFrom!))
        .$if(page.createdBefore !== undefined, (q) => q.where('created_at', '<', page.createdBefore!))
        .as('numbered'),
    )
    .selectAll()
    .where('position', '>', page.offset)
    .where('position', '<=', page.offset + page.limit + 1)
    .orderBy('customer_id')
    .orderBy('position')
    .execute();
  // The window's position column is the query's own; the card rows stop before it.
  for (const { position: _position, ...row } of rows) byCustomer.get(row.customer_id)?.push(row);
  return byCustomer;
}

/** The v1 card list of each of several customers (see cardRowPagesOf). */
export async function cardPagesOf(executor: Kysely<Database>, caller: Caller, customerIds: readonly string[], page: Page = CHILD_LIST_PAGE): Promise<Map<string, ListObject<CardObject>>> {
  const pages = new Map<string, ListObject<CardObject>>();
  for (const [customerId, rows] of await cardRowPagesOf(executor, caller, customerIds, page)) pages.set(customerId, listObject(rows.map(renderCard), page, cardsUrl(customerId)));
  return pages;
}

/** A card of a customer, as retrieve and delete name it. */
export interface CardCommand {
  readonly customerId: string;
  readonly id: string;
}

/** `cards.create` as a command: every value checked by the codec that built it. */
export interface CreateCardCommand {
  readonly customerId: string;
  /** The token the card is made from. */
  readonly tokenId: string;
  /** Make it the customer's default card (a first card becomes the default anyway). */
  readonly makeDefault: boolean;
  readonly metadata: Readonly<Record<string, string>>;
}

/** `cards.create`: the token becomes a card of the customer; `customer.card.created`. */
export async function createCard(ctx: Context, caller: Caller, command: CreateCardCommand): Promise<CardRow> {
  const { customerId, tokenId, makeDefault, metadata } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const customer = await findCustomer(trx, caller, customerId, 'customer', true);
    const row = await attachCardFromToken(trx, caller, customer.customer_id, tokenId, now, metadata);
    // A customer's first card becomes the default even without `default`: a customer with cards but
    // no default card could not be charged by customer id.
    if (makeDefault || customer.default_card_id === null) {
      await setDefaultCard(trx, caller, customer.customer_id, row.card_id, now);
    }
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'customer.card.created', data: renderCard(row), at: now });
    return row;
  });
}

export async function setDefaultCard(trx: Kysely<Database>, caller: Caller, customerId: string, cardId: string | null, at: Date): Promise<void> {
  await trx
    .updateTable('customers')
    .set({ default_card_id: cardId, updated_at: at })
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('customer_id', '=', customerId)
    .execute();
}

export async function retrieveCard(ctx: Context, caller: Caller, command: CardCommand): Promise<CardRow> {
  await findCustomer(ctx.db, caller, command.customerId, 'customer');
  return cardOrNotFound(ctx.db, caller, command.customerId, command.id);
}

/** The billing details a card update may change (v1 §4.4); `exp_month`, `exp_year` and `cvc` are not among them. */
export const CARD_UPDATE_FIELDS = ['address_state', 'address_city', 'address_line1', 'address_line2', 'address_zip', 'country', 'name', 'email', 'phone'] as const;
export type CardUpdateField = (typeof CARD_UPDATE_FIELDS)[number];

/** A postal code (a card's `address_zip`, a v2 billing address's `zip`): 1 to 20 letters, digits, spaces or hyphens. */
export const POSTAL_CODE_PATTERN = /^[A-Za-z0-9 -]{1,20}$/;

/** `cards.update` as a command: the billing details sent (null clears one) and a metadata change under its API's rules. */
export interface UpdateCardCommand extends CardCommand {
  readonly changes: Partial<Record<CardUpdateField, string | null>>;
  /** The metadata parameter as sent, merged into the stored metadata by `flavour`'s rules. */
  readonly metadata: { readonly update: unknown; readonly flavour: MetadataFlavour } | undefined;
}

export async function updateCard(ctx: Context, caller: Caller, command: UpdateCardCommand): Promise<CardRow> {
  const { customerId, id: cardId, changes } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    await findCustomer(trx, caller, customerId, 'customer', true);
    const current = await cardOrNotFound(trx, caller, customerId, cardId, true);
    const metadata = command.metadata === undefined ? current.metadata : (mergeMetadata(current.metadata, command.metadata.update, command.metadata.flavour) as Record<string, string>);
    const row: CardRow = { ...current, ...changes, metadata, updated_at: now };
    await trx
      .updateTable('cards')
      .set({ ...changes, metadata: JSON.stringify(metadata), updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('card_id', '=', cardId)
      .execute();
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'customer.card.updated', data: renderCard(row), at: now });
    return row;
  });
}

export interface DeletedObject {
  readonly deleted: true;
  readonly id: string;
  readonly livemode: boolean;
}

/**
 * Deletes a card (softly). If it was the default card, the customer is left without one rather
 * than silently switching to another card: which card pays must stay the merchant's choice.
 */
export async function deleteCard(ctx: Context, caller: Caller, command: CardCommand): Promise<DeletedObject> {
  const { customerId, id: cardId } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const customer = await findCustomer(trx, caller, customerId, 'customer', true);
    const current = await cardOrNotFound(trx, caller, customerId, cardId, true);
    await trx
      .updateTable('cards')
      .set({ deleted_at: now, updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('card_id', '=', cardId)
      .execute();
    if (customer.default_card_id === cardId) await setDefaultCard(trx, caller, customerId, null, now);
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'customer.card.deleted', data: renderCard(current), at: now });
    return { deleted: true, id: cardId, livemode: caller.livemode } as const;
  });
}

/** `cards.list`: one page of the customer's cards, newest first, one past the limit. */
export async function listCards(ctx: Context, caller: Caller, command: { readonly customerId: string; readonly page: Page }): Promise<CardRow[]> {
  const { customerId, page } = command;
  await findCustomer(ctx.db, caller, customerId, 'customer');
  const pages = await cardRowPagesOf(ctx.db, caller, [customerId], page);
  return pages.get(customerId) ?? [];
}

/** Events of cards deleted together with their customer; one statement for all of them. */
export function cardDeletionEvents(caller: Caller, cards: readonly CardRow[], at: Date): EventInput[] {
  return cards.map((card) => ({ accountId: caller.accountId, livemode: caller.livemode, type: 'customer.card.deleted', data: renderCard(card), at }));
}
