/**
 * The v2 codec of tax rates (official-sdks.md §2 "Tax rates"): parameters → typed commands of
 * src/tax-rates/tax-rates.ts, refusals named by parameter, rows → v2 tax rate objects and lists.
 * A percentage is 0..100 with at most 4 decimals, read as a number or a string, kept as decimal text.
 */
import { reject } from '../../domain/errors';
import { MAX_TEXT_LENGTH } from '../../domain/limits';
import { createMetadata } from '../../domain/metadata';
import { defineCommandOperation } from '../../operations/define';
import { hasParam, optionalBoolean, optionalText, readParams, requireString, sentFields, type Params } from '../../operations/params';
import { readV2Page, V2_PAGINATION_PARAMS, v2ListObject } from '../../operations/v2-pagination';
import { createTaxRate, listTaxRates, renderTaxRate, retrieveTaxRate, TAX_RATES_URL, updateTaxRate, type CreateTaxRateCommand, type ListTaxRatesCommand, type UpdateTaxRateCommand } from '../../tax-rates/tax-rates';

/** 0 to 100 with at most four decimals, as a number or a string. */
const PERCENTAGE_TEXT = /^(?:100(?:\.0{1,4})?|\d{1,2}(?:\.\d{1,4})?)$/;

function readPercentage(params: Params): string {
  const raw = params.percentage;
  if (raw === undefined || raw === null) return reject('missing_param', 'percentage', 'percentage is required');
  const text = typeof raw === 'number' && Number.isFinite(raw) ? String(raw) : raw;
  if (typeof text !== 'string' || !PERCENTAGE_TEXT.test(text)) return reject('invalid_param_key', 'percentage', `percentage must be a number from 0 to 100 with at most 4 decimals, got ${JSON.stringify(raw)}`);
  return text;
}

function readCountry(params: Params): string | null | undefined {
  const country = optionalText(params, 'country', 2);
  if (country !== undefined && country !== null && !/^[A-Z]{2}$/.test(country)) reject('invalid_country', 'country', 'country must be a 2-letter ISO 3166-1 code in capitals');
  return country;
}

/** `display_name`, `percentage`, `inclusive` (all required), `active`, `country`, `description`, `metadata`. */
function decodeCreate(input: unknown): CreateTaxRateCommand {
  const params = readParams(input, ['display_name', 'percentage', 'inclusive', 'active', 'country', 'description', 'metadata']);
  const displayName = optionalText(params, 'display_name', MAX_TEXT_LENGTH);
  if (displayName === undefined || displayName === null) return reject('missing_param', 'display_name', 'display_name is required');
  const percentage = readPercentage(params);
  const inclusive = optionalBoolean(params, 'inclusive');
  if (inclusive === undefined) return reject('missing_param', 'inclusive', 'inclusive is required');
  const active = optionalBoolean(params, 'active') ?? true;
  const country = readCountry(params) ?? null;
  const description = optionalText(params, 'description', MAX_TEXT_LENGTH) ?? null;
  const metadata = hasParam(params, 'metadata') ? createMetadata(params.metadata, 'v2') : {};
  return { displayName, percentage, inclusive, active, country, description, metadata };
}

/** `display_name`, `active`, `country`, `description`, `metadata`; `percentage` and `inclusive` are fixed at creation. */
function decodeUpdate(input: unknown): UpdateTaxRateCommand {
  const params = readParams(input, ['id', 'display_name', 'active', 'country', 'description', 'metadata']);
  const id = requireString(params, 'id');
  const displayName = optionalText(params, 'display_name', MAX_TEXT_LENGTH);
  if (displayName === null) reject('missing_param', 'display_name', 'display_name cannot be emptied');
  const changes = sentFields({ display_name: displayName, active: optionalBoolean(params, 'active'), country: readCountry(params), description: optionalText(params, 'description', MAX_TEXT_LENGTH) });
  return { id, changes, metadata: hasParam(params, 'metadata') ? params.metadata : undefined };
}

function decodeList(input: unknown): ListTaxRatesCommand {
  const params = readParams(input, [...V2_PAGINATION_PARAMS, 'active']);
  const page = readV2Page(params);
  return { page, active: optionalBoolean(params, 'active') };
}

export const TAX_RATE_OPERATIONS = [
  defineCommandOperation('tax_rates.create', { decode: decodeCreate, execute: createTaxRate, encode: renderTaxRate }),
  defineCommandOperation('tax_rates.retrieve', { decode: (input) => ({ id: requireString(readParams(input, ['id']), 'id') }), execute: retrieveTaxRate, encode: renderTaxRate }),
  defineCommandOperation('tax_rates.update', { decode: decodeUpdate, execute: updateTaxRate, encode: renderTaxRate }),
  defineCommandOperation('tax_rates.list', { decode: decodeList, execute: listTaxRates, encode: (rows, command) => v2ListObject(rows, command.page, TAX_RATES_URL, renderTaxRate) }),
];
