/**
 * The one registry of operations (ARCHITECTURE.md): operation name → handler. Scenario timelines,
 * tests and, later, the HTTP routes all call `runOperation`, so every entry point gets the same
 * checks, the same objects and the same errors.
 */
import type { Caller } from '../accounts/accounts';
import { CHARGE_OPERATIONS } from '../api/v1/charges';
import { CHECKOUT_SESSION_OPERATIONS } from '../checkout/checkout-sessions';
import { PAYMENT_METHOD_CONFIGURATION_OPERATIONS } from '../checkout/payment-method-configurations';
import { CUSTOMER_OPERATIONS } from '../api/v1/customers';
import { V2_CUSTOMER_OPERATIONS } from '../customers/v2-customers';
import { reject } from '../domain/errors';
import { V2_EVENT_OPERATIONS } from '../events/v2-events';
import type { Context } from '../engine/context';
import { PAYMENT_FLOW_OPERATIONS } from '../payment-flows/payment-flows';
import { PAYMENT_METHOD_OPERATIONS } from '../payment-methods/payment-methods';
import { SETUP_FLOW_OPERATIONS } from '../setup-flows/setup-flows';
import { TAX_RATE_OPERATIONS } from '../tax-rates/tax-rates';
import { PRODUCT_OPERATIONS } from '../products/products';
import { PAYMENT_REFUND_OPERATIONS } from '../payment-refunds/payment-refunds';
import { DISPUTE_OPERATIONS } from '../disputes/disputes';
import { PLAN_OPERATIONS } from '../api/v1/plans';
import { SUBSCRIPTION_OPERATIONS } from '../api/v1/subscriptions';
import { ACCOUNT_OPERATIONS } from '../api/v1/accounts';
import { CARD_OPERATIONS } from '../api/v1/cards';
import { BALANCE_OPERATIONS } from '../api/v1/balances';
import { EVENT_OPERATIONS } from '../api/v1/events';
import { STATEMENT_OPERATIONS } from '../api/v1/statements';
import { TENANT_APPLICATION_URL_OPERATIONS } from '../api/v1/tenant-application-urls';
import { THREE_D_SECURE_REQUEST_OPERATIONS } from '../api/v1/three-d-secure-requests';
import { TENANT_OPERATIONS } from '../api/v1/tenants';
import { TERM_OPERATIONS } from '../api/v1/terms';
import { TOKEN_OPERATIONS, TOKEN_READ_OPERATIONS } from '../api/v1/tokens';
import { TRANSFER_OPERATIONS } from '../api/v1/transfers';
import { PRICE_OPERATIONS } from '../prices/prices';
import { PAYMENT_TRANSACTION_OPERATIONS } from '../settlement/payment-transactions';
import { V2_SETTLEMENT_LIST_OPERATIONS } from '../settlement/v2-lists';
import type { Operation } from './define';

export { defineOperation, type Operation, type OperationHandler } from './define';

function buildRegistry(groups: readonly (readonly Operation[])[]): ReadonlyMap<string, Operation> {
  const registry = new Map<string, Operation>();
  for (const operation of groups.flat()) {
    // A second definition would silently shadow the first; fail at start-up instead.
    if (registry.has(operation.name)) throw new Error(`operation ${operation.name} is defined twice`);
    registry.set(operation.name, operation);
  }
  return registry;
}

const REGISTRY = buildRegistry([TOKEN_OPERATIONS, CUSTOMER_OPERATIONS, CARD_OPERATIONS, PLAN_OPERATIONS, SUBSCRIPTION_OPERATIONS, CHARGE_OPERATIONS, PAYMENT_FLOW_OPERATIONS, PAYMENT_REFUND_OPERATIONS, DISPUTE_OPERATIONS, PRICE_OPERATIONS, PRODUCT_OPERATIONS, TAX_RATE_OPERATIONS, PAYMENT_METHOD_OPERATIONS, SETUP_FLOW_OPERATIONS, CHECKOUT_SESSION_OPERATIONS, PAYMENT_METHOD_CONFIGURATION_OPERATIONS, TENANT_OPERATIONS, TERM_OPERATIONS, STATEMENT_OPERATIONS, BALANCE_OPERATIONS, EVENT_OPERATIONS, ACCOUNT_OPERATIONS,
  // The v1 token reads, transfers, 3-D Secure requests and tenant application URLs.
  TOKEN_READ_OPERATIONS, TRANSFER_OPERATIONS, THREE_D_SECURE_REQUEST_OPERATIONS, TENANT_APPLICATION_URL_OPERATIONS,
  // The v2 customers, events, settlement lists and payment transactions.
  V2_CUSTOMER_OPERATIONS, V2_EVENT_OPERATIONS, V2_SETTLEMENT_LIST_OPERATIONS, PAYMENT_TRANSACTION_OPERATIONS]);

/** Every operation name, sorted, for help texts and scenario validation. */
export function operationNames(): string[] {
  return [...REGISTRY.keys()].sort();
}

export function findOperation(name: string): Operation | undefined {
  return REGISTRY.get(name);
}

/**
 * Runs an operation by name for an authenticated caller. An unknown name is `not_found` (404, like
 * an unknown URL in v1 §7) naming `op`; a public key may only run operations that allow it (v1 §5:
 * the public key is "used only for creating card tokens"), otherwise `invalid_api_key` (401).
 */
export async function runOperation(ctx: Context, caller: Caller, name: string, params?: unknown): Promise<object> {
  const operation = REGISTRY.get(name);
  if (!operation) return reject('not_found', 'op', `Unknown operation: ${name}`);
  if (caller.kind === 'public' && operation.keys !== 'secret_or_public') {
    return reject('invalid_api_key', undefined, `A public key cannot run ${name}; use the secret key.`);
  }
  return operation.handler(ctx, caller, params);
}
