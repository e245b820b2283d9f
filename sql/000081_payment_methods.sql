-- Issue 16 (engine part): v2 payment methods (official-sdks.md §2 "Payment methods"). A card
-- payment method keeps what the simulated network answered for the card (fingerprint, brand,
-- expiry, funding, issuer), never the number. One made for a v1 card (lookup by card id) names
-- that card, at most once per card.

CREATE TABLE payment_methods (
  account_id         text        NOT NULL,
  livemode           boolean     NOT NULL,
  payment_method_id  text        NOT NULL,
  type               text        NOT NULL,
  customer_id        text,
  card_id            text,
  fingerprint        text,
  brand              text,
  last4              text,
  exp_month          integer,
  exp_year           integer,
  funding            text,
  country            text,
  issuer             text,
  billing_details    jsonb       NOT NULL DEFAULT '{}',
  metadata           jsonb       NOT NULL DEFAULT '{}',
  detached_at        timestamptz,
  created_at         timestamptz NOT NULL,
  updated_at         timestamptz NOT NULL
);
ALTER TABLE payment_methods ADD CONSTRAINT payment_methods_pkey PRIMARY KEY (account_id, livemode, payment_method_id);
ALTER TABLE payment_methods ADD CONSTRAINT payment_methods_type_known CHECK (type IN ('card', 'paypay', 'apple_pay'));
CREATE UNIQUE INDEX payment_methods_one_per_card ON payment_methods (account_id, livemode, card_id) WHERE card_id IS NOT NULL;
CREATE INDEX payment_methods_by_created ON payment_methods (account_id, livemode, created_at DESC, payment_method_id DESC);
CREATE INDEX payment_methods_by_customer ON payment_methods (account_id, livemode, customer_id) WHERE customer_id IS NOT NULL;

-- A customer's default payment method (v2 customers.update `default_payment_method_id`), beside
-- the v1 default card.
ALTER TABLE customers ADD COLUMN default_payment_method_id text;
