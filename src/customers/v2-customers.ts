/**
 * v2 customers (official-sdks.md §2 "Customers"; v2 §2.7, §4.6): create (own id allowed, a payment
 * method attached as the default), delete and list, returning rows that the v2 codec
 * (src/api/v2/customers.ts) renders as the v2 customer object (`renderV2Customer`, ISO instants,
 * `default_payment_method_id`). `v2.customers.update` lives with the payment methods
 * (src/payment-methods), whose default it sets. The customer rows are the v1 customers' own: one
 * customer, two renderings. Retrieve and delete run the v1 customers' executions; create has its
 * own (v2 metadata, a payment method attached in the same transaction, v2 events:
 * docs/decisions/api-conventions.md "The v2 wire: …"); the list pages by cursor.
 */
import type { Caller } from '../accounts/accounts';
import type { Metadata } from '../domain/metadata';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { inV2Page, type V2Page } from '../operations/v2-pagination';
import { attachMethod } from '../payment-methods/payment-methods';
import { findCustomer, renderV2Customer, type CustomerRow, type V2CustomerObject } from './customer-record';
import { deleteCustomer, insertCustomer } from './customers';

export const V2_CUSTOMERS_URL = '/v2/customers';

function customerEvent(caller: Caller, type: 'customer.created' | 'customer.deleted', data: V2CustomerObject, at: Date) {
  return { accountId: caller.accountId, livemode: caller.livemode, type, data, at, apiVersion: 'v2' as const };
}

/** A v2 customer to create (parameters read by the v2 codec, src/api/v2/customers.ts). */
export interface CreateV2CustomerCommand {
  /** The id the merchant chose; undefined for a generated one. */
  readonly chosenId: string | undefined;
  readonly email: string | null;
  readonly description: string | null;
  /** A payment method to attach and make the default. */
  readonly methodId: string | undefined;
  readonly metadata: Metadata;
  readonly testClock: string | undefined;
}

/**
 * `v2.customers.create`: the customer (a chosen id taken is `already_exist_id`), its payment
 * method attached and made the default (with the refusals of `payment_methods.attach`, naming
 * `payment_method_id`). Writes v2 `customer.created` (and `payment_method.attached`).
 */
export async function createV2Customer(ctx: Context, caller: Caller, command: CreateV2CustomerCommand): Promise<CustomerRow> {
  const { methodId } = command;
  const now = ctx.clock.now();
  const customerId = command.chosenId ?? ctx.ids.next('customer');
  return ctx.db.transaction().execute(async (trx) => {
    const inserted = await insertCustomer(trx, caller, { id: customerId, contact: { email: command.email, description: command.description }, metadata: command.metadata, testClock: command.testClock }, now);
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
}

/**
 * `v2.customers.delete`: the deletion of `customers.delete` (the customer and its cards, softly,
 * with a v2 `customer.deleted`); returns the customer as it was.
 */
export async function deleteV2Customer(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<CustomerRow> {
  const before = await findCustomer(ctx.db, caller, command.id, 'id');
  await deleteCustomer(ctx, caller, { id: command.id, apiVersion: 'v2' });
  return before;
}

/** `v2.customers.list`: customers not deleted, newest first, cursors. */
export async function listV2Customers(ctx: Context, caller: Caller, command: { readonly page: V2Page }): Promise<CustomerRow[]> {
  const { page } = command;
  const cursor = page.cursor === undefined ? undefined : await findCustomer(ctx.db, caller, page.cursor.id, page.cursor.param);
  return ctx.db
    .selectFrom('customers')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('deleted_at', 'is', null)
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.customer_id }, 'customer_id'))
    .execute();
}
