/**
 * v1 charges as operations (v1 §2.2, §3.1, §4.2, §4.3, §7, §8; service rules §2): create (captured
 * at once, held with `capture=false`, or pending 3-D Secure), retrieve, update, list, capture,
 * refund, reauth, tds_finish, and the buyer's 3-D Secure authentication step.
 *
 * Every operation checks its parameters before it opens a transaction, locks the charge row, reads
 * the clock after the lock, and checks the charge's state before it writes, so a refused call
 * changes nothing. The one exception is a card the network declines: the failed charge (or the
 * failed reauthorization attempt) is kept, the transaction commits, and the 402 is thrown after it.
 */
import type { Kysely } from 'kysely';
import { DEFAULT_FEE_RATES, type Caller } from '../accounts/accounts';
import type { CardRow } from '../customers/card-object';
import { requireCustomerCard } from '../customers/cards';
import { findCustomer } from '../customers/customer-record';
import { MAX_DESCRIPTION_LENGTH } from '../customers/customers';
import { consumeToken } from '../customers/tokens';
import { finishedTokenThreeDSecure } from '../customers/token-three-d-secure';
import type { Database } from '../db/schema';
import { KessaiError, reject, type ErrorCode } from '../domain/errors';
import { holdLapsed, v1HoldExpiresAt, V1_EXPIRY_DAYS, type CardIssuer } from '../domain/hold-periods';
import { createMetadata, mergeMetadata } from '../domain/metadata';
import { MS_PER_DAY } from '../domain/time';
import type { Context } from '../engine/context';
import { recordEvent } from '../events/outbox';
import { defineOperation } from '../operations/define';
import { inPage, listObject, PAGINATION_PARAMS, readPage, type ListObject } from '../operations/pagination';
import { hasParam, optionalBoolean, optionalInteger, optionalString, readParams, requireString, type Params } from '../operations/params';
import { settleCaptured, settleRefunds } from '../settlement/capture';
import { disputedAmounts } from '../disputes/disputes';
import { resolveChargeTenant } from '../tenants/charge-tenant';
import { chargeRow, type ChargeCard, type ChargeObject, type ChargeRow } from './charges';
import { findCharge, renderCharges, renderOneCharge } from './charge-record';

export const CHARGES_URL = '/v1/charges';

/** v1 §8: "Charge amount 50 to 9,999,999 yen", "Capture amount 50 to 9,999,999 yen, at most the held amount". */
export const MIN_CHARGE_AMOUNT = 50;
export const MAX_CHARGE_AMOUNT = 9_999_999;
/** v1 §8: "Refund amount 1 to 9,999,999 yen". */
export const MIN_REFUND_AMOUNT = 1;
/** v1 §8: "Refund window 180 days from the sale" (service rules §2: from creation). */
export const REFUND_WINDOW_MS = 180 * MS_PER_DAY;
/** v1 §8: "refund_reason up to 255 characters". */
export const MAX_REFUND_REASON_LENGTH = 255;
/** Service rules §2: "a pending charge can be finished for 30 minutes after creation". */
export const THREE_D_SECURE_WINDOW_MS = 30 * 60 * 1000;
export const CHARGE_CURRENCY = 'jpy';

type Declined<T> = { readonly done: T } | { readonly declined: KessaiError };

/** The result of a transaction that may have kept a declined attempt: thrown after the commit. */
function settled<T>(result: Declined<T>): T {
  if ('declined' in result) throw result.declined;
  return result.done;
}

function characterCount(text: string): number {
  return [...text].length;
}

/** `description`: at most 255 characters (the customers' rule); empty clears it. */
function readDescription(params: Params): string | null | undefined {
  const description = optionalString(params, 'description', { code: 'invalid_string_length' });
  if (description === undefined) return undefined;
  if (characterCount(description) > MAX_DESCRIPTION_LENGTH) reject('invalid_string_length', 'description', `description must be at most ${MAX_DESCRIPTION_LENGTH} characters`);
  return description === '' ? null : description;
}

function requireAmount(params: Params, min: number): number {
  const amount = optionalInteger(params, 'amount', { min, max: MAX_CHARGE_AMOUNT, code: 'invalid_amount' });
  if (amount === undefined) return reject('missing_param', 'amount', 'amount is required');
  return amount;
}

function issuerOf(card: { readonly issuer?: string | null }): CardIssuer {
  return card.issuer === 'overseas' ? 'overseas' : 'domestic';
}

/** A 3-D Secure charge is pending from creation until it is finished or abandoned. */
function tdsPending(row: ChargeRow): boolean {
  return row.tds_expires_at !== null;
}

/** A hold has lapsed once released by the job, or once its `expired_at` has passed (whether or not the job has run). */
function lapsed(row: ChargeRow, at: Date): boolean {
  return row.released_at !== null || (row.expired_at !== null && holdLapsed(row.expired_at, at));
}

function assertNotPending(row: ChargeRow): void {
  if (tdsPending(row)) reject('three_d_secure_incompleted', 'id', `Charge ${row.charge_id} is waiting for 3-D Secure; finish it with tds_finish first.`);
}

function assertPaid(row: ChargeRow): void {
  if (!row.paid) {
    throw new KessaiError('failed_payment', { param: 'id', charge: row.charge_id, message: `Charge ${row.charge_id} has failed (${row.failure_code ?? 'not authorized'}).` });
  }
}

async function writeChanges(trx: Kysely<Database>, row: ChargeRow, changes: Partial<Omit<ChargeRow, 'metadata'>> & { metadata?: Readonly<Record<string, string>> }): Promise<ChargeRow> {
  const { metadata, ...rest } = changes;
  await trx
    .updateTable('charges')
    .set({ ...rest, ...(metadata === undefined ? {} : { metadata: JSON.stringify(metadata) }) })
    .where('account_id', '=', row.account_id)
    .where('livemode', '=', row.livemode)
    .where('charge_id', '=', row.charge_id)
    .execute();
  return { ...row, ...changes } as ChargeRow;
}

/**
 * The charge object as stored now, read back after the writes (and after settlement filled its
 * columns), so the response and the event show exactly the row.
 */
async function storedCharge(trx: Kysely<Database>, row: Pick<ChargeRow, 'account_id' | 'livemode' | 'charge_id'>): Promise<ChargeObject> {
  return renderOneCharge(trx, await findCharge(trx, { accountId: row.account_id, livemode: row.livemode, kind: 'secret' }, row.charge_id));
}

async function chargeEvent(trx: Kysely<Database>, ctx: Pick<Context, 'ids'>, row: ChargeRow, type: string, at: Date): Promise<ChargeObject> {
  const charge = await storedCharge(trx, row);
  await recordEvent(trx, ctx.ids, { accountId: row.account_id, livemode: row.livemode, type, data: charge, at });
  return charge;
}

const keyOf = (row: ChargeRow) => ({ accountId: row.account_id, livemode: row.livemode, chargeId: row.charge_id });

/** The card to charge: a token (`card` alone), or a customer's card (`customer`, with `card` choosing a non-default one). */
async function resolveCard(trx: Kysely<Database>, caller: Caller, customerId: string | undefined, cardParam: string | undefined, at: Date): Promise<{ card: ChargeCard & Pick<CardRow, 'funding' | 'issuer'>; customerId: string | null }> {
  if (customerId !== undefined) {
    const customer = await findCustomer(trx, caller, customerId, 'customer');
    if (cardParam !== undefined) return { card: await requireCustomerCard(trx, caller, customerId, cardParam, 'card'), customerId };
    if (customer.default_card_id === null) return reject('missing_card', 'customer', `Customer ${customerId} has no default card.`);
    return { card: await requireCustomerCard(trx, caller, customerId, customer.default_card_id, 'customer'), customerId };
  }
  const token = await consumeToken(trx, caller, cardParam!, 'card', at);
  return { card: { ...token, customer_id: null }, customerId: null };
}

/**
 * `charges.create` (v1 §4.2): `amount`, `currency`, `card` (token) or `customer` (+ `card`),
 * `description`, `capture`, `expiry_days`, `three_d_secure`, `metadata`.
 * - default: authorized and captured at once, `charge.succeeded`;
 * - `capture=false`: a hold until `expired_at` from the hold table (service rules §2.1);
 * - `three_d_secure=true`: pending (`paid` false, `unverified`), finished by `tds_finish` within 30 minutes.
 * A declined card keeps the failed charge (`charge.failed`) and answers 402 naming it.
 */
export async function createCharge(ctx: Context, caller: Caller, input: unknown): Promise<ChargeObject> {
  const params = readParams(input, ['amount', 'currency', 'card', 'customer', 'description', 'capture', 'expiry_days', 'three_d_secure', 'metadata', 'tenant', 'platform_fee']);
  const amount = requireAmount(params, MIN_CHARGE_AMOUNT);
  const currency = requireString(params, 'currency', { code: 'invalid_currency' });
  if (currency !== CHARGE_CURRENCY) reject('invalid_currency', 'currency', `currency must be ${CHARGE_CURRENCY}, got ${JSON.stringify(currency)}`);
  // v1 §4.2: "Passing card details directly in place of a token is no longer accepted": a `card[…]`
  // object is a parameter that cannot be specified (invalid_param_key on `card`).
  const cardParam = optionalString(params, 'card');
  const customerParam = optionalString(params, 'customer');
  if (cardParam === undefined && customerParam === undefined) reject('no_payment_method', 'card', 'one of card or customer is required');
  const description = readDescription(params) ?? null;
  const capture = optionalBoolean(params, 'capture') ?? true;
  const expiryDays = optionalInteger(params, 'expiry_days', { min: V1_EXPIRY_DAYS.min, max: V1_EXPIRY_DAYS.max, code: 'invalid_expiry_days' });
  if (expiryDays !== undefined && capture) reject('unnecessary_expiry_days', 'expiry_days', 'expiry_days applies only with capture=false');
  const threeDSecure = optionalBoolean(params, 'three_d_secure') ?? false;
  const metadata = hasParam(params, 'metadata') ? (createMetadata(params.metadata, 'v1') as Record<string, string>) : {};
  // Platform mode (v1 §4.2): checked against the tenant inside the transaction (resolveChargeTenant).
  const tenantParam = optionalString(params, 'tenant');
  const platformFeeParam = optionalInteger(params, 'platform_fee', { code: 'invalid_amount' });

  const result = await ctx.db.transaction().execute(async (trx): Promise<Declined<ChargeObject>> => {
    const now = ctx.clock.now();
    const { card, customerId } = await resolveCard(trx, caller, customerParam, cardParam, now);
    // A token that finished 3-D Secure (tokens.tds_finish) authorizes as authenticated (i15c).
    const tokenThreeDSecure = customerId === null ? await finishedTokenThreeDSecure(trx, caller, cardParam!) : undefined;
    const chargeId = ctx.ids.next('charge');
    const feeRate = await feeRateOf(trx, caller.accountId, card.brand);
    const platform = await resolveChargeTenant(trx, caller, { tenant: tenantParam, platformFee: platformFeeParam, amount });
    const base = {
      account_id: caller.accountId,
      livemode: caller.livemode,
      charge_id: chargeId,
      amount,
      currency,
      card_id: card.card_id,
      customer_id: customerId,
      subscription_id: null,
      period_start: null,
      description,
      fee_rate: feeRate,
      ...platform,
      refunded: false,
      amount_refunded: 0,
      refund_reason: null,
      metadata,
      created_at: now,
      updated_at: now,
      capture_requested: capture,
      expiry_days: capture ? null : (expiryDays ?? V1_EXPIRY_DAYS.default),
      card_funding: card.funding,
      card_issuer: card.issuer,
      released_at: null,
      reauth_count: 0,
      reauth_tried_expired_at: null,
    } as const;
    if (threeDSecure) {
      // v1 §3.1: "paid=false, captured=false, captured_at=null, expired_at=null, three_d_secure_status=unverified
      // … values are forced regardless of other parameters".
      const row = chargeRow({
        ...base,
        paid: false,
        captured: false,
        captured_at: null,
        expired_at: null,
        amount_captured: null,
        failure_code: null,
        failure_message: null,
        three_d_secure_status: 'unverified',
        authorization_code: null,
        authorized_at: null,
        tds_expires_at: new Date(now.getTime() + THREE_D_SECURE_WINDOW_MS),
      });
      await insertCharge(trx, row);
      return { done: await storedCharge(trx, row) };
    }
    const [authorization] = await ctx.processor.authorize([
      { reference: chargeId, fingerprint: card.fingerprint, expMonth: card.exp_month, expYear: card.exp_year, amount, currency: 'jpy', livemode: caller.livemode, at: now, kind: capture ? 'charge' : 'hold', ...(tokenThreeDSecure ? { threeDSecure: tokenThreeDSecure } : {}) },
    ]);
    const approved = authorization!.approved;
    const row = chargeRow({
      ...base,
      paid: approved,
      captured: approved && capture,
      captured_at: approved && capture ? now : null,
      expired_at: approved && !capture ? v1HoldExpiresAt({ authorizedAt: now, expiryDays: base.expiry_days ?? undefined, issuer: issuerOf(card) }).expiresAt : null,
      amount_captured: approved && capture ? amount : null,
      failure_code: authorization!.approved ? null : authorization!.code,
      failure_message: authorization!.approved ? null : authorization!.message,
      three_d_secure_status: tokenThreeDSecure ?? null,
      authorization_code: authorization!.approved ? authorization!.authorizationCode : null,
      authorized_at: approved ? now : null,
      tds_expires_at: null,
    });
    await insertCharge(trx, row);
    if (row.captured) await settleCaptured(trx, ctx, [keyOf(row)]);
    const charge = await chargeEvent(trx, ctx, row, approved ? 'charge.succeeded' : 'charge.failed', now);
    if (!authorization!.approved) return { declined: new KessaiError(authorization!.code, { charge: chargeId, message: authorization!.message }) };
    return { done: charge };
  });
  return settled(result);
}

async function feeRateOf(trx: Kysely<Database>, accountId: string, brand: string): Promise<string> {
  const row = await trx.selectFrom('account_fee_rates').select('fee_rate').where('account_id', '=', accountId).where('brand', '=', brand).executeTakeFirst();
  return row?.fee_rate ?? DEFAULT_FEE_RATES[brand as keyof typeof DEFAULT_FEE_RATES] ?? '3.00';
}

async function insertCharge(trx: Kysely<Database>, row: ChargeRow): Promise<void> {
  const { metadata, ...rest } = row;
  const fields = Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== undefined));
  await trx
    .insertInto('charges')
    .values({ ...(fields as Omit<ChargeRow, 'metadata'>), metadata: JSON.stringify(metadata) })
    .execute();
}

export async function retrieveCharge(ctx: Context, caller: Caller, input: unknown): Promise<ChargeObject> {
  const params = readParams(input, ['id']);
  return renderOneCharge(ctx.db, await findCharge(ctx.db, caller, requireString(params, 'id')));
}

/** `charges.update`: `description` and `metadata` (v1 §4.2); `charge.updated`. */
export async function updateCharge(ctx: Context, caller: Caller, input: unknown): Promise<ChargeObject> {
  const params = readParams(input, ['id', 'description', 'metadata']);
  const chargeId = requireString(params, 'id');
  const description = readDescription(params);
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findCharge(trx, caller, chargeId, true);
    const now = ctx.clock.now();
    const metadata = hasParam(params, 'metadata') ? (mergeMetadata(current.metadata, params.metadata, 'v1') as Record<string, string>) : current.metadata;
    const row = await writeChanges(trx, current, { ...(description === undefined ? {} : { description }), metadata, updated_at: now });
    return chargeEvent(trx, ctx, row, 'charge.updated', now);
  });
}

/**
 * `charges.list`: pagination (v1 §4.1) plus `customer` and `subscription` (the filters of the real
 * service that kessai has; v1 §4.2 leaves them "not shown"), newest first.
 */
export async function listCharges(ctx: Context, caller: Caller, input: unknown): Promise<ListObject<ChargeObject>> {
  const params = readParams(input, [...PAGINATION_PARAMS, 'customer', 'subscription']);
  const page = readPage(params);
  const customer = optionalString(params, 'customer', { code: 'invalid_querystring' });
  const subscription = optionalString(params, 'subscription', { code: 'invalid_querystring' });
  const rows = await ctx.db
    .selectFrom('charges')
    .selectAll()
    .where('account_id', '=', caller.accountId)
    .where('livemode', '=', caller.livemode)
    // The captures of v2 payment flows are charge rows for settlement, not v1 charges.
    .where('payment_flow_id', 'is', null)
    .$if(customer !== undefined, (q) => q.where('customer_id', '=', customer!))
    .$if(subscription !== undefined, (q) => q.where('subscription_id', '=', subscription!))
    .$call(inPage(page, 'charge_id'))
    .execute();
  return listObject(await renderCharges(ctx.db, rows), page, CHARGES_URL);
}

/**
 * `charges.capture` (v1 §3.1): an authorized, uncaptured charge whose hold has not lapsed. A
 * smaller `amount` captures that much and puts the difference in `amount_refunded`; above the
 * hold is `capture_amount_gt_net`; after `expired_at` it is `charge_expired` (service rules §2).
 */
export async function captureCharge(ctx: Context, caller: Caller, input: unknown): Promise<ChargeObject> {
  const params = readParams(input, ['id', 'amount']);
  const chargeId = requireString(params, 'id');
  const requested = optionalInteger(params, 'amount', { min: MIN_CHARGE_AMOUNT, max: MAX_CHARGE_AMOUNT, code: 'invalid_amount' });
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findCharge(trx, caller, chargeId, true);
    const now = ctx.clock.now();
    assertNotPending(current);
    assertPaid(current);
    if (current.captured) reject('already_captured', 'id', `Charge ${chargeId} is already captured.`);
    if (current.refunded) reject('cant_capture_refunded_charge', 'id', `Charge ${chargeId} was refunded; it cannot be captured.`);
    if (lapsed(current, now)) reject('charge_expired', 'id', `The authorization of charge ${chargeId} lapsed at ${current.expired_at?.toISOString() ?? 'its expiry'}.`);
    const amount = requested ?? current.amount;
    if (amount > current.amount) reject('capture_amount_gt_net', 'amount', `amount ${amount} is above the held ${current.amount} yen`);
    const [result] = await ctx.processor.capture([{ reference: current.charge_id, authorizationCode: current.authorization_code ?? '', amount, at: now }]);
    if (!result!.ok) throw new KessaiError(result!.code, { charge: chargeId, message: result!.message });
    const row = await writeChanges(trx, current, { captured: true, captured_at: now, amount_captured: amount, amount_refunded: current.amount - amount, updated_at: now });
    await settleCaptured(trx, ctx, [keyOf(row)]);
    return chargeEvent(trx, ctx, row, 'charge.captured', now);
  });
}

/**
 * `charges.refund` (v1 §3.1, §4.2): within 180 days of creation. A captured charge is refunded in
 * full (default) or in part, one `refunds` row per refund. An uncaptured charge is cancelled whole:
 * the hold is released, `refunded` and `amount_refunded` show it, and no `refunds` row is written
 * (no captured money moves back).
 */
export async function refundCharge(ctx: Context, caller: Caller, input: unknown): Promise<ChargeObject> {
  const params = readParams(input, ['id', 'amount', 'refund_reason']);
  const chargeId = requireString(params, 'id');
  const requested = optionalInteger(params, 'amount', { min: MIN_REFUND_AMOUNT, max: MAX_CHARGE_AMOUNT, code: 'invalid_refund_amount' });
  const reason = optionalString(params, 'refund_reason', { code: 'invalid_refund_reason' });
  if (reason !== undefined && characterCount(reason) > MAX_REFUND_REASON_LENGTH) {
    reject('invalid_refund_reason', 'refund_reason', `refund_reason must be at most ${MAX_REFUND_REASON_LENGTH} characters`);
  }
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findCharge(trx, caller, chargeId, true);
    const now = ctx.clock.now();
    assertNotPending(current);
    assertPaid(current);
    const net = current.amount - current.amount_refunded;
    if (current.refunded || net <= 0) reject('already_refunded', 'id', `Charge ${chargeId} is already refunded.`);
    // A dispute took back all that was left (src/disputes): the buyer has the money already.
    if ((await disputedAmounts(trx, current.account_id, current.livemode, [current.charge_id])).has(current.charge_id)) {
      reject('already_refunded', 'id', `Charge ${chargeId} is disputed: its amount went back to the buyer by chargeback.`);
    }
    if (now.getTime() > current.created_at.getTime() + REFUND_WINDOW_MS) reject('refund_limit_exceeded', 'id', `Charge ${chargeId} is more than 180 days old.`);
    const refundReason = reason === undefined || reason === '' ? current.refund_reason : reason;
    if (!current.captured) {
      // v1 §3.1: "an uncaptured charge can only be cancelled whole".
      if (requested !== undefined && requested !== current.amount) {
        reject('invalid_amount_to_not_captured', 'amount', `Charge ${chargeId} is not captured; it can only be refunded whole (${current.amount} yen).`);
      }
      if (current.released_at === null) {
        await ctx.processor.release([{ reference: current.charge_id, authorizationCode: current.authorization_code ?? '', amount: current.amount, at: now }]);
      }
      const row = await writeChanges(trx, current, { refunded: true, amount_refunded: current.amount, refund_reason: refundReason, updated_at: now });
      return chargeEvent(trx, ctx, row, 'charge.refunded', now);
    }
    const amount = requested ?? net;
    if (amount > net) reject('refund_amount_gt_net', 'amount', `amount ${amount} is above the ${net} yen left to refund`);
    const amountRefunded = current.amount_refunded + amount;
    const row = await writeChanges(trx, current, { refunded: amountRefunded === current.amount, amount_refunded: amountRefunded, refund_reason: refundReason, updated_at: now });
    const refundId = ctx.ids.next('refund');
    await trx
      .insertInto('refunds')
      .values({ account_id: row.account_id, livemode: row.livemode, refund_id: refundId, charge_id: row.charge_id, amount, reason: reason === undefined || reason === '' ? null : reason, created_at: now })
      .execute();
    await settleRefunds(trx, ctx, [{ accountId: row.account_id, livemode: row.livemode, refundId }]);
    return chargeEvent(trx, ctx, row, 'charge.refunded', now);
  });
}

/**
 * `charges.reauth` (v1 §3.1, §4.2; service rules §2): a new hold on an uncaptured charge, with
 * `expired_at` from the hold table at the reauth instant; the earlier hold is not cancelled.
 * Refused for refunded charges. Every attempt is a `reauthorizations` row; a declined attempt is
 * kept and answered with 402, the charge unchanged.
 */
export async function reauthCharge(ctx: Context, caller: Caller, input: unknown): Promise<ChargeObject> {
  const params = readParams(input, ['id', 'expiry_days']);
  const chargeId = requireString(params, 'id');
  const expiryDays = optionalInteger(params, 'expiry_days', { min: V1_EXPIRY_DAYS.min, max: V1_EXPIRY_DAYS.max, code: 'invalid_expiry_days' });
  const result = await ctx.db.transaction().execute(async (trx): Promise<Declined<ChargeObject>> => {
    const current = await findCharge(trx, caller, chargeId, true);
    const now = ctx.clock.now();
    assertNotPending(current);
    assertPaid(current);
    if (current.refunded) reject('cant_reauth_refunded_charge', 'id', `Charge ${chargeId} was refunded; it cannot be reauthorized.`);
    if (current.captured) reject('already_captured', 'id', `Charge ${chargeId} is captured; only uncaptured charges can be reauthorized.`);
    const [card] = (await renderCharges(trx, [current])).map((c) => c.card);
    const reauthId = ctx.ids.next('reauthorization');
    const [authorization] = await ctx.processor.authorize([
      { reference: reauthId, fingerprint: card!.fingerprint, expMonth: card!.exp_month, expYear: card!.exp_year, amount: current.amount, currency: 'jpy', livemode: caller.livemode, at: now, kind: 'reauth' },
    ]);
    const days = expiryDays ?? V1_EXPIRY_DAYS.default;
    const expiresAt = authorization!.approved ? v1HoldExpiresAt({ authorizedAt: now, expiryDays: days, issuer: current.card_issuer === 'overseas' ? 'overseas' : 'domestic' }).expiresAt : null;
    await trx
      .insertInto('reauthorizations')
      .values({
        account_id: current.account_id,
        livemode: current.livemode,
        reauth_id: reauthId,
        charge_id: current.charge_id,
        scheduled: false,
        amount: current.amount,
        outcome: authorization!.approved ? 'succeeded' : 'failed',
        failure_code: authorization!.approved ? null : authorization!.code,
        failure_message: authorization!.approved ? null : authorization!.message,
        authorization_code: authorization!.approved ? authorization!.authorizationCode : null,
        previous_expired_at: current.expired_at,
        expired_at: expiresAt,
        attempted_at: now,
      })
      .execute();
    if (!authorization!.approved) return { declined: new KessaiError(authorization!.code, { charge: chargeId, message: authorization!.message }) };
    const row = await writeChanges(trx, current, { expired_at: expiresAt, authorized_at: now, authorization_code: authorization!.authorizationCode, expiry_days: days, released_at: null, updated_at: now });
    return { done: await chargeEvent(trx, ctx, row, 'charge.updated', now) };
  });
  return settled(result);
}

/** Why tds_finish or the authentication step refuses a charge that is not waiting for 3-D Secure. */
function notPendingError(row: ChargeRow): never {
  if (row.three_d_secure_status === null) return reject('not_in_three_d_secure_flow', 'id', `Charge ${row.charge_id} was not created with three_d_secure.`);
  if (row.failure_code === 'three_d_secure_expired') return reject('three_d_secure_expired', 'id', `The 3-D Secure window of charge ${row.charge_id} has passed; create the charge again.`);
  return reject('invalid_three_d_secure_state', 'id', `Charge ${row.charge_id} has already been through tds_finish.`);
}

function assertWithinWindow(row: ChargeRow, now: Date): void {
  if (now.getTime() > row.tds_expires_at!.getTime()) reject('three_d_secure_expired', 'id', `The 3-D Secure window of charge ${row.charge_id} has passed; create the charge again.`);
}

/**
 * The buyer's 3-D Secure authentication (v1 §4.3 step 2), as the client library would run it:
 * the issuer's answer becomes `three_d_secure_status` (`verified`, `attempted`, `failed`, `error`).
 * Allowed once, within the 30-minute window.
 */
export async function authenticateCharge(ctx: Context, caller: Caller, input: unknown): Promise<ChargeObject> {
  const params = readParams(input, ['id']);
  const chargeId = requireString(params, 'id');
  return ctx.db.transaction().execute(async (trx) => {
    const current = await findCharge(trx, caller, chargeId, true);
    const now = ctx.clock.now();
    if (!tdsPending(current)) notPendingError(current);
    assertWithinWindow(current, now);
    if (current.three_d_secure_status !== 'unverified') reject('invalid_three_d_secure_state', 'id', `Charge ${chargeId} has already been authenticated (${current.three_d_secure_status}).`);
    const [card] = (await renderCharges(trx, [current])).map((c) => c.card);
    const [outcome] = await ctx.processor.authenticate([{ reference: chargeId, fingerprint: card!.fingerprint, livemode: caller.livemode, at: now }]);
    const row = await writeChanges(trx, current, { three_d_secure_status: outcome!.status, updated_at: now });
    return storedCharge(trx, row);
  });
}

const TDS_FINISH_REFUSALS: Readonly<Record<string, ErrorCode>> = { unverified: 'three_d_secure_incompleted', failed: 'three_d_secure_failed', error: 'three_d_secure_failed' };

/**
 * `charges.tds_finish` (v1 §3.1, §4.3): only from `verified` or `attempted`, within 30 minutes of
 * creation; then processed like a normal create with the `capture` and `expiry_days` asked for at
 * creation, every instant counted from this request. A declined card keeps the failed charge and
 * answers 402.
 */
export async function finishThreeDSecure(ctx: Context, caller: Caller, input: unknown): Promise<ChargeObject> {
  const params = readParams(input, ['id']);
  const chargeId = requireString(params, 'id');
  const result = await ctx.db.transaction().execute(async (trx): Promise<Declined<ChargeObject>> => {
    const current = await findCharge(trx, caller, chargeId, true);
    const now = ctx.clock.now();
    if (!tdsPending(current)) notPendingError(current);
    assertWithinWindow(current, now);
    const status = current.three_d_secure_status ?? 'unverified';
    if (status !== 'verified' && status !== 'attempted') {
      return reject(TDS_FINISH_REFUSALS[status] ?? 'invalid_three_d_secure_state', 'id', `3-D Secure of charge ${chargeId} is ${status}; tds_finish needs verified or attempted.`);
    }
    const capture = current.capture_requested ?? true;
    const [card] = (await renderCharges(trx, [current])).map((c) => c.card);
    const [authorization] = await ctx.processor.authorize([
      {
        reference: chargeId,
        fingerprint: card!.fingerprint,
        expMonth: card!.exp_month,
        expYear: card!.exp_year,
        amount: current.amount,
        currency: 'jpy',
        livemode: caller.livemode,
        at: now,
        kind: capture ? 'charge' : 'hold',
        threeDSecure: status,
      },
    ]);
    const approved = authorization!.approved;
    const issuer: CardIssuer = current.card_issuer === 'overseas' ? 'overseas' : 'domestic';
    const row = await writeChanges(trx, current, {
      paid: approved,
      captured: approved && capture,
      captured_at: approved && capture ? now : null,
      amount_captured: approved && capture ? current.amount : null,
      expired_at: approved && !capture ? v1HoldExpiresAt({ authorizedAt: now, expiryDays: current.expiry_days ?? undefined, issuer }).expiresAt : null,
      failure_code: authorization!.approved ? null : authorization!.code,
      failure_message: authorization!.approved ? null : authorization!.message,
      authorization_code: authorization!.approved ? authorization!.authorizationCode : null,
      authorized_at: approved ? now : null,
      tds_expires_at: null,
      updated_at: now,
    });
    if (row.captured) await settleCaptured(trx, ctx, [keyOf(row)]);
    const charge = await chargeEvent(trx, ctx, row, approved ? 'charge.succeeded' : 'charge.failed', now);
    if (!authorization!.approved) return { declined: new KessaiError(authorization!.code, { charge: chargeId, message: authorization!.message }) };
    return { done: charge };
  });
  return settled(result);
}

export const CHARGE_OPERATIONS = [
  defineOperation('charges.create', createCharge),
  defineOperation('charges.retrieve', retrieveCharge),
  defineOperation('charges.update', updateCharge),
  defineOperation('charges.list', listCharges),
  defineOperation('charges.capture', captureCharge),
  defineOperation('charges.refund', refundCharge),
  defineOperation('charges.reauth', reauthCharge),
  defineOperation('charges.tds_finish', finishThreeDSecure),
  // The buyer's step of v1 §4.3 (in-page, redirect or sub-window flow), run with the public key as the client library would.
  defineOperation('charges.tds_authenticate', authenticateCharge, { keys: 'secret_or_public' }),
] as const;
