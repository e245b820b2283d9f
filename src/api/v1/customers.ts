/**
 * The v1 codec of customers (v1 §4.4): form parameters → customer commands under the v1 rules
 * (v1 metadata, empty string clears a field), customers → v1 customer objects. The checks run
 * here, in the order v1 has always given them, before anything is read or written.
 */
import {
  createCustomer,
  CUSTOMERS_URL,
  deleteCustomer,
  listCustomers,
  renderCustomerWithCards,
  retrieveCustomer,
  updateCustomer,
  type CreateCustomerCommand,
  type CustomerContact,
  type UpdateCustomerCommand,
} from '../../customers/customers';
import { reject } from '../../domain/errors';
import { EMAIL_PATTERN, EMAIL_RULE, MAX_TEXT_LENGTH } from '../../domain/limits';
import { createMetadata } from '../../domain/metadata';
import { defineCommandOperation } from '../../operations/define';
import { listObject } from '../../operations/pagination';
import { hasParam, optionalFlexibleId, optionalString, readParams, requireString, type Params } from '../../operations/params';
import { decodeId, decodePage } from './codec';

/** `email` and `description` as sent: undefined when absent, null when sent empty (clears it). */
function readContact(params: Params): CustomerContact {
  const out: { email?: string | null; description?: string | null } = {};
  const email = optionalString(params, 'email', { code: 'invalid_email' });
  if (email !== undefined) {
    if (email !== '' && !EMAIL_PATTERN.test(email)) reject('invalid_email', 'email', `email must be ${EMAIL_RULE}`);
    out.email = email === '' ? null : email;
  }
  const description = optionalString(params, 'description', { code: 'invalid_string_length' });
  if (description !== undefined) {
    if ([...description].length > MAX_TEXT_LENGTH) reject('invalid_string_length', 'description', `description must be at most ${MAX_TEXT_LENGTH} characters`);
    out.description = description === '' ? null : description;
  }
  return out;
}

/** `customers.create`: `id` (chosen id), `email`, `description`, `card` (token → default card), `metadata`. */
export function decodeCreateCustomer(input: unknown): CreateCustomerCommand {
  const params = readParams(input, ['id', 'email', 'description', 'card', 'metadata', 'test_clock']);
  const id = optionalFlexibleId(params);
  const contact = readContact(params);
  const card = optionalString(params, 'card');
  const metadata = hasParam(params, 'metadata') ? (createMetadata(params.metadata, 'v1') as Record<string, string>) : {};
  const testClock = optionalString(params, 'test_clock');
  return { id, contact, card, metadata, ...(testClock === undefined ? {} : { testClock }) };
}

/** `customers.update`: `email`, `description`, `default_card`, `card` (token), `metadata` (v1 rules, merged). */
export function decodeUpdateCustomer(input: unknown): UpdateCustomerCommand {
  const params = readParams(input, ['id', 'email', 'description', 'default_card', 'card', 'metadata']);
  const id = requireString(params, 'id');
  const contact = readContact(params);
  const card = optionalString(params, 'card');
  const defaultCard = optionalString(params, 'default_card');
  return { id, contact, card, defaultCard, metadata: hasParam(params, 'metadata') ? { update: params.metadata, flavour: 'v1' } : undefined };
}

export const CUSTOMER_OPERATIONS = [
  defineCommandOperation('customers.create', { decode: decodeCreateCustomer, execute: createCustomer, encode: renderCustomerWithCards }),
  defineCommandOperation('customers.retrieve', { decode: decodeId, execute: retrieveCustomer, encode: renderCustomerWithCards }),
  defineCommandOperation('customers.update', { decode: decodeUpdateCustomer, execute: updateCustomer, encode: renderCustomerWithCards }),
  defineCommandOperation('customers.delete', { decode: decodeId, execute: deleteCustomer, encode: (deleted) => deleted }),
  defineCommandOperation('customers.list', {
    decode: decodePage,
    execute: listCustomers,
    encode: (customers, page) => listObject(customers.map(renderCustomerWithCards), page, CUSTOMERS_URL),
  }),
];
