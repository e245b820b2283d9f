/**
 * Every settlement operation, registered as one group: tenants, terms, statements and their
 * download URLs, balances, and the v2 payment transactions (a view of the settled rows).
 */
import type { Operation } from '../operations/define';
import { TENANT_OPERATIONS } from '../tenants/tenants';
import { PAYMENT_TRANSACTION_OPERATIONS } from './payment-transactions';
import { STATEMENT_URL_OPERATIONS } from './statement-urls';
import { STATEMENT_OPERATIONS } from './statements';
import { TERM_OPERATIONS } from './terms';
import { V2_SETTLEMENT_LIST_OPERATIONS } from './v2-lists';

export const SETTLEMENT_OPERATIONS: readonly Operation[] = [...TENANT_OPERATIONS, ...TERM_OPERATIONS, ...STATEMENT_OPERATIONS, ...STATEMENT_URL_OPERATIONS, ...V2_SETTLEMENT_LIST_OPERATIONS, ...PAYMENT_TRANSACTION_OPERATIONS];
