/**
 * The v1 codec of tenants (service rules §4 "Platform mode"): form parameters → tenant commands
 * under the v1 rules (v1 metadata, empty `name` clears it), tenant rows → v1 tenant objects. The
 * checks run here, in the order v1 has always given them, before anything is read or written.
 */
import { TENANT_MINIMUM_TRANSFER_AMOUNT_DEFAULT, TENANT_MINIMUM_TRANSFER_AMOUNT_FLOOR } from '../../domain/balance-rules';
import { reject } from '../../domain/errors';
import { parsePlatformFeeRate } from '../../domain/fees';
import { MAX_AMOUNT, MAX_TEXT_LENGTH } from '../../domain/limits';
import { createMetadata } from '../../domain/metadata';
import { formatRate } from '../../domain/money';
import { defineCommandOperation } from '../../operations/define';
import { listObject } from '../../operations/pagination';
import { hasParam, optionalBoolean, optionalFlexibleId, optionalInteger, optionalText, readParams, requireString, type Params } from '../../operations/params';
import {
  createTenant,
  deleteTenant,
  listTenants,
  renderTenant,
  retrieveTenant,
  TENANTS_URL,
  updateTenant,
  type CreateTenantCommand,
  type UpdateTenantCommand,
} from '../../tenants/tenants';
import { decodeId, decodePage } from './codec';

/** `platform_fee_rate`: a percentage with at most two decimals, 0 to 95 (service rules §4). */
function readRate(params: Params): string | undefined {
  const raw = params.platform_fee_rate;
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'string' && typeof raw !== 'number') return reject('invalid_param_key', 'platform_fee_rate', 'platform_fee_rate must be a percentage such as 10.00');
  try {
    return formatRate(parsePlatformFeeRate(raw));
  } catch (error) {
    return reject('invalid_param_key', 'platform_fee_rate', (error as Error).message);
  }
}

function readMinimum(params: Params): number | undefined {
  return optionalInteger(params, 'minimum_transfer_amount', { min: TENANT_MINIMUM_TRANSFER_AMOUNT_FLOOR, max: MAX_AMOUNT, code: 'invalid_amount' });
}

/**
 * `tenants.create`: `id` (chosen id), `name`, `platform_fee_rate` (required), `payjp_fee_included`
 * (default false), `minimum_transfer_amount` (default 10,000), `metadata`. Checked in that order.
 */
export function decodeCreateTenant(input: unknown): CreateTenantCommand {
  const params = readParams(input, ['id', 'name', 'platform_fee_rate', 'payjp_fee_included', 'minimum_transfer_amount', 'metadata']);
  const id = optionalFlexibleId(params);
  const name = optionalText(params, 'name', MAX_TEXT_LENGTH) ?? null;
  const platformFeeRate = readRate(params);
  if (platformFeeRate === undefined) return reject('missing_param', 'platform_fee_rate', 'platform_fee_rate is required');
  return {
    id,
    name,
    platformFeeRate,
    payjpFeeIncluded: optionalBoolean(params, 'payjp_fee_included') ?? false,
    minimumTransferAmount: readMinimum(params) ?? TENANT_MINIMUM_TRANSFER_AMOUNT_DEFAULT,
    metadata: hasParam(params, 'metadata') ? (createMetadata(params.metadata, 'v1') as Record<string, string>) : {},
  };
}

/**
 * `tenants.update`: `name`, `platform_fee_rate`, `minimum_transfer_amount`, `metadata` (v1 rules,
 * merged). `payjp_fee_included` is fixed at creation: sending it is `invalid_param_key`.
 */
export function decodeUpdateTenant(input: unknown): UpdateTenantCommand {
  const params = readParams(input, ['id', 'name', 'platform_fee_rate', 'minimum_transfer_amount', 'metadata']);
  const id = requireString(params, 'id');
  const name = optionalText(params, 'name', MAX_TEXT_LENGTH);
  const platformFeeRate = readRate(params);
  const minimumTransferAmount = readMinimum(params);
  return { id, name, platformFeeRate, minimumTransferAmount, metadata: hasParam(params, 'metadata') ? { update: params.metadata, flavour: 'v1' } : undefined };
}

export const TENANT_OPERATIONS = [
  defineCommandOperation('tenants.create', { decode: decodeCreateTenant, execute: createTenant, encode: renderTenant }),
  defineCommandOperation('tenants.retrieve', { decode: decodeId, execute: retrieveTenant, encode: renderTenant }),
  defineCommandOperation('tenants.update', { decode: decodeUpdateTenant, execute: updateTenant, encode: renderTenant }),
  defineCommandOperation('tenants.delete', { decode: decodeId, execute: deleteTenant, encode: (deleted) => deleted }),
  defineCommandOperation('tenants.list', {
    decode: decodePage,
    execute: listTenants,
    encode: (rows, page) => listObject(rows.map(renderTenant), page, TENANTS_URL),
  }),
];
