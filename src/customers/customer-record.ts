/**
 * Finding a customer row of the caller's account and mode. Shared by the customer and card
 * operations; a deleted customer is not found (it exists only for the history of its charges).
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { CustomersTable, Database } from '../db/schema';
import { reject } from '../domain/errors';
import type { Metadata } from '../domain/metadata';
import { toIsoSeconds } from '../domain/time';

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

/** The v2 customer object (official-sdks.md §3): the same row as v1's, ISO instants, the v2 default payment method. */
// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type V2CustomerObject = {
  readonly id: string;
  readonly object: 'customer';
  readonly livemode: boolean;
  readonly email: string | null;
  readonly description: string | null;
  readonly default_payment_method_id: string | null;
  readonly metadata: Metadata;
  /** The id of the test clock the customer is on (as v1's `test_clock`); null when none. */
  readonly test_clock: string | null;
  readonly created_at: string;
  readonly updated_at: string;
};

export function renderV2Customer(row: CustomerRow): V2CustomerObject {
  return {
    id: row.customer_id,
    object: 'customer',
    livemode: row.livemode,
    email: row.email,
    description: row.description,
    default_payment_method_id: row.default_payment_method_id,
    metadata: row.metadata,
    test_clock: row.test_clock_id,
    created_at: toIsoSeconds(row.created_at),
    updated_at: toIsoSeconds(row.updated_at),
  };
}
