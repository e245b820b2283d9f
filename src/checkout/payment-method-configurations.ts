/**
 * Payment method configurations (`pmc_`, v2 §2.4, §4.5): per account and mode, which payment
 * methods the payment screen shows. The merchant stores a preference per method (`on`, `off`,
 * `none`); the effective value follows the display rules 1–6 (src/domain/payment-method-display.ts)
 * from that preference, what the account can use, and the mode. Test and live configurations are
 * separate rows (rule 6).
 *
 * Every account and mode has one default configuration, created on first access (list) with all
 * preferences `none` and, as usable card brands, the brands the account has fee rates for.
 * What the account can use (brands, PayPay) is the service's to set (`setPaymentMethodCapabilities`),
 * not the merchant's: it is not part of the update operation.
 */
import type { Kysely, Selectable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import type { DisplayPreference } from '../db/column-types';
import type { Database, PaymentMethodConfigurationsTable } from '../db/schema';
import { reject } from '../domain/errors';
import { paymentMethodDisplay, type DisplayMethod, type MethodDisplay } from '../domain/payment-method-display';
import type { Context } from '../engine/context';

export type PaymentMethodConfigurationRow = Selectable<PaymentMethodConfigurationsTable>;

export const DEFAULT_CONFIGURATION_NAME = 'Default';
export const PAYMENT_METHOD_CONFIGURATIONS_URL = '/v2/payment_method_configurations';
export const MAX_CONFIGURATION_NAME_LENGTH = 100;

export type PaymentMethodConfigurationObject = {
  readonly id: string;
  readonly object: 'payment_method_configuration';
  readonly livemode: boolean;
  readonly active: boolean;
  readonly name: string;
  readonly is_default: boolean;
  readonly card: MethodDisplay;
  readonly paypay: MethodDisplay;
  readonly apple_pay: MethodDisplay;
};

/** The column of each method's stored preference. */
export const PREFERENCE_COLUMN = { card: 'card_preference', paypay: 'paypay_preference', apple_pay: 'apple_pay_preference' } as const satisfies Record<DisplayMethod, keyof PaymentMethodConfigurationsTable>;

export function renderPaymentMethodConfiguration(row: PaymentMethodConfigurationRow): PaymentMethodConfigurationObject {
  const display = paymentMethodDisplay({
    livemode: row.livemode,
    preferences: { card: row.card_preference, paypay: row.paypay_preference, apple_pay: row.apple_pay_preference },
    usableCardBrands: row.usable_card_brands,
    paypayUsable: row.paypay_usable,
  });
  return { id: row.configuration_id, object: 'payment_method_configuration', livemode: row.livemode, active: row.active, name: row.name, is_default: row.is_default, ...display };
}

/** The default configuration of the caller's account and mode, created on first use. */
export async function defaultConfiguration(executor: Kysely<Database>, ctx: Pick<Context, 'ids' | 'clock'>, caller: Pick<Caller, 'accountId' | 'livemode'>): Promise<PaymentMethodConfigurationRow> {
  const existing = await executor.selectFrom('payment_method_configurations').selectAll().where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('is_default', '=', true).executeTakeFirst();
  if (existing) return existing;
  const brands = await executor.selectFrom('account_fee_rates').select('brand').where('account_id', '=', caller.accountId).orderBy('brand').execute();
  const now = ctx.clock.now();
  await executor
    .insertInto('payment_method_configurations')
    .values({
      account_id: caller.accountId,
      livemode: caller.livemode,
      configuration_id: ctx.ids.next('paymentMethodConfiguration'),
      name: DEFAULT_CONFIGURATION_NAME,
      usable_card_brands: JSON.stringify(brands.map((b) => b.brand)),
      created_at: now,
      updated_at: now,
    })
    // Two first calls racing: the partial unique index keeps one default; the loser reads it.
    .onConflict((oc) => oc.columns(['account_id', 'livemode']).where('is_default', '=', true).doNothing())
    .execute();
  return executor.selectFrom('payment_method_configurations').selectAll().where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('is_default', '=', true).executeTakeFirstOrThrow();
}

async function findConfiguration(executor: Kysely<Database>, caller: Caller, id: string, lock: boolean): Promise<PaymentMethodConfigurationRow> {
  let query = executor.selectFrom('payment_method_configurations').selectAll().where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('configuration_id', '=', id);
  if (lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) return reject('invalid_id', 'id', `No such payment method configuration: ${id}`);
  return row;
}

/** `payment_method_configurations.list`: the configurations of the caller's mode (the default first, created on first use). */
export async function listPaymentMethodConfigurations(ctx: Context, caller: Caller): Promise<PaymentMethodConfigurationRow[]> {
  await defaultConfiguration(ctx.db, ctx, caller);
  return ctx.db
    .selectFrom('payment_method_configurations')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .orderBy('is_default', 'desc')
    .orderBy('created_at')
    .orderBy('configuration_id')
    .execute();
}

/** `payment_method_configurations.retrieve` (`GET /v2/payment_method_configurations/{id}`). */
export function retrievePaymentMethodConfiguration(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<PaymentMethodConfigurationRow> {
  return findConfiguration(ctx.db, caller, command.id, false);
}

/** `payment_method_configurations.update` as a command (parameters read by the v2 codec, src/api/v2/payment-method-configurations.ts). */
export interface UpdatePaymentMethodConfigurationCommand {
  readonly id: string;
  /** The sent preferences by column, `active` and `name`; methods not sent are unchanged. */
  readonly changes: Partial<Record<(typeof PREFERENCE_COLUMN)[DisplayMethod], DisplayPreference>> & { active?: boolean; name?: string };
}

/** `payment_method_configurations.update` (`POST …/{id}`): the sent changes (none: the configuration as it is). */
export async function updatePaymentMethodConfiguration(ctx: Context, caller: Caller, command: UpdatePaymentMethodConfigurationCommand): Promise<PaymentMethodConfigurationRow> {
  const { id, changes } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findConfiguration(trx, caller, id, true);
    if (Object.keys(changes).length === 0) return current;
    return trx
      .updateTable('payment_method_configurations')
      .set({ ...changes, updated_at: now })
      .where('account_id', '=', current.account_id)
      .where('livemode', '=', current.livemode)
      .where('configuration_id', '=', current.configuration_id)
      .returningAll()
      .executeTakeFirstOrThrow();
  });
}

/**
 * What an account can use (rule 3), set by the service (contracts, brand approvals), not through
 * the merchant API: card brands it may accept and whether PayPay is enabled. Applies to the
 * default configuration of the given mode.
 */
export async function setPaymentMethodCapabilities(
  ctx: Pick<Context, 'db' | 'ids' | 'clock'>,
  target: { readonly accountId: string; readonly livemode: boolean },
  capabilities: { readonly usableCardBrands?: readonly string[]; readonly paypayUsable?: boolean },
): Promise<PaymentMethodConfigurationRow> {
  const current = await defaultConfiguration(ctx.db, ctx, target);
  return ctx.db
    .updateTable('payment_method_configurations')
    .set({
      ...(capabilities.usableCardBrands === undefined ? {} : { usable_card_brands: JSON.stringify(capabilities.usableCardBrands) }),
      ...(capabilities.paypayUsable === undefined ? {} : { paypay_usable: capabilities.paypayUsable }),
      updated_at: ctx.clock.now(),
    })
    .where('account_id', '=', current.account_id)
    .where('livemode', '=', current.livemode)
    .where('configuration_id', '=', current.configuration_id)
    .returningAll()
    .executeTakeFirstOrThrow();
}
