/**
 * The v1 codec of plans (v1 §4.5): form parameters → plan commands, plan rows → v1 plan objects.
 * The checks run here, in the order v1 has always given them, before anything is read or written.
 */
import { FLEXIBLE_ID_PATTERN } from '../../customers/customers';
import { FIRST_BILLING_DAY, LAST_BILLING_DAY } from '../../domain/billing-calendar';
import { reject } from '../../domain/errors';
import { MAX_AMOUNT, MAX_TEXT_LENGTH, MAX_TRIAL_DAYS, MIN_PLAN_AMOUNT } from '../../domain/limits';
import { createMetadata } from '../../domain/metadata';
import { defineCommandOperation } from '../../operations/define';
import { listObject } from '../../operations/pagination';
import { hasParam, optionalInteger, optionalString, readParams, requireString, type Params } from '../../operations/params';
import { renderPlan } from '../../plans/plan-record';
import { decodeId, decodePage } from './codec';
import {
  createPlan,
  deletePlan,
  isPlanInterval,
  listPlans,
  PLAN_CURRENCY,
  PLANS_URL,
  retrievePlan,
  updatePlan,
  type CreatePlanCommand,
  type UpdatePlanCommand,
} from '../../plans/plans';

/** `name` as sent: undefined when absent, null when sent empty (clears it, as customers' fields do). */
function readName(params: Params): string | null | undefined {
  const name = optionalString(params, 'name', { code: 'invalid_string_length' });
  if (name === undefined) return undefined;
  if ([...name].length > MAX_TEXT_LENGTH) reject('invalid_string_length', 'name', `name must be at most ${MAX_TEXT_LENGTH} characters`);
  return name === '' ? null : name;
}

/** A required integer: absent is `missing_param`, anything else out of range is `code`. */
function requireInteger(params: Params, key: string, options: { readonly min: number; readonly max: number; readonly code: 'invalid_plan_amount' }): number {
  const value = optionalInteger(params, key, options);
  if (value === undefined) return reject('missing_param', key, `${key} is required`);
  return value;
}

/**
 * `plans.create`: `amount`, `currency`, `interval` (required), `id` (chosen id), `name`,
 * `trial_days`, `billing_day`, `metadata`. Checked in that order, so one bad request always gives
 * the same error.
 */
export function decodeCreatePlan(input: unknown): CreatePlanCommand {
  const params = readParams(input, ['amount', 'currency', 'interval', 'id', 'name', 'trial_days', 'billing_day', 'metadata']);
  const amount = requireInteger(params, 'amount', { min: MIN_PLAN_AMOUNT, max: MAX_AMOUNT, code: 'invalid_plan_amount' });
  const currency = requireString(params, 'currency', { code: 'invalid_currency' });
  if (currency !== PLAN_CURRENCY) reject('invalid_currency', 'currency', `currency must be ${PLAN_CURRENCY}, got ${JSON.stringify(currency)}`);
  const interval = requireString(params, 'interval', { code: 'invalid_interval' });
  if (!isPlanInterval(interval)) return reject('invalid_interval', 'interval', `interval must be month or year, got ${JSON.stringify(interval)}`);
  const id = optionalString(params, 'id', { code: 'invalid_flexible_id' });
  if (id !== undefined && !FLEXIBLE_ID_PATTERN.test(id)) reject('invalid_flexible_id', 'id', 'id must be 1 to 100 half-width letters, digits, underscores or hyphens');
  return {
    amount,
    currency: PLAN_CURRENCY,
    interval,
    id,
    name: readName(params) ?? null,
    trialDays: optionalInteger(params, 'trial_days', { min: 0, max: MAX_TRIAL_DAYS, code: 'invalid_trial_days' }) ?? 0,
    billingDay: optionalInteger(params, 'billing_day', { min: FIRST_BILLING_DAY, max: LAST_BILLING_DAY, code: 'invalid_billing_day' }) ?? null,
    metadata: hasParam(params, 'metadata') ? (createMetadata(params.metadata, 'v1') as Record<string, string>) : {},
  };
}

/** `plans.update`: `name` and `metadata` only; any other parameter is `invalid_param_key` naming it. */
export function decodeUpdatePlan(input: unknown): UpdatePlanCommand {
  const params = readParams(input, ['id', 'name', 'metadata']);
  const id = requireString(params, 'id');
  const name = readName(params);
  return { id, name, metadata: hasParam(params, 'metadata') ? { update: params.metadata, flavour: 'v1' } : undefined };
}

export const PLAN_OPERATIONS = [
  defineCommandOperation('plans.create', { decode: decodeCreatePlan, execute: createPlan, encode: renderPlan }),
  defineCommandOperation('plans.retrieve', { decode: decodeId, execute: retrievePlan, encode: renderPlan }),
  defineCommandOperation('plans.update', { decode: decodeUpdatePlan, execute: updatePlan, encode: renderPlan }),
  defineCommandOperation('plans.delete', { decode: decodeId, execute: deletePlan, encode: (deleted) => deleted }),
  defineCommandOperation('plans.list', {
    decode: decodePage,
    execute: listPlans,
    encode: (rows, page) => listObject(rows.map(renderPlan), page, PLANS_URL),
  }),
];
