/**
 * v2 payment methods (official-sdks.md §2 "Payment methods"; v2 §6.1 `payment_method.*`):
 * create with raw card data (test mode only, as the SDK documents: the card runs through the
 * simulated network's tokenization, and only what it answers is kept), or PayPay; retrieve,
 * update (billing details, metadata), list, attach to / detach from a customer, the payment
 * method of a v1 card, and a customer's payment methods. Events: `payment_method.attached`,
 * `.detached`, `.updated` (v2 §6.1 has no `.created`), in the same transaction.
 *
 * A detached payment method is spent: it cannot be attached again (SDK: "Detached Payment Method
 * Not Usable").
 */
import type { Kysely, Selectable, Updateable } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { findCustomer, renderV2Customer, type CustomerRow } from '../customers/customer-record';
import { POSTAL_CODE_PATTERN } from '../customers/cards';
import type { Database, PaymentMethodsTable } from '../db/schema';
import { reject } from '../domain/errors';
import { EMAIL_PATTERN, MAX_TEXT_LENGTH } from '../domain/limits';
import { mergeMetadata, type Metadata } from '../domain/metadata';
import { toIsoSeconds } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { hasParam, optionalString, readParams } from '../operations/params';
import { inV2Page, type V2Page } from '../operations/v2-pagination';

export type PaymentMethodRow = Selectable<PaymentMethodsTable>;

export const PAYMENT_METHODS_URL = '/v2/payment_methods';

export type BillingDetails = {
  readonly name: string | null;
  readonly email: string | null;
  readonly phone: string | null;
  readonly address: Readonly<Record<string, string>> | null;
};

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type PaymentMethodObject = {
  readonly id: string;
  readonly object: 'payment_method';
  readonly livemode: boolean;
  readonly type: PaymentMethodRow['type'];
  readonly customer_id: string | null;
  readonly billing_details: BillingDetails;
  readonly card: { readonly brand: string; readonly last4: string; readonly exp_month: number; readonly exp_year: number; readonly fingerprint: string; readonly country: string | null; readonly funding: string | null } | null;
  readonly metadata: Metadata;
  readonly detached_at: string | null;
  readonly created_at: string;
  readonly updated_at: string;
};

export function renderPaymentMethod(row: PaymentMethodRow): PaymentMethodObject {
  const details = row.billing_details as Partial<BillingDetails>;
  return {
    id: row.payment_method_id,
    object: 'payment_method',
    livemode: row.livemode,
    type: row.type,
    customer_id: row.customer_id,
    billing_details: { name: details.name ?? null, email: details.email ?? null, phone: details.phone ?? null, address: details.address ?? null },
    card:
      row.fingerprint === null
        ? null
        : { brand: row.brand ?? '', last4: row.last4 ?? '', exp_month: row.exp_month ?? 0, exp_year: row.exp_year ?? 0, fingerprint: row.fingerprint, country: row.country, funding: row.funding },
    metadata: row.metadata,
    detached_at: row.detached_at === null ? null : toIsoSeconds(row.detached_at),
    created_at: toIsoSeconds(row.created_at),
    updated_at: toIsoSeconds(row.updated_at),
  };
}

function methodEvent(row: PaymentMethodRow, type: 'payment_method.attached' | 'payment_method.detached' | 'payment_method.updated', at: Date) {
  return { accountId: row.account_id, livemode: row.livemode, type, data: renderPaymentMethod(row), at, apiVersion: 'v2' as const };
}

/** The payment method `id` of the caller's account and mode; unknown: `invalid_id` on `param`. */
export async function findPaymentMethod(executor: Kysely<Database>, caller: Caller, id: string, options: { readonly param?: string; readonly lock?: boolean } = {}): Promise<PaymentMethodRow> {
  let query = executor.selectFrom('payment_methods').selectAll().where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('payment_method_id', '=', id);
  if (options.lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) return reject('invalid_id', options.param ?? 'id', `No such payment method: ${id}`);
  return row;
}

/** The SDK's billing address fields (`PaymentMethodBillingAddressRequest`: the postal code is `zip`). */
const ADDRESS_KEYS = ['line1', 'line2', 'city', 'state', 'zip', 'country'] as const;

/**
 * `billing_details` {name, email, phone, address{…}} over `current`: each field optional text;
 * `requireContact` asks for an email or a phone (SDK: "email or phone (one required)"). Read by the
 * v2 codec on create and here on update, where the method's own details are the base.
 */
export function readBillingDetails(input: unknown, current: Partial<BillingDetails>, requireContact: boolean): BillingDetails {
  const params = readParams(input, ['name', 'email', 'phone', 'address'], 'billing_details');
  const text = (key: string): string | null | undefined => {
    const value = optionalString(params, key, { parent: 'billing_details', code: 'invalid_string_length' });
    if (value === undefined) return undefined;
    if ([...value].length > MAX_TEXT_LENGTH) reject('invalid_string_length', `billing_details[${key}]`, `billing_details[${key}] must be at most ${MAX_TEXT_LENGTH} characters`);
    return value === '' ? null : value;
  };
  const email = text('email');
  if (email !== undefined && email !== null && !EMAIL_PATTERN.test(email)) reject('invalid_email', 'billing_details[email]', 'billing_details[email] must be an e-mail address');
  const phone = text('phone');
  if (phone !== undefined && phone !== null && !/^\+[1-9]\d{1,14}$/.test(phone)) reject('invalid_param_key', 'billing_details[phone]', 'billing_details[phone] must be an E.164 number such as +819012345678');
  let address = current.address ?? null;
  if (hasParam(params, 'address')) {
    const sent = readParams(params.address, ADDRESS_KEYS, 'billing_details[address]');
    const entries = ADDRESS_KEYS.flatMap((key) => {
      const value = optionalString(sent, key, { parent: 'billing_details[address]' });
      return value === undefined || value === '' ? [] : [[key, value] as const];
    });
    const zip = entries.find(([key]) => key === 'zip')?.[1];
    if (zip !== undefined && !POSTAL_CODE_PATTERN.test(zip)) reject('invalid_address_zip', 'billing_details[address][zip]', 'billing_details[address][zip] must be 1 to 20 letters, digits, spaces or hyphens');
    address = entries.length === 0 ? null : Object.fromEntries(entries);
  }
  const details = { name: text('name') ?? current.name ?? null, email: email === undefined ? (current.email ?? null) : email, phone: phone === undefined ? (current.phone ?? null) : phone, address };
  if (requireContact && details.email === null && details.phone === null) reject('missing_param', 'billing_details[email]', 'billing_details needs an email or a phone');
  return details;
}

/** The card fields a payment method keeps (what the simulated network answered, never the number). */
export interface PaymentMethodCard {
  readonly fingerprint: string;
  readonly brand: string;
  readonly last4: string;
  readonly expMonth: number;
  readonly expYear: number;
  readonly funding: string;
  readonly country: string | null;
  readonly issuer: string;
}

/** Inserts a new payment method (no event: the caller writes the one its operation calls for). */
export async function insertPaymentMethod(
  trx: Kysely<Database>,
  ctx: Pick<Context, 'ids'>,
  caller: Caller,
  input: { readonly type: 'card' | 'paypay'; readonly card: PaymentMethodCard | null; readonly customerId: string | null; readonly billing: BillingDetails; readonly metadata: Metadata; readonly at: Date },
): Promise<PaymentMethodRow> {
  const { card, at } = input;
  return trx
    .insertInto('payment_methods')
    .values({
      account_id: caller.accountId,
      livemode: caller.livemode,
      payment_method_id: ctx.ids.next('paymentMethod'),
      type: input.type,
      customer_id: input.customerId,
      card_id: null,
      fingerprint: card?.fingerprint ?? null,
      brand: card?.brand ?? null,
      last4: card?.last4 ?? null,
      exp_month: card?.expMonth ?? null,
      exp_year: card?.expYear ?? null,
      funding: card?.funding ?? null,
      country: card?.country ?? null,
      issuer: card?.issuer ?? null,
      billing_details: JSON.stringify(input.billing),
      metadata: JSON.stringify(input.metadata),
      detached_at: null,
      created_at: at,
      updated_at: at,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** A payment method to create (parameters read, and the card tokenized, by the v2 codec, src/api/v2/payment-methods.ts). */
export interface CreatePaymentMethodCommand {
  readonly type: 'card' | 'paypay';
  readonly card: PaymentMethodCard | null;
  readonly billing: BillingDetails;
  /** The customer to attach it to at once; null for none. */
  readonly customerId: string | null;
  readonly metadata: Metadata;
}

/** `payment_methods.create`: the method, attached at once to `customerId` (`payment_method.attached`) when given. */
export async function createPaymentMethod(ctx: Context, caller: Caller, command: CreatePaymentMethodCommand): Promise<PaymentMethodRow> {
  const { customerId } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    if (customerId !== null) await findCustomer(trx, caller, customerId, 'customer_id', true);
    const inserted = await insertPaymentMethod(trx, ctx, caller, { type: command.type, card: command.card, customerId, billing: command.billing, metadata: command.metadata, at: now });
    if (customerId !== null) await recordEvent(trx, ctx.ids, methodEvent(inserted, 'payment_method.attached', now));
    return inserted;
  });
}

export function retrievePaymentMethod(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<PaymentMethodRow> {
  return findPaymentMethod(ctx.db, caller, command.id);
}

export interface UpdatePaymentMethodCommand {
  readonly id: string;
  /** The method's type as the SDK's update body names it: it must be its own. */
  readonly type: string | undefined;
  /** `billing_details` as sent, read over the method's own once it is found; undefined when not sent. */
  readonly billingDetails?: unknown;
  /** The metadata as sent, merged (and checked) once the method is found; undefined when not sent. */
  readonly metadata?: unknown;
}

/** `payment_methods.update`: `billing_details` (sent fields replace, `''` clears) and `metadata` (v2 §2.6); `payment_method.updated`. */
export async function updatePaymentMethod(ctx: Context, caller: Caller, command: UpdatePaymentMethodCommand): Promise<PaymentMethodRow> {
  const { id, type } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findPaymentMethod(trx, caller, id, { lock: true });
    if (type !== undefined && type !== current.type) reject('invalid_param_key', 'type', `payment method ${id} is of type ${current.type}, not ${type}`);
    const billing = command.billingDetails === undefined ? current.billing_details : readBillingDetails(command.billingDetails, current.billing_details as Partial<BillingDetails>, false);
    const metadata = command.metadata === undefined ? current.metadata : mergeMetadata(current.metadata, command.metadata, 'v2');
    const updated = await saveMethod(trx, current, { billing_details: JSON.stringify(billing), metadata: JSON.stringify(metadata), updated_at: now });
    await recordEvent(trx, ctx.ids, methodEvent(updated, 'payment_method.updated', now));
    return updated;
  });
}

async function saveMethod(trx: Kysely<Database>, row: PaymentMethodRow, changes: Updateable<PaymentMethodsTable>): Promise<PaymentMethodRow> {
  return trx
    .updateTable('payment_methods')
    .set(changes)
    .where('account_id', '=', row.account_id)
    .where('livemode', '=', row.livemode)
    .where('payment_method_id', '=', row.payment_method_id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * `payment_methods.attach`: a detached method is spent (`payment_method_already_detached`);
 * attached to this customer already (`payment_method_already_attached`) or to another
 * (`payment_method_customer_mismatch`).
 */
export async function attachPaymentMethod(ctx: Context, caller: Caller, command: { readonly id: string; readonly customerId: string }): Promise<PaymentMethodRow> {
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    await findCustomer(trx, caller, command.customerId, 'customer_id', true);
    return attachMethod(trx, ctx, caller, { id: command.id, param: 'id', customerId: command.customerId, at: now });
  });
}

/**
 * Attaches method `id` to a customer the caller's transaction has found, with its
 * `payment_method.attached` event; the refusals of `payment_methods.attach` name `param`.
 */
export async function attachMethod(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, caller: Caller, input: { readonly id: string; readonly param: string; readonly customerId: string; readonly at: Date }): Promise<PaymentMethodRow> {
  const { id, param, customerId, at } = input;
  const current = await findPaymentMethod(trx, caller, id, { lock: true, param });
  if (current.detached_at !== null) reject('payment_method_already_detached', param, `payment method ${id} was detached`);
  if (current.customer_id === customerId) reject('payment_method_already_attached', 'customer_id', `payment method ${id} is already attached to ${customerId}`);
  if (current.customer_id !== null) reject('payment_method_customer_mismatch', 'customer_id', `payment method ${id} is attached to another customer`);
  const attached = await saveMethod(trx, current, { customer_id: customerId, updated_at: at });
  await recordEvent(trx, ctx.ids, methodEvent(attached, 'payment_method.attached', at));
  return attached;
}

/** `payment_methods.detach`: `payment_method_unattached` if never attached, `payment_method_already_detached` if done. */
export async function detachPaymentMethod(ctx: Context, caller: Caller, command: { readonly id: string }): Promise<PaymentMethodRow> {
  const { id } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findPaymentMethod(trx, caller, id, { lock: true });
    if (current.detached_at !== null) reject('payment_method_already_detached', 'id', `payment method ${id} was detached already`);
    if (current.customer_id === null) reject('payment_method_unattached', 'id', `payment method ${id} is not attached to a customer`);
    const detached = await saveMethod(trx, current, { customer_id: null, detached_at: now, updated_at: now });
    await recordEvent(trx, ctx.ids, methodEvent(detached, 'payment_method.detached', now));
    return detached;
  });
}

/**
 * `payment_methods.retrieve_by_card`: the payment method of a v1 card the account holds (not
 * deleted). Made on the first lookup, attached to the card's customer, with the id `pm_` + the
 * card id's random part, so every lookup answers the same method.
 */
export async function retrievePaymentMethodByCard(ctx: Context, caller: Caller, command: { readonly cardId: string }): Promise<PaymentMethodRow> {
  const { cardId } = command;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const card = await trx.selectFrom('cards').selectAll().where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('card_id', '=', cardId).where('deleted_at', 'is', null).executeTakeFirst();
    if (!card) return reject('invalid_id', 'card_id', `No such card: ${cardId}`);
    await trx
      .insertInto('payment_methods')
      .values({
        account_id: caller.accountId,
        livemode: caller.livemode,
        payment_method_id: `pm_${cardId.replace(/^car_/, '')}`,
        type: 'card',
        customer_id: card.customer_id,
        card_id: cardId,
        fingerprint: card.fingerprint,
        brand: card.brand,
        last4: card.last4,
        exp_month: card.exp_month,
        exp_year: card.exp_year,
        funding: card.funding,
        country: card.country,
        issuer: card.issuer,
        billing_details: JSON.stringify({ name: card.name, email: card.email, phone: card.phone, address: null }),
        metadata: JSON.stringify({}),
        detached_at: null,
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) => oc.columns(['account_id', 'livemode', 'card_id']).where('card_id', 'is not', null).doNothing())
      .execute();
    return trx.selectFrom('payment_methods').selectAll().where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('card_id', '=', cardId).executeTakeFirstOrThrow();
  });
}

/** The filters of a payment method list: a page, and optionally a type (and a customer). */
export interface ListPaymentMethodsCommand {
  readonly page: V2Page;
  readonly type: string | undefined;
  readonly customerId?: string | undefined;
}

/** `payment_methods.list`: newest first, cursors, optional `customer_id` and `type` filters. */
export async function listPaymentMethods(ctx: Context, caller: Caller, command: ListPaymentMethodsCommand): Promise<PaymentMethodRow[]> {
  const { page, type, customerId } = command;
  const cursor = page.cursor === undefined ? undefined : await findPaymentMethod(ctx.db, caller, page.cursor.id, { param: page.cursor.param });
  return ctx.db
    .selectFrom('payment_methods')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    .$if(customerId !== undefined, (q) => q.where('customer_id', '=', customerId!))
    .$if(type !== undefined, (q) => q.where('type', '=', type as PaymentMethodRow['type']))
    .$call(inV2Page(page, cursor && { created_at: cursor.created_at, id: cursor.payment_method_id }, 'payment_method_id'))
    .execute();
}

/** `customers.list_payment_methods` (`GET /v2/customers/{id}/payment_methods`): the customer's attached methods (unknown customer: `invalid_id` on `id`). */
export async function listCustomerPaymentMethods(ctx: Context, caller: Caller, command: ListPaymentMethodsCommand & { readonly customerId: string }): Promise<PaymentMethodRow[]> {
  await findCustomer(ctx.db, caller, command.customerId, 'id');
  return listPaymentMethods(ctx, caller, command);
}

/** `v2.customers.update` as a command (parameters read by the v2 codec, src/api/v2/customers.ts). */
export interface UpdateV2CustomerCommand {
  readonly id: string;
  /** The sent fields; `default_payment_method_id` null clears it. */
  readonly changes: Partial<Pick<CustomerRow, 'email' | 'description' | 'default_payment_method_id'>>;
  /** The metadata as sent, merged under the v2 rules (and checked) once the customer is found; undefined when not sent. */
  readonly metadata?: unknown;
}

/**
 * `v2.customers.update` (v2 §4.6): `metadata` under the v2 rules of §2.6 (string, integer and
 * boolean values; v1 `customers.update` keeps v1 rules), `email`, `description`, and
 * `default_payment_method_id` (a method attached to this customer: `payment_method_unattached`
 * otherwise, `payment_method_already_detached` if spent; null clears it). Writes a v2
 * `customer.updated` with the v2 customer object.
 */
export async function updateV2Customer(ctx: Context, caller: Caller, command: UpdateV2CustomerCommand): Promise<CustomerRow> {
  const { id: customerId, changes } = command;
  const defaultMethod = changes.default_payment_method_id;
  const now = ctx.clock.now();
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findCustomer(trx, caller, customerId, 'id', true);
    const metadata = command.metadata === undefined ? current.metadata : mergeMetadata(current.metadata, command.metadata, 'v2');
    if (defaultMethod !== undefined && defaultMethod !== null) {
      const method = await findPaymentMethod(trx, caller, defaultMethod, { param: 'default_payment_method_id' });
      if (method.detached_at !== null) reject('payment_method_already_detached', 'default_payment_method_id', `payment method ${defaultMethod} was detached`);
      if (method.customer_id !== customerId) reject('payment_method_unattached', 'default_payment_method_id', `payment method ${defaultMethod} is not attached to ${customerId}`);
    }
    const updated = await trx
      .updateTable('customers')
      .set({ ...changes, metadata: JSON.stringify(metadata), updated_at: now })
      .where('account_id', '=', caller.accountId)
      .where('livemode', '=', caller.livemode)
      .where('customer_id', '=', customerId)
      .returningAll()
      .executeTakeFirstOrThrow();
    await recordEvent(trx, ctx.ids, { accountId: caller.accountId, livemode: caller.livemode, type: 'customer.updated', data: renderV2Customer(updated), at: now, apiVersion: 'v2' });
    return updated;
  });
}
