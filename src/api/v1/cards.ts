/**
 * The v1 codec of a customer's cards (v1 §4.4): form and query parameters → card commands under
 * the v1 rules (v1 metadata, the empty string clears a billing detail), cards → v1 card objects.
 * The checks run here, in the order v1 has always given them, before anything is read or written.
 */
import { renderCard } from '../../customers/card-object';
import {
  CARD_UPDATE_FIELDS,
  cardsUrl,
  createCard,
  deleteCard,
  POSTAL_CODE_PATTERN,
  listCards,
  retrieveCard,
  updateCard,
  type CardCommand,
  type CardUpdateField,
  type CreateCardCommand,
  type UpdateCardCommand,
} from '../../customers/cards';
import { reject } from '../../domain/errors';
import { createMetadata } from '../../domain/metadata';
import { defineCommandOperation } from '../../operations/define';
import { listObject, PAGINATION_PARAMS, readPage, type Page } from '../../operations/pagination';
import { hasParam, optionalBoolean, optionalString, readParams, requireString, type Params } from '../../operations/params';
import { CARD_NAME_PATTERN, CARD_NAME_RULE, EMAIL_PATTERN, EMAIL_RULE } from '../../domain/limits';

/** `cards.create`: `customer`, `card` (token), `default` (make it the default card), `metadata`. */
export function decodeCreateCard(input: unknown): CreateCardCommand {
  const params = readParams(input, ['customer', 'card', 'default', 'metadata']);
  const customerId = requireString(params, 'customer');
  const tokenId = requireString(params, 'card');
  const makeDefault = optionalBoolean(params, 'default') ?? false;
  const metadata = hasParam(params, 'metadata') ? (createMetadata(params.metadata, 'v1') as Record<string, string>) : {};
  return { customerId, tokenId, makeDefault, metadata };
}

/** `cards.retrieve` and `cards.delete`: the customer's path, `customer` and `id`. */
export function decodeCard(input: unknown): CardCommand {
  const params = readParams(input, ['customer', 'id']);
  const customerId = requireString(params, 'customer');
  return { customerId, id: requireString(params, 'id') };
}

/**
 * Checks of the card's billing details. The spec fixes `name` (2..45 half-width), `country`
 * (2-letter ISO code) and `phone` (E.164); the lengths of the address fields are decisions
 * (docs/decisions/customers-and-cards.md). The empty string clears a field.
 */
const CARD_FIELD_RULES: Readonly<Record<CardUpdateField, { readonly pattern: RegExp; readonly code: Parameters<typeof reject>[0]; readonly rule: string }>> = {
  address_zip: { pattern: POSTAL_CODE_PATTERN, code: 'invalid_card_address_zip', rule: '1 to 20 letters, digits, spaces or hyphens' },
  address_state: { pattern: /^[^\p{Cc}]{1,100}$/u, code: 'invalid_card_address_state', rule: '1 to 100 characters' },
  address_city: { pattern: /^[^\p{Cc}]{1,100}$/u, code: 'invalid_card_address_city', rule: '1 to 100 characters' },
  address_line1: { pattern: /^[^\p{Cc}]{1,200}$/u, code: 'invalid_card_address_line', rule: '1 to 200 characters' },
  address_line2: { pattern: /^[^\p{Cc}]{1,200}$/u, code: 'invalid_card_address_line', rule: '1 to 200 characters' },
  country: { pattern: /^[A-Z]{2}$/, code: 'invalid_card_country', rule: 'a 2-letter ISO 3166-1 code in capitals' },
  name: { pattern: CARD_NAME_PATTERN, code: 'invalid_card_name', rule: CARD_NAME_RULE },
  email: { pattern: EMAIL_PATTERN, code: 'invalid_email', rule: EMAIL_RULE },
  // E.164: "+", a country code not starting with 0, at most 15 digits in all. The catalogue has no
  // phone code, so a bad phone is invalid_param_key on `phone` (see params.ts).
  phone: { pattern: /^\+[1-9]\d{1,14}$/, code: 'invalid_param_key', rule: 'an E.164 number such as +819012345678' },
};

function readCardChanges(params: Params): UpdateCardCommand['changes'] {
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

/**
 * `cards.update`: the billing details and `metadata` (v1 rules, merged). v1 §4.4: "`exp_month`,
 * `exp_year` and `cvc` are no longer accepted" — they are unknown keys here.
 */
export function decodeUpdateCard(input: unknown): UpdateCardCommand {
  const params = readParams(input, ['customer', 'id', ...CARD_UPDATE_FIELDS, 'metadata']);
  const customerId = requireString(params, 'customer');
  const id = requireString(params, 'id');
  const changes = readCardChanges(params);
  return { customerId, id, changes, metadata: hasParam(params, 'metadata') ? { update: params.metadata, flavour: 'v1' } : undefined };
}

/** `cards.list`: the customer's path and pagination (v1 §4.1). */
export function decodeListCards(input: unknown): { readonly customerId: string; readonly page: Page } {
  const params = readParams(input, ['customer', ...PAGINATION_PARAMS]);
  const customerId = requireString(params, 'customer');
  return { customerId, page: readPage(params) };
}

export const CARD_OPERATIONS = [
  defineCommandOperation('cards.create', { decode: decodeCreateCard, execute: createCard, encode: renderCard }),
  defineCommandOperation('cards.retrieve', { decode: decodeCard, execute: retrieveCard, encode: renderCard }),
  defineCommandOperation('cards.update', { decode: decodeUpdateCard, execute: updateCard, encode: renderCard }),
  defineCommandOperation('cards.delete', { decode: decodeCard, execute: deleteCard, encode: (deleted) => deleted }),
  defineCommandOperation('cards.list', {
    decode: decodeListCards,
    execute: listCards,
    encode: (rows, command) => listObject(rows.map(renderCard), command.page, cardsUrl(command.customerId)),
  }),
];
