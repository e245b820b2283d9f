/**
 * The v2 codec of payment method configurations (v2 §4.5): parameters → typed commands of
 * src/checkout/payment-method-configurations.ts, refusals named by parameter, rows → v2
 * configuration objects (the effective display of each method) and the list.
 */
import { reject } from '../../domain/errors';
import { DISPLAY_METHODS, DISPLAY_PREFERENCES } from '../../domain/payment-method-display';
import {
  listPaymentMethodConfigurations,
  MAX_CONFIGURATION_NAME_LENGTH,
  PAYMENT_METHOD_CONFIGURATIONS_URL,
  PREFERENCE_COLUMN,
  renderPaymentMethodConfiguration,
  retrievePaymentMethodConfiguration,
  updatePaymentMethodConfiguration,
  type PaymentMethodConfigurationRow,
  type UpdatePaymentMethodConfigurationCommand,
} from '../../checkout/payment-method-configurations';
import { defineCommandOperation } from '../../operations/define';
import { hasParam, optionalBoolean, optionalEnum, optionalText, readParams, requireString } from '../../operations/params';

/**
 * For each of `card`, `paypay`, `apple_pay` an optional `{ display_preference: { preference } }`
 * with `on`, `off` or `none`. Rule 4 ("card cannot be hidden by setting off"): `off` for card is
 * refused (`no_allowed_param`), rather than stored and silently ignored. `active` and `name` (at
 * most 100 characters) change as sent.
 */
function decodeUpdate(input: unknown): UpdatePaymentMethodConfigurationCommand {
  const params = readParams(input, ['id', 'active', 'name', ...DISPLAY_METHODS]);
  const id = requireString(params, 'id');
  // The SDK's other two fields (official-sdks.md §2): whether the configuration is in use, its name.
  const active = optionalBoolean(params, 'active');
  const name = optionalText(params, 'name', MAX_CONFIGURATION_NAME_LENGTH);
  if (name === null) reject('invalid_string_length', 'name', 'name must not be empty');
  const changes: UpdatePaymentMethodConfigurationCommand['changes'] = {
    ...(active === undefined ? {} : { active }),
    ...(name === undefined || name === null ? {} : { name }),
  };
  for (const method of DISPLAY_METHODS) {
    if (!hasParam(params, method)) continue;
    const body = readParams(params[method], ['display_preference'], method);
    const preferenceParent = `${method}[display_preference]`;
    const display = readParams(body.display_preference, ['preference'], preferenceParent);
    const preference = optionalEnum(display, 'preference', DISPLAY_PREFERENCES, { parent: preferenceParent });
    if (preference === undefined) return reject('missing_param', `${preferenceParent}[preference]`, `${preferenceParent}[preference] is required`);
    if (method === 'card' && preference === 'off') {
      return reject('no_allowed_param', `${preferenceParent}[preference]`, 'card visibility is computed automatically; card cannot be hidden by setting off');
    }
    changes[PREFERENCE_COLUMN[method]] = preference;
  }
  return { id, changes };
}

/** The configurations of a mode fit one page: `has_more` is always false. */
const encodeList = (rows: readonly PaymentMethodConfigurationRow[]) => ({ object: 'list', url: PAYMENT_METHOD_CONFIGURATIONS_URL, has_more: false, data: rows.map(renderPaymentMethodConfiguration) });

export const PAYMENT_METHOD_CONFIGURATION_OPERATIONS = [
  defineCommandOperation('payment_method_configurations.list', { decode: (input) => readParams(input, []), execute: listPaymentMethodConfigurations, encode: encodeList }),
  defineCommandOperation('payment_method_configurations.retrieve', { decode: (input) => ({ id: requireString(readParams(input, ['id']), 'id') }), execute: retrievePaymentMethodConfiguration, encode: renderPaymentMethodConfiguration }),
  defineCommandOperation('payment_method_configurations.update', { decode: decodeUpdate, execute: updatePaymentMethodConfiguration, encode: renderPaymentMethodConfiguration }),
];
