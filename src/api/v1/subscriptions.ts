/**
 * The v1 codec of subscriptions (v1 §4.6) and of a customer's subscriptions (v1 §4.4): form and
 * query parameters → subscription commands under the v1 rules (v1 metadata, `trial_end` as UNIX
 * seconds or `now`), subscriptions → v1 subscription objects. The checks run here, in the order v1
 * has always given them, before anything is read or written.
 */
import type { TrialEndRequest } from '../../domain/billing-calendar';
import { createMetadata } from '../../domain/metadata';
import { fromUnixSeconds } from '../../domain/time';
import { defineCommandOperation } from '../../operations/define';
import { listObject, PAGINATION_PARAMS, readPage } from '../../operations/pagination';
import { hasParam, optionalBoolean, optionalInteger, optionalEnum, optionalString, readParams, requireString, type Params } from '../../operations/params';
import { renderSubscriptionWithPlans } from '../../subscriptions/subscription-record';
import {
  cancelSubscription,
  createSubscription,
  deleteSubscription,
  listCustomerSubscriptions,
  listSubscriptions,
  pauseSubscription,
  resumeSubscription,
  retrieveCustomerSubscription,
  retrieveSubscription,
  SUBSCRIPTION_STATUSES,
  SUBSCRIPTIONS_URL,
  updateSubscription,
  type CreateSubscriptionCommand,
  type ListSubscriptionsCommand,
  type ResumeSubscriptionCommand,
  type RetrieveSubscriptionCommand,
  type UpdateSubscriptionCommand,
} from '../../subscriptions/subscriptions';
import { decodeId } from './codec';

/** `trial_end`: UNIX seconds or the word `now` (v1 §4.6 rule 2); anything else is `invalid_trial_end`. */
function readTrialEnd(params: Params): TrialEndRequest {
  if (params.trial_end === 'now') return 'now';
  const seconds = optionalInteger(params, 'trial_end', { min: 0, code: 'invalid_trial_end' });
  return seconds === undefined ? undefined : fromUnixSeconds(seconds);
}

/**
 * `subscriptions.create`: `customer`*, `plan`*, `trial_end`, `prorate`, `metadata`. The simulator's
 * bulk sign-ups decode their generated subscribers' parameters here too.
 */
export function decodeCreateSubscription(input: unknown): CreateSubscriptionCommand {
  const params = readParams(input, ['customer', 'plan', 'trial_end', 'prorate', 'metadata']);
  const customerId = requireString(params, 'customer');
  const planId = requireString(params, 'plan');
  const trialEnd = readTrialEnd(params);
  const prorate = optionalBoolean(params, 'prorate');
  const metadata = hasParam(params, 'metadata') ? (createMetadata(params.metadata, 'v1') as Record<string, string>) : {};
  return { customerId, planId, trialEnd, prorate, metadata };
}

/** `subscriptions.retrieve`: `id`, and `customer` for the customer's path (v1 §4.4). */
export function decodeRetrieveSubscription(input: unknown): RetrieveSubscriptionCommand {
  const params = readParams(input, ['id', 'customer']);
  const id = requireString(params, 'id');
  return { id, customerId: optionalString(params, 'customer') };
}

/**
 * Pagination (v1 §4.1) and the filters `plan`, `customer`, `status`. A status outside the four is
 * `invalid_querystring`, like the other list parameters.
 */
function readListFilters(params: Params): ListSubscriptionsCommand {
  const page = readPage(params);
  const planId = optionalString(params, 'plan', { code: 'invalid_querystring' });
  const customerId = optionalString(params, 'customer', { code: 'invalid_querystring' });
  const status = optionalEnum(params, 'status', SUBSCRIPTION_STATUSES, { code: 'invalid_querystring' });
  return { page, planId, customerId, status };
}

export function decodeListSubscriptions(input: unknown): ListSubscriptionsCommand {
  return readListFilters(readParams(input, [...PAGINATION_PARAMS, 'plan', 'customer', 'status']));
}

/** `subscriptions.update`: `trial_end`, `plan`, `prorate`, `next_cycle_plan`, `metadata` (v1 rules, merged). */
export function decodeUpdateSubscription(input: unknown): UpdateSubscriptionCommand {
  const params = readParams(input, ['id', 'trial_end', 'plan', 'prorate', 'next_cycle_plan', 'metadata']);
  const id = requireString(params, 'id');
  const trialEnd = readTrialEnd(params);
  const planId = optionalString(params, 'plan');
  const prorate = optionalBoolean(params, 'prorate');
  const nextCyclePlanId = optionalString(params, 'next_cycle_plan');
  return { id, trialEnd, planId, prorate, nextCyclePlanId, metadata: hasParam(params, 'metadata') ? { update: params.metadata, flavour: 'v1' } : undefined };
}

/** `subscriptions.resume`: `trial_end`, `prorate`. */
export function decodeResumeSubscription(input: unknown): ResumeSubscriptionCommand {
  const params = readParams(input, ['id', 'trial_end', 'prorate']);
  const id = requireString(params, 'id');
  const trialEnd = readTrialEnd(params);
  return { id, trialEnd, prorate: optionalBoolean(params, 'prorate') };
}

/** `subscriptions.delete`: `prorate` (from the query string over HTTP). */
export function decodeDeleteSubscription(input: unknown): { readonly id: string; readonly prorate: boolean | undefined } {
  const params = readParams(input, ['id', 'prorate']);
  const id = requireString(params, 'id');
  return { id, prorate: optionalBoolean(params, 'prorate') };
}

/** `customers.subscriptions.retrieve`: the customer's path, `customer` and `id`. */
export function decodeRetrieveCustomerSubscription(input: unknown): RetrieveSubscriptionCommand & { readonly customerId: string } {
  const params = readParams(input, ['customer', 'id']);
  const customerId = requireString(params, 'customer');
  return { id: requireString(params, 'id'), customerId };
}

/** `customers.subscriptions.list`: the customer's path, pagination and the `plan` and `status` filters. */
export function decodeListCustomerSubscriptions(input: unknown): ListSubscriptionsCommand & { readonly customerId: string } {
  const params = readParams(input, [...PAGINATION_PARAMS, 'customer', 'plan', 'status']);
  const customerId = requireString(params, 'customer');
  return { ...readListFilters(params), customerId };
}

function customerSubscriptionsUrl(customerId: string): string {
  return `/v1/customers/${customerId}/subscriptions`;
}

export const SUBSCRIPTION_OPERATIONS = [
  defineCommandOperation('customers.subscriptions.retrieve', { decode: decodeRetrieveCustomerSubscription, execute: retrieveCustomerSubscription, encode: renderSubscriptionWithPlans }),
  defineCommandOperation('customers.subscriptions.list', {
    decode: decodeListCustomerSubscriptions,
    execute: listCustomerSubscriptions,
    encode: (subscriptions, command) => listObject(subscriptions.map(renderSubscriptionWithPlans), command.page, customerSubscriptionsUrl(command.customerId)),
  }),
  defineCommandOperation('subscriptions.create', { decode: decodeCreateSubscription, execute: createSubscription, encode: renderSubscriptionWithPlans }),
  defineCommandOperation('subscriptions.retrieve', { decode: decodeRetrieveSubscription, execute: retrieveSubscription, encode: renderSubscriptionWithPlans }),
  defineCommandOperation('subscriptions.list', {
    decode: decodeListSubscriptions,
    execute: listSubscriptions,
    encode: (subscriptions, command) => listObject(subscriptions.map(renderSubscriptionWithPlans), command.page, SUBSCRIPTIONS_URL),
  }),
  defineCommandOperation('subscriptions.update', { decode: decodeUpdateSubscription, execute: updateSubscription, encode: renderSubscriptionWithPlans }),
  defineCommandOperation('subscriptions.pause', { decode: decodeId, execute: pauseSubscription, encode: renderSubscriptionWithPlans }),
  defineCommandOperation('subscriptions.resume', { decode: decodeResumeSubscription, execute: resumeSubscription, encode: renderSubscriptionWithPlans }),
  defineCommandOperation('subscriptions.cancel', { decode: decodeId, execute: cancelSubscription, encode: renderSubscriptionWithPlans }),
  defineCommandOperation('subscriptions.delete', { decode: decodeDeleteSubscription, execute: deleteSubscription, encode: (deleted) => deleted }),
];
