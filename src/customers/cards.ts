/**
 * A customer's stored cards (v1 §2.3, §4.4): created from a token, updated (billing details and
 * metadata only), deleted softly, listed newest first. Every change writes its
 * `customer.card.*` event in the same transaction (service rules §5).
 */
import { sql, type Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { isUniqueViolation } from '../db/errors';
import type { Database } from '../db/schema';
import { KessaiError, reject } from '../domain/errors';
import { createMetadata, mergeMetadata } from '../domain/metadata';
import type { Context } from '../engine/context';
import { recordEvent, type EventInput } from '../events/outbox';
import { defineOperation } from '../operations/define';
import { CHILD_LIST_PAGE, listObject, PAGINATION_PARAMS, readPage, type ListObject, type Page } from '../operations/pagination';
import { hasParam, optionalBoolean, optionalString, readParams, requireString, type Params } from '../operations/params';
import { CARD_NAME_PATTERN } from '../processor/test-cards';
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
  // A token that finished 3-D Secure gives the card its status (i15c).
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
 * `has_more` is known.
 */
export async function cardPagesOf(executor: Kysely<Database>, caller: Caller, customerIds: readonly string[], page: Page = CHILD_LIST_PAGE): Promise<Map<string, ListObject<CardObject>>> {
  const pages = new Map<string, ListObject<CardObject>>();
  if (customerIds.length === 0) return pages;
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
  const byCustomer = new Map<string, CardObject[]>(customerIds.map((id) => [id, []]));
  for (const row of rows) byCustomer.get(row.customer_id)?.push(renderCard(row));
  for (const [customerId, cards] of byCustomer) pages.set(customerId, listObject(cards, page, cardsUrl(customerId)));
  return pages;
}

const CARD_CREATE_PARAMS = ['customer', 'card', 'default', 'metadata'] as const;

/** `cards.create`: `customer`, `card` (token), `default` (make it the default card), `metadata`. */
export async function createCard(ctx: Context, caller: Caller, input: unknown): Promise<CardObject> {
  const params = readParams(input, CARD_CREATE_PARAMS);
  const customerId = requireString(params, 'customer');
  const tokenId = requireString(params, 'card');
  const makeDefault = optionalBoolean(params, 'default') ?? false;
  const metadata = hasParam(params, 'metadata') ? createMetadata(params.metadata, 'v1') : {};
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const customer = await findCustomer(trx, caller, customerId, 'customer', true);
    const row = await attachCardFromToken(trx, caller, customer.customer_id, tokenId, now, metadata as Record<string, string>);
    // A customer's first card becomes the default even without `default`: a customer with cards but
    // no default card could not be charged by customer id.
    if (makeDefault || customer.default_card_id === null) {
      await setDefaultCard(trx, caller, customer.customer_id, row.card_id, now);
    }
    const card = renderCard(row);
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'customer.card.created', data: card, at: now });
    return card;
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

export async function retrieveCard(ctx: Context, caller: Caller, input: unknown): Promise<CardObject> {
  const params = readParams(input, ['customer', 'id']);
  const customerId = requireString(params, 'customer');
  const cardId = requireString(params, 'id');
  await findCustomer(ctx.db, caller, customerId, 'customer');
  return renderCard(await cardOrNotFound(ctx.db, caller, customerId, cardId));
}

/** v1 §4.4: "`exp_month`, `exp_year` and `cvc` are no longer accepted" — they are unknown keys here. */
const CARD_UPDATE_FIELDS = ['address_state', 'address_city', 'address_line1', 'address_line2', 'address_zip', 'country', 'name', 'email', 'phone'] as const;
type CardUpdateField = (typeof CARD_UPDATE_FIELDS)[number];

/**
 * An e-mail address as far as it can be checked without sending mail: at most 255 characters, one
 * @, a dot in the domain, no spaces. Shared with customers.ts.
 */
export const EMAIL_PATTERN = /^(?=.{3,255}$)[^\s@]+@[^\s@]+\.[^\s@]+$/;

/**
 * Checks of the card's billing details. The spec fixes `name` (2..45 half-width), `country`
 * (2-letter ISO code) and `phone` (E.164); the lengths of the address fields are decisions
 * (docs/decisions.md). The empty string clears a field.
 */
const CARD_FIELD_RULES: Readonly<Record<CardUpdateField, { readonly pattern: RegExp; readonly code: Parameters<typeof reject>[0]; readonly rule: string }>> = {
  address_zip: { pattern: /^[A-Za-z0-9 -]{1,20}$/, code: 'invalid_card_address_zip', rule: '1 to 20 letters, digits, spaces or hyphens' },
  address_state: { pattern: /^[^\p{Cc}]{1,100}$/u, code: 'invalid_card_address_state', rule: '1 to 100 characters' },
  address_city: { pattern: /^[^\p{Cc}]{1,100}$/u, code: 'invalid_card_address_city', rule: '1 to 100 characters' },
  address_line1: { pattern: /^[^\p{Cc}]{1,200}$/u, code: 'invalid_card_address_line', rule: '1 to 200 characters' },
  address_line2: { pattern: /^[^\p{Cc}]{1,200}$/u, code: 'invalid_card_address_line', rule: '1 to 200 characters' },
  country: { pattern: /^[A-Z]{2}$/, code: 'invalid_card_country', rule: 'a 2-letter ISO 3166-1 code in capitals' },
  name: { pattern: CARD_NAME_PATTERN, code: 'invalid_card_name', rule: '2 to 45 half-width letters, digits, spaces, periods or hyphens' },
  email: { pattern: EMAIL_PATTERN, code: 'invalid_email', rule: 'an e-mail address of at most 255 characters' },
  // E.164: "+", a country code not starting with 0, at most 15 digits in all. The catalogue has no
  // phone code, so a bad phone is invalid_param_key on `phone` (see params.ts).
  phone: { pattern: /^\+[1-9]\d{1,14}$/, code: 'invalid_param_key', rule: 'an E.164 number such as +819012345678' },
};

function readCardChanges(params: Params): Partial<Record<CardUpdateField, string | null>> {
  const changes: Partial<Record<CardUpdateField, string | null>> = {};
  for (const field of CARD_UPDATE_FIELDS) {
    const value = optionalString(params, field, { code: CARD_FIELD_RULES[field].code });
    if (value === undefined) continue;
    if (value === '') {
      changes[field] = null;
      continue;
    }
    const rule = CARD_FIELD_RULES[field];
    if (!rule.pattern.test(value)) reject(rule.code, field, `${field} must be ${rule.rule}`);
    changes[field] = value;
  }
  return changes;
}

export async function updateCard(ctx: Context, caller: Caller, input: unknown): Promise<CardObject> {
  const params = readParams(input, ['customer', 'id', ...CARD_UPDATE_FIELDS, 'metadata']);
  const customerId = requireString(params, 'customer');
  const cardId = requireString(params, 'id');
  const changes = readCardChanges(params);
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    await findCustomer(trx, caller, customerId, 'customer', true);
    const current = await cardOrNotFound(trx, caller, customerId, cardId, true);
    const metadata = hasParam(params, 'metadata') ? (mergeMetadata(current.metadata, params.metadata, 'v1') as Record<string, string>) : current.metadata;
    const row: CardRow = { ...current, ...changes, metadata, updated_at: now };
    await trx
      .updateTable('cards')
      .set({ ...changes, metadata: JSON.stringify(metadata), updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('card_id', '=', cardId)
      .execute();
    const card = renderCard(row);
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'customer.card.updated', data: card, at: now });
    return card;
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
export async function deleteCard(ctx: Context, caller: Caller, input: unknown): Promise<DeletedObject> {
  const params = readParams(input, ['customer', 'id']);
  const customerId = requireString(params, 'customer');
  const cardId = requireString(params, 'id');
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

export async function listCards(ctx: Context, caller: Caller, input: unknown): Promise<ListObject<CardObject>> {
  const params = readParams(input, ['customer', ...PAGINATION_PARAMS]);
  const customerId = requireString(params, 'customer');
  const page = readPage(params);
  await findCustomer(ctx.db, caller, customerId, 'customer');
  const pages = await cardPagesOf(ctx.db, caller, [customerId], page);
  return pages.get(customerId) ?? listObject([], page, cardsUrl(customerId));
}

/** Events of cards deleted together with their customer; one statement for all of them. */
export function cardDeletionEvents(caller: Caller, cards: readonly CardRow[], at: Date): EventInput[] {
  return cards.map((card) => ({ accountId: caller.accountId, livemode: caller.livemode, type: 'customer.card.deleted', data: renderCard(card), at }));
}

export const CARD_OPERATIONS = [
  defineOperation('cards.create', createCard),
  defineOperation('cards.retrieve', retrieveCard),
  defineOperation('cards.update', updateCard),
  defineOperation('cards.delete', deleteCard),
  defineOperation('cards.list', listCards),
] as const;
