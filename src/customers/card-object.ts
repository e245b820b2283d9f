/**
 * The v1 card object (§2.3) from a stored card or a token's card. Fields the engine keeps for
 * itself (funding, issuer) are not part of the v1 object and are left out.
 */
import type { Selectable } from 'kysely';
import type { CardsTable } from '../db/schema';
import { toUnixSeconds } from '../domain/time';

export type CardRow = Selectable<CardsTable>;

// A type alias, not an interface: it must be assignable to the outbox's indexed EventResource.
export type CardObject = {
  readonly id: string;
  readonly object: 'card';
  readonly livemode: boolean;
  readonly created: number;
  readonly customer: string | null;
  readonly brand: string;
  readonly last4: string;
  readonly exp_month: number;
  readonly exp_year: number;
  readonly fingerprint: string;
  readonly name: string | null;
  readonly country: string | null;
  readonly address_zip: string | null;
  readonly address_state: string | null;
  readonly address_city: string | null;
  readonly address_line1: string | null;
  readonly address_line2: string | null;
  readonly address_zip_check: string;
  readonly cvc_check: string;
  readonly three_d_secure_status: string | null;
  readonly email: string | null;
  readonly phone: string | null;
  readonly metadata: Readonly<Record<string, string>>;
};

/** The fields of a card that a token carries too (a token's card has no customer or address yet). */
export type CardCore = Pick<CardRow, 'card_id' | 'livemode' | 'created_at' | 'brand' | 'last4' | 'exp_month' | 'exp_year' | 'fingerprint' | 'name' | 'country' | 'cvc_check'>;

export function renderCard(row: CardCore & Partial<Omit<CardRow, 'customer_id'>> & { readonly customer_id?: string | null }): CardObject {
  return {
    id: row.card_id,
    object: 'card',
    livemode: row.livemode,
    created: toUnixSeconds(row.created_at),
    customer: row.customer_id ?? null,
    brand: row.brand,
    last4: row.last4,
    exp_month: row.exp_month,
    exp_year: row.exp_year,
    fingerprint: row.fingerprint,
    name: row.name,
    country: row.country,
    address_zip: row.address_zip ?? null,
    address_state: row.address_state ?? null,
    address_city: row.address_city ?? null,
    address_line1: row.address_line1 ?? null,
    address_line2: row.address_line2 ?? null,
    // No address verification exists in the simulated network, so the check is never run.
    address_zip_check: 'unchecked',
    cvc_check: row.cvc_check,
    // Set by a finished 3-D Secure request of the card or of the token it was made from.
    three_d_secure_status: row.three_d_secure_status ?? null,
    email: row.email ?? null,
    phone: row.phone ?? null,
    metadata: row.metadata ?? {},
  };
}
