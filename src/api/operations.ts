/**
 * The table of every operation: the command operations of the v1 and v2 codec modules, in one
 * registry. It lives in the wire layer because it imports the codecs; the
 * registry mechanism (src/operations/registry.ts) sits below the features and imports none of them.
 */
import type { Caller } from '../operations/define';
import type { Context } from '../engine/context';
import { OperationRegistry, type Operation } from '../operations/registry';
import { CHARGE_OPERATIONS } from './v1/charges';
import { CHECKOUT_SESSION_OPERATIONS } from './v2/checkout-sessions';
import { PAYMENT_METHOD_CONFIGURATION_OPERATIONS } from './v2/payment-method-configurations';
import { CUSTOMER_OPERATIONS } from './v1/customers';
import { V2_CUSTOMER_OPERATIONS } from './v2/customers';
import { V2_EVENT_OPERATIONS } from './v2/events';
import { PAYMENT_FLOW_OPERATIONS } from './v2/payment-flows';
import { PAYMENT_METHOD_OPERATIONS } from './v2/payment-methods';
import { SETUP_FLOW_OPERATIONS } from './v2/setup-flows';
import { TAX_RATE_OPERATIONS } from './v2/tax-rates';
import { PRODUCT_OPERATIONS } from './v2/products';
import { PAYMENT_REFUND_OPERATIONS } from './v2/payment-refunds';
import { DISPUTE_OPERATIONS } from './v2/payment-disputes';
import { PLAN_OPERATIONS } from './v1/plans';
import { SUBSCRIPTION_OPERATIONS } from './v1/subscriptions';
import { ACCOUNT_OPERATIONS } from './v1/accounts';
import { CARD_OPERATIONS } from './v1/cards';
import { BALANCE_OPERATIONS } from './v1/balances';
import { EVENT_OPERATIONS } from './v1/events';
import { STATEMENT_OPERATIONS } from './v1/statements';
import { TENANT_APPLICATION_URL_OPERATIONS } from './v1/tenant-application-urls';
import { THREE_D_SECURE_REQUEST_OPERATIONS } from './v1/three-d-secure-requests';
import { TENANT_OPERATIONS } from './v1/tenants';
import { TERM_OPERATIONS } from './v1/terms';
import { TOKEN_OPERATIONS, TOKEN_READ_OPERATIONS } from './v1/tokens';
import { TRANSFER_OPERATIONS } from './v1/transfers';
import { PRICE_OPERATIONS } from './v2/prices';
import { PAYMENT_TRANSACTION_OPERATIONS } from './v2/payment-transactions';
import { V2_SETTLEMENT_OPERATIONS } from './v2/settlement';

export const OPERATIONS = new OperationRegistry([TOKEN_OPERATIONS, CUSTOMER_OPERATIONS, CARD_OPERATIONS, PLAN_OPERATIONS, SUBSCRIPTION_OPERATIONS, CHARGE_OPERATIONS, PAYMENT_FLOW_OPERATIONS, PAYMENT_REFUND_OPERATIONS, DISPUTE_OPERATIONS, PRICE_OPERATIONS, PRODUCT_OPERATIONS, TAX_RATE_OPERATIONS, PAYMENT_METHOD_OPERATIONS, SETUP_FLOW_OPERATIONS, CHECKOUT_SESSION_OPERATIONS, PAYMENT_METHOD_CONFIGURATION_OPERATIONS, TENANT_OPERATIONS, TERM_OPERATIONS, STATEMENT_OPERATIONS, BALANCE_OPERATIONS, EVENT_OPERATIONS, ACCOUNT_OPERATIONS,
  // The v1 token reads, transfers, 3-D Secure requests and tenant application URLs.
  TOKEN_READ_OPERATIONS, TRANSFER_OPERATIONS, THREE_D_SECURE_REQUEST_OPERATIONS, TENANT_APPLICATION_URL_OPERATIONS,
  // The v2 customers, events, statements, balances, terms and payment transactions.
  V2_CUSTOMER_OPERATIONS, V2_EVENT_OPERATIONS, V2_SETTLEMENT_OPERATIONS, PAYMENT_TRANSACTION_OPERATIONS]);

/** Every operation name, sorted, for help texts and scenario validation. */
export function operationNames(): string[] {
  return OPERATIONS.names();
}

export function findOperation(name: string): Operation | undefined {
  return OPERATIONS.find(name);
}

/** Runs an operation by name for an authenticated caller (see OperationRegistry.run). */
export function runOperation(ctx: Context, caller: Caller, name: string, params?: unknown): Promise<object> {
  return OPERATIONS.run(ctx, caller, name, params);
}
