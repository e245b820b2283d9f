/**
 * The v2 codec of customers (official-sdks.md §2 "Customers"; v2 §4.6): parameters → typed
 * commands of src/customers/v2-customers.ts (create, delete, list), src/customers/customers.ts
 * (retrieve, the v1 customers' own) and src/payment-methods/payment-methods.ts (update, which sets
 * the default payment method); rows → the v2 customer object and lists.
 */
import { reject } from '../../domain/errors';
import { EMAIL_PATTERN, EMAIL_RULE, MAX_TEXT_LENGTH } from '../../domain/limits';
import { createMetadata } from '../../domain/metadata';
import { defineCommandOperation } from '../../operations/define';
import { hasParam, optionalFlexibleId, optionalString, optionalText, readParams, requireString, sentFields, type Params } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject } from '../../operations/v2-pagination';
import { renderV2Customer } from '../../customers/customer-record';
import { retrieveCustomer } from '../../customers/customers';
import { createV2Customer, deleteV2Customer, listV2Customers, V2_CUSTOMERS_URL, type CreateV2CustomerCommand } from '../../customers/v2-customers';
import { updateV2Customer, type UpdateV2CustomerCommand } from '../../payment-methods/payment-methods';

/** `email` (an e-mail address, `''` clears it) and `description`, as sent. */
function readContact(params: Params) {
  const email = optionalText(params, 'email', MAX_TEXT_LENGTH);
  if (email !== undefined && email !== null && !EMAIL_PATTERN.test(email)) reject('invalid_email', 'email', `email must be ${EMAIL_RULE}`);
  return { email, description: optionalText(params, 'description', MAX_TEXT_LENGTH) };
}

/** `id` (chosen), `email`, `description`, `payment_method_id` (attached and made the default), `metadata` (v2 rules), `test_clock`. */
function decodeCreate(input: unknown): CreateV2CustomerCommand {
  const params = readParams(input, ['id', 'email', 'description', 'payment_method_id', 'metadata', 'test_clock']);
  const chosenId = optionalFlexibleId(params);
  const { email, description } = readContact(params);
  const methodId = optionalString(params, 'payment_method_id');
  const metadata = hasParam(params, 'metadata') ? createMetadata(params.metadata, 'v2') : {};
  const testClock = optionalString(params, 'test_clock');
  return { chosenId, email: email ?? null, description: description ?? null, methodId, metadata, testClock };
}

/** `email`, `description`, `default_payment_method_id` (`''` clears it), `metadata` (v2 rules, merged). */
function decodeUpdate(input: unknown): UpdateV2CustomerCommand {
  const params = readParams(input, ['id', 'email', 'description', 'default_payment_method_id', 'metadata']);
  const id = requireString(params, 'id');
  const { email, description } = readContact(params);
  const defaultMethod = optionalText(params, 'default_payment_method_id', MAX_TEXT_LENGTH);
  return { id, changes: sentFields({ email, description, default_payment_method_id: defaultMethod }), metadata: hasParam(params, 'metadata') ? params.metadata : undefined };
}

const decodeId = (input: unknown) => ({ id: requireString(readParams(input, ['id']), 'id') });

export const V2_CUSTOMER_OPERATIONS = [
  defineCommandOperation('v2.customers.create', { decode: decodeCreate, execute: createV2Customer, encode: renderV2Customer }),
  // The v1 customers' own execution, rendered as the v2 customer.
  defineCommandOperation('v2.customers.retrieve', { decode: decodeId, execute: retrieveCustomer, encode: (customer) => renderV2Customer(customer.row) }),
  defineCommandOperation('v2.customers.update', { decode: decodeUpdate, execute: updateV2Customer, encode: renderV2Customer }),
  defineCommandOperation('v2.customers.delete', { decode: decodeId, execute: deleteV2Customer, encode: renderV2Customer }),
  defineCommandOperation('v2.customers.list', {
    decode: (input) => ({ page: readV2Page(readParams(input, V2_PAGINATION_PARAMS)) }),
    execute: listV2Customers,
    encode: (rows, command) => v2ListObject(rows, command.page, V2_CUSTOMERS_URL, renderV2Customer),
  }),
];
