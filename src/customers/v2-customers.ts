/**
 * v2 customers (official-sdks.md §2 "Customers"; v2 §2.7, §4.6): create (own id allowed, a payment
 * method attached as the default), retrieve, delete and list, answering the v2 customer object
 * (`renderV2Customer`, ISO instants, `default_payment_method_id`). `v2.customers.update` lives with
 * the payment methods (src/payment-methods), whose default it sets. The customer rows are the v1
 * customers' own: one customer, two renderings. Retrieve and delete run the v1 customers'
 * executions; create has its own (v2 metadata, a payment method attached in the same transaction,
 * v2 events: docs/decisions/api-conventions.md "The v2 wire: …"); the list pages by cursor.
 */
import type { Caller } from '../accounts/accounts';
import { EMAIL_PATTERN, EMAIL_RULE, MAX_TEXT_LENGTH } from '../domain/limits';
import { createMetadata } from '../domain/metadata';
import { reject } from '../domain/errors';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { defineCommandOperation, defineOperation } from '../operations/define';
import { hasParam, optionalFlexibleId, optionalString, optionalText, readParams, requireString } from '../operations/params';
import { inV2Page, readV2Page, V2_PAGINATION_PARAMS, v2ListObject, type V2List } from '../operations/v2-pagination';
import { attachMethod } from '../payment-methods/payment-methods';
import { findCustomer, renderV2Customer, type V2CustomerObject } from './customer-record';
import { deleteCustomer, insertCustomer, retrieveCustomer } from './customers';

export const V2_CUSTOMERS_URL = '/v2/customers';

function customerEvent(caller: Caller, type: 'customer.created' | 'customer.deleted', data: V2CustomerObject, at: Date) {
  return { accountId: caller.accountId, livemode: caller.livemode, type, data, at, apiVersion: 'v2' as const };
}

/**
 * `v2.customers.create`: `id` (1–100 of `[A-Za-z0-9_-]`; taken: `already_exist_id`), `email`,
 * `description`, `metadata` (v2 rules), `payment_method_id` (attached and made the default, with
 * the refusals of `payment_methods.attach`). Writes v2 `customer.created` (and
 * `payment_method.attached`).
 */
export async function createV2Customer(ctx: Context, caller: Caller, input: unknown): Promise<V2CustomerObject> {
  const params = readParams(input, ['id', 'email', 'description', 'payment_method_id', 'metadata', 'test_clock']);
  const chosenId = optionalFlexibleId(params);
  const email = optionalText(params, 'email', MAX_TEXT_LENGTH);
  if (email !== undefined && email !== null && !EMAIL_PATTERN.test(email)) reject('invalid_email', 'email', `email must be ${EMAIL_RULE}`);
  const description = optionalText(params, 'description', MAX_TEXT_LENGTH);
  const methodId = optionalString(params, 'payment_method_id');
  const metadata = hasParam(params, 'metadata') ? createMetadata(params.metadata, 'v2') : {};
  const testClock = optionalString(params, 'test_clock');
  const now = ctx.clock.now();
  const customerId = chosenId ?? ctx.ids.next('customer');
  const row = await ctx.db.transaction().execute(async (trx) => {
    const inserted = await insertCustomer(trx, caller, { id: customerId, contact: { email: email ?? null, description: description ?? null }, metadata, testClock }, now);
    let customer = inserted;
    // customer.created comes first, showing the default the method becomes just after (a refused
    // attach rolls the whole creation back).
    await recordEvent(trx, ctx.ids, customerEvent(caller, 'customer.created', renderV2Customer({ ...customer, default_payment_method_id: methodId ?? null }), now));
    if (methodId !== undefined) {
      await attachMethod(trx, ctx, caller, { id: methodId, param: 'payment_method_id', customerId, at: now });
      customer = await trx
        .updateTable('customers')
        .set({ default_payment_method_id: methodId })
        .where('account_id', '=', caller.accountId)
        .where('livemode', '=', caller.livemode)
        .where('customer_id', '=', customerId)
        .returningAll()
        .executeTakeFirstOrThrow();
    }
    return customer;
  });
  return renderV2Customer(row);
}

/**
 * `v2.customers.delete`: the deletion of `customers.delete` (the customer and its cards, softly,
 * with a v2 `customer.deleted`), answered with the v2 customer as it was.
 */
export async function deleteV2Customer(ctx: Context, caller: Caller, input: unknown): Promise<V2CustomerObject> {
  const params = readParams(input, ['id']);
  const id = requireString(params, 'id');
  const before = await findCustomer(ctx.db, caller, id, 'id');
  await deleteCustomer(ctx, caller, { id, apiVersion: 'v2' });
  return renderV2Customer(before);
}

/** `v2.customers.list`: customers not deleted, newest first, cursors. */
export async function listV2Customers(ctx: Context, caller: Caller, input: unknown): Promise<V2List<V2CustomerObject>> {
  const page = readV2Page(readParams(input, V2_PAGINATION_PARAMS));
  const cursor = page.cursor === undefined ? undefined : await findCustomer(ctx.db, caller, page.cursor.id, page.cursor.param);
  const rows = await ctx.db
    .selectFrom('customers')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('deleted_at', 'is', null)
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.customer_id }, 'customer_id'))
    .execute();
  return v2ListObject(rows, page, V2_CUSTOMERS_URL, renderV2Customer);
}

export const V2_CUSTOMER_OPERATIONS = [
  defineOperation('v2.customers.create', createV2Customer),
  // The v1 customers' own execution (src/customers/customers.ts), rendered as the v2 customer.
  defineCommandOperation('v2.customers.retrieve', { decode: (input) => ({ id: requireString(readParams(input, ['id']), 'id') }), execute: retrieveCustomer, encode: (customer) => renderV2Customer(customer.row) }),
  defineOperation('v2.customers.delete', deleteV2Customer),
  defineOperation('v2.customers.list', listV2Customers),
] as const;
