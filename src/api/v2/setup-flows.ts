/**
 * The v2 codec of setup flows (official-sdks.md §2 "Setup flows"): parameters → typed commands of
 * src/setup-flows/setup-flows.ts, refusals named by parameter, rows → v2 setup flow objects and
 * lists. retrieve, confirm and complete_action take the public key with the flow's `client_secret`.
 */
import { reject } from '../../domain/errors';
import { MAX_TEXT_LENGTH } from '../../domain/limits';
import { createMetadata } from '../../domain/metadata';
import { defineCommandOperation } from '../../operations/define';
import { hasParam, optionalEnum, optionalString, readParams, requireString, type Params } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject } from '../../operations/v2-pagination';
import {
  cancelSetupFlow,
  completeSetupFlowAction,
  confirmSetupFlow,
  createSetupFlow,
  listSetupFlows,
  renderSetupFlow,
  retrieveSetupFlow,
  updateSetupFlow,
  type CancelSetupFlowCommand,
  type ConfirmSetupFlowCommand,
  type CreateSetupFlowCommand,
  type ListSetupFlowsCommand,
  type SetupFlowRef,
  type UpdateSetupFlowCommand,
} from '../../setup-flows/setup-flows';

const SETUP_FLOWS_URL = '/v2/setup_flows';
const SETUP_FLOW_USAGES = ['off_session', 'on_session'] as const;
const SETUP_FLOW_CANCELLATION_REASONS = ['abandoned', 'duplicate', 'requested_by_customer'] as const;

function readDescription(params: Params): string | null | undefined {
  const description = optionalString(params, 'description', { code: 'invalid_string_length' });
  if (description === undefined) return undefined;
  if ([...description].length > MAX_TEXT_LENGTH) reject('invalid_string_length', 'description', `description must be at most ${MAX_TEXT_LENGTH} characters`);
  return description === '' ? null : description;
}

/** `payment_method_types`: the SDK allows `card` only for setup flows. */
function readTypes(params: Params): string[] | undefined {
  if (!hasParam(params, 'payment_method_types')) return undefined;
  const value = params.payment_method_types;
  if (!Array.isArray(value) || value.length === 0) return reject('invalid_param_key', 'payment_method_types', 'payment_method_types must be a non-empty array');
  value.forEach((entry, i) => {
    if (entry !== 'card') reject('invalid_param_key', `payment_method_types[${i}]`, `a setup flow saves cards only; got ${JSON.stringify(entry)}`);
  });
  return ['card'];
}

/** `payment_method_options[card][request_three_d_secure]`: `automatic` only (the card decides), as payment flows. */
function readOptions(params: Params): void {
  if (!hasParam(params, 'payment_method_options')) return;
  const options = readParams(params.payment_method_options, ['card'], 'payment_method_options');
  if (!hasParam(options, 'card')) return;
  const card = readParams(options.card, ['request_three_d_secure'], 'payment_method_options[card]');
  const value = card.request_three_d_secure;
  if (value !== undefined && value !== null && value !== 'automatic') {
    reject('invalid_param_key', 'payment_method_options[card][request_three_d_secure]', 'request_three_d_secure must be automatic: 3-D Secure is asked for by the card (service rules §2.2)');
  }
}

/** `customer_id`, `usage` (default off_session), `payment_method_types` ([card]), `payment_method_options`, `description`, `metadata` (v2 §2.6). */
function decodeCreate(input: unknown): CreateSetupFlowCommand {
  const params = readParams(input, ['customer_id', 'usage', 'payment_method_types', 'payment_method_options', 'description', 'metadata']);
  const customerId = optionalString(params, 'customer_id', { code: 'invalid_customer' }) ?? null;
  const usage = optionalEnum(params, 'usage', SETUP_FLOW_USAGES) ?? 'off_session';
  readTypes(params);
  readOptions(params);
  const description = readDescription(params) ?? null;
  const metadata = hasParam(params, 'metadata') ? createMetadata(params.metadata, 'v2') : {};
  return { customerId, usage, description, metadata };
}

/** The flow and, with the public key, its `client_secret` (retrieve, complete_action). */
function decodeRef(input: unknown): SetupFlowRef {
  const params = readParams(input, ['id', 'client_secret']);
  return { id: requireString(params, 'id'), clientSecret: optionalString(params, 'client_secret') };
}

/** `customer_id`, `payment_method_types`, `payment_method_options`, `description`, `metadata`. */
function decodeUpdate(input: unknown): UpdateSetupFlowCommand {
  const params = readParams(input, ['id', 'customer_id', 'payment_method_types', 'payment_method_options', 'description', 'metadata']);
  const id = requireString(params, 'id');
  const customerId = optionalString(params, 'customer_id', { code: 'invalid_customer' });
  const paymentMethodTypes = readTypes(params);
  readOptions(params);
  const description = readDescription(params);
  return { id, customerId, paymentMethodTypes, paymentMethodOptionsSent: hasParam(params, 'payment_method_options'), description, metadata: hasParam(params, 'metadata') ? params.metadata : undefined };
}

function decodeList(input: unknown): ListSetupFlowsCommand {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'customer_id']);
  const page = readV2Page(params);
  return { page, customerId: optionalString(params, 'customer_id', { code: 'invalid_querystring' }) };
}

/** `cancellation_reason` (optional): abandoned, duplicate, requested_by_customer. */
function decodeCancel(input: unknown): CancelSetupFlowCommand {
  const params = readParams(input, ['id', 'cancellation_reason']);
  const id = requireString(params, 'id');
  return { id, reason: optionalEnum(params, 'cancellation_reason', SETUP_FLOW_CANCELLATION_REASONS) ?? null };
}

/** `client_secret` (public key), `payment_method_id` (`pm_` or `tok_`), `return_url` (http(s)). */
function decodeConfirm(input: unknown): ConfirmSetupFlowCommand {
  const params = readParams(input, ['id', 'client_secret', 'payment_method_id', 'return_url']);
  const id = requireString(params, 'id');
  const clientSecret = optionalString(params, 'client_secret');
  const methodId = optionalString(params, 'payment_method_id');
  const returnUrl = optionalString(params, 'return_url');
  if (returnUrl !== undefined && !/^https?:\/\/\S+$/.test(returnUrl)) reject('invalid_param_key', 'return_url', 'return_url must be an http(s) URL');
  return { id, clientSecret, methodId, returnUrl };
}

export const SETUP_FLOW_OPERATIONS = [
  defineCommandOperation('setup_flows.create', { decode: decodeCreate, execute: createSetupFlow, encode: renderSetupFlow }),
  defineCommandOperation('setup_flows.retrieve', { decode: decodeRef, execute: retrieveSetupFlow, encode: renderSetupFlow }, { keys: 'secret_or_public' }),
  defineCommandOperation('setup_flows.update', { decode: decodeUpdate, execute: updateSetupFlow, encode: renderSetupFlow }),
  defineCommandOperation('setup_flows.list', { decode: decodeList, execute: listSetupFlows, encode: (rows, command) => v2ListObject(rows, command.page, SETUP_FLOWS_URL, renderSetupFlow) }),
  defineCommandOperation('setup_flows.cancel', { decode: decodeCancel, execute: cancelSetupFlow, encode: renderSetupFlow }),
  defineCommandOperation('setup_flows.confirm', { decode: decodeConfirm, execute: confirmSetupFlow, encode: renderSetupFlow }, { keys: 'secret_or_public' }),
  defineCommandOperation('setup_flows.complete_action', { decode: decodeRef, execute: completeSetupFlowAction, encode: renderSetupFlow }, { keys: 'secret_or_public' }),
];
