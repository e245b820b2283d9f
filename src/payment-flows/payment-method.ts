/**
 * The payment method a flow is confirmed with (v2 §4.8): a card token (`tok_`, single use, as the
 * embedded widget or the hosted page produce), a card the flow's customer holds (`car_`), an Apple
 * Pay token (a card token whose type is `apple_pay`), or PayPay (a wallet: no card involved).
 *
 * What is resolved is a snapshot of the card fields a hold needs (fingerprint, expiry, funding,
 * issuer), copied onto the flow so capture, release and the expiry job need no join.
 */
import type { Kysely } from 'kysely';
import type { Caller } from '../accounts/accounts';
import { requireCustomerCard } from '../customers/cards';
import { consumeToken } from '../customers/tokens';
import type { PaymentMethodType } from '../db/column-types';
import type { Database } from '../db/schema';
import { reject } from '../domain/errors';
import type { CardIssuer } from '../domain/hold-periods';
import { findTestCardByFingerprint } from '../processor/test-cards';

export const PAYMENT_METHOD_TYPES = ['card', 'paypay', 'apple_pay'] as const satisfies readonly PaymentMethodType[];

export interface PaymentMethodSnapshot {
  readonly type: PaymentMethodType;
  /** The id the merchant or browser named (`tok_…`, `car_…`), or `paypay` for the wallet. */
  readonly id: string;
  readonly card: {
    readonly cardId: string;
    readonly fingerprint: string;
    readonly brand: string;
    readonly last4: string;
    readonly expMonth: number;
    readonly expYear: number;
    readonly funding: string;
    readonly issuer: CardIssuer;
  } | null;
}

/** The id PayPay payments carry where a card id would go (PayPay has no card). */
export const PAYPAY_METHOD_ID = 'paypay';

export function isPaymentMethodType(value: unknown): value is PaymentMethodType {
  return typeof value === 'string' && (PAYMENT_METHOD_TYPES as readonly string[]).includes(value);
}

function issuerOf(value: string): CardIssuer {
  return value === 'overseas' ? 'overseas' : 'domestic';
}

/**
 * Resolves `payment_method` (+ `payment_method_type`, default `card`; a `pm_` object has its own type) inside the caller's
 * transaction. A token is consumed here, so a refusal later in the same operation rolls its use
 * back. A card id must belong to the flow's customer (`dont_has_this_card` otherwise, or
 * `missing_param` on `customer` when the flow has none).
 */
export async function resolvePaymentMethod(
  trx: Kysely<Database>,
  caller: Caller,
  input: { readonly type: PaymentMethodType; readonly id: string | undefined; readonly customerId: string | null; readonly at: Date },
): Promise<PaymentMethodSnapshot> {
  const { type, id, customerId, at } = input;
  if (type === 'paypay') {
    if (id !== undefined && id !== PAYPAY_METHOD_ID) reject('no_allowed_param', 'payment_method', 'a PayPay payment names no payment method id');
    return { type, id: PAYPAY_METHOD_ID, card: null };
  }
  // kessai has no live wallet: Apple Pay is simulated in test mode only (v1 §7 `apple_pay_disabled_in_livemode`).
  if (type === 'apple_pay' && caller.livemode) return reject('apple_pay_disabled_in_livemode', 'payment_method_type', 'Apple Pay payments are not available in live mode');
  if (id === undefined) return reject('missing_param', 'payment_method', `payment_method is required for ${type}`);
  if (id.startsWith(PAYMENT_METHOD_PREFIX)) return paymentMethodSnapshot(trx, caller, id, customerId);
  if (id.startsWith('tok_')) {
    const token = await consumeToken(trx, caller, id, 'payment_method', at);
    return {
      type,
      id,
      card: {
        cardId: token.card_id,
        fingerprint: token.fingerprint,
        brand: token.brand,
        last4: token.last4,
        expMonth: token.exp_month,
        expYear: token.exp_year,
        funding: token.funding,
        issuer: issuerOf(token.issuer),
      },
    };
  }
  // An Apple Pay payment is made with the wallet's token (a `tok_` of this account); anything else is no wallet token.
  if (type === 'apple_pay') return reject('invalid_apple_pay_token', 'payment_method', 'an Apple Pay payment is made with its wallet token (tok_)');
  if (customerId === null) return reject('missing_param', 'customer', 'a stored card can pay only a payment flow that names its customer');
  const card = await requireCustomerCard(trx, caller, customerId, id, 'payment_method');
  return {
    type,
    id,
    card: {
      cardId: card.card_id,
      fingerprint: card.fingerprint,
      brand: card.brand,
      last4: card.last4,
      expMonth: card.exp_month,
      expYear: card.exp_year,
      funding: card.funding,
      issuer: issuerOf(card.issuer),
    },
  };
}

/** The id prefix of v2 payment method objects (src/payment-methods). */
export const PAYMENT_METHOD_PREFIX = 'pm_';

/**
 * A v2 payment method object (`pm_`, official-sdks.md §5 point 9: the SDK's server-side way to
 * confirm), whatever `payment_method_type` said: its own type decides. A detached method is spent
 * (`detached_payment_method_not_usable`); a method attached to a customer pays only that
 * customer's flows (`payment_method_not_owned_by_customer`); an unattached one pays any flow.
 */
async function paymentMethodSnapshot(trx: Kysely<Database>, caller: Caller, id: string, customerId: string | null): Promise<PaymentMethodSnapshot> {
  const row = await trx.selectFrom('payment_methods').selectAll().where('account_id', '=', caller.accountId).where('livemode', '=', caller.livemode).where('payment_method_id', '=', id).executeTakeFirst();
  if (!row) return reject('invalid_id', 'payment_method', `No such payment method: ${id}`);
  if (row.detached_at !== null) return reject('detached_payment_method_not_usable', 'payment_method', `payment method ${id} was detached and cannot pay`);
  if (row.customer_id !== null && row.customer_id !== customerId) {
    return reject('payment_method_not_owned_by_customer', 'payment_method', `payment method ${id} belongs to another customer than this payment flow's`);
  }
  if (row.type === 'paypay') return { type: 'paypay', id: PAYPAY_METHOD_ID, card: null };
  if (row.fingerprint === null) return reject('invalid_id', 'payment_method', `payment method ${id} has no card`);
  // The method's card columns read as a flow's stored snapshot: one reading of card columns.
  return storedPaymentMethod({
    payment_method_type: row.type,
    payment_method_id: id,
    card_id: row.card_id,
    card_fingerprint: row.fingerprint,
    card_brand: row.brand,
    card_last4: row.last4,
    card_exp_month: row.exp_month,
    card_exp_year: row.exp_year,
    card_funding: row.funding,
    card_issuer: row.issuer,
  })!;
}

/**
 * Whether the issuer asks the buyer to authenticate with 3-D Secure before a customer-present
 * payment. The simulated network is the only network, and its test-card table says which cards
 * challenge the buyer: every card whose 3-D Secure behaviour is not `not_required` (service rules
 * §2.2). Apple Pay authenticates on the device (v2 §4.8 step 3), so it never needs the action.
 */
export function needsThreeDSecure(snapshot: PaymentMethodSnapshot): boolean {
  if (snapshot.type !== 'card' || snapshot.card === null) return false;
  return cardNeedsThreeDSecure(snapshot.card.fingerprint);
}

/** Whether the issuer of the card with this fingerprint asks for 3-D Secure (the test card decides). */
export function cardNeedsThreeDSecure(fingerprint: string): boolean {
  const card = findTestCardByFingerprint(fingerprint);
  return card !== undefined && card.threeDSecure !== 'not_required';
}

/** The snapshot's columns on the payment_flows row. */
export function paymentMethodColumns(snapshot: PaymentMethodSnapshot | null) {
  const card = snapshot?.card ?? null;
  return {
    payment_method_type: snapshot?.type ?? null,
    payment_method_id: snapshot?.id ?? null,
    card_id: card?.cardId ?? null,
    card_fingerprint: card?.fingerprint ?? null,
    card_brand: card?.brand ?? null,
    card_last4: card?.last4 ?? null,
    card_exp_month: card?.expMonth ?? null,
    card_exp_year: card?.expYear ?? null,
    card_funding: card?.funding ?? null,
    card_issuer: card?.issuer ?? null,
  };
}

/** The snapshot stored on a flow row, or null when none is attached. */
export function storedPaymentMethod(row: {
  readonly payment_method_type: PaymentMethodType | null;
  readonly payment_method_id: string | null;
  readonly card_id: string | null;
  readonly card_fingerprint: string | null;
  readonly card_brand: string | null;
  readonly card_last4: string | null;
  readonly card_exp_month: number | null;
  readonly card_exp_year: number | null;
  readonly card_funding: string | null;
  readonly card_issuer: string | null;
}): PaymentMethodSnapshot | null {
  if (row.payment_method_type === null || row.payment_method_id === null) return null;
  const card =
    row.card_fingerprint === null
      ? null
      : {
          cardId: row.card_id ?? row.payment_method_id,
          fingerprint: row.card_fingerprint,
          brand: row.card_brand ?? '',
          last4: row.card_last4 ?? '',
          expMonth: row.card_exp_month ?? 1,
          expYear: row.card_exp_year ?? 1970,
          funding: row.card_funding ?? 'unknown',
          issuer: issuerOf(row.card_issuer ?? 'domestic'),
        };
  return { type: row.payment_method_type, id: row.payment_method_id, card };
}
