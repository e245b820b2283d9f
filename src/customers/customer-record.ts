/**
 * Finding a customer row of the caller's account and mode. Shared by the customer and card
 * operations; a deleted customer is not found (it exists only for the history of its charges).
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { CustomersTable, Database } from '../db/schema';
import { reject } from '../domain/errors';

export type CustomerRow = Selectable<CustomersTable>;

/**
 * The customer, locked FOR UPDATE when `lock` is set: operations that change the customer or its
 * cards (default card, duplicate-card check) serialise on the customer row.
 * Unknown or deleted: `invalid_id` naming `param` (404, "No such customer: cus_x").
 */
export async function findCustomer(executor: Kysely<Database>, caller: Caller, customerId: string, param: string, lock = false): Promise<CustomerRow> {
  let query = executor
    .selectFrom('customers')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .where('customer_id', '=', customerId)
    .where('deleted_at', 'is', null);
  if (lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) return reject('invalid_id', param, `No such customer: ${customerId}`);
  return row;
}
