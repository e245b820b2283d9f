-- Customers, their stored cards, and the single-use card tokens cards are made from (v1 §2.3, §4.4,
-- service rules §2).
--
-- Citus-ready like 000001: account_id leads every primary key and unique constraint. livemode is part
-- of every key too: test and live data of one account are separate worlds (v1 §1), so a chosen
-- customer id taken in test mode is still free in live mode, and no lookup can cross modes.
--
-- No card number is ever stored: a card is its fingerprint (the same for every token of the same
-- number), brand, last4 and expiry. Customers and cards are deleted softly (deleted_at): charges and
-- subscriptions made earlier keep pointing at rows that still exist, and the API treats a deleted
-- row as unknown.

CREATE TABLE tokens (
  account_id   text        NOT NULL,
  livemode     boolean     NOT NULL,
  token_id     text        NOT NULL,
  -- The id the card gets, drawn at token creation so the token's embedded card and the stored card
  -- have the same id.
  card_id      text        NOT NULL,
  fingerprint  text        NOT NULL,
  brand        text        NOT NULL,
  last4        text        NOT NULL,
  exp_month    integer     NOT NULL CHECK (exp_month BETWEEN 1 AND 12),
  exp_year     integer     NOT NULL,
  funding      text        NOT NULL,
  country      text,
  -- domestic / overseas: drives hold periods (service rules §2.1).
  issuer       text        NOT NULL,
  name         text,
  cvc_check    text        NOT NULL,
  created_at   timestamptz NOT NULL,
  -- Set by the one operation that consumed the token; a token is single use (token_already_used).
  used_at      timestamptz,
  PRIMARY KEY (account_id, livemode, token_id)
);

CREATE TABLE customers (
  account_id       text        NOT NULL,
  livemode         boolean     NOT NULL,
  customer_id      text        NOT NULL,
  email            text,
  description      text,
  -- A card of this customer (same account and mode); null when the customer has none chosen.
  default_card_id  text,
  metadata         jsonb       NOT NULL DEFAULT '{}',
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  deleted_at       timestamptz,
  PRIMARY KEY (account_id, livemode, customer_id)
);
-- Lists are newest first with the id as tie-break (v1 §4.1), over live rows only.
CREATE INDEX customers_by_created ON customers (account_id, livemode, created_at DESC, customer_id DESC) WHERE deleted_at IS NULL;

CREATE TABLE cards (
  account_id       text        NOT NULL,
  livemode         boolean     NOT NULL,
  card_id          text        NOT NULL,
  customer_id      text        NOT NULL,
  fingerprint      text        NOT NULL,
  brand            text        NOT NULL,
  last4            text        NOT NULL,
  exp_month        integer     NOT NULL CHECK (exp_month BETWEEN 1 AND 12),
  exp_year         integer     NOT NULL,
  funding          text        NOT NULL,
  country          text,
  issuer           text        NOT NULL,
  name             text,
  address_zip      text,
  address_state    text,
  address_city     text,
  address_line1    text,
  address_line2    text,
  email            text,
  phone            text,
  cvc_check        text        NOT NULL,
  metadata         jsonb       NOT NULL DEFAULT '{}',
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  deleted_at       timestamptz,
  PRIMARY KEY (account_id, livemode, card_id)
);
-- A customer holds one live card per number and expiry (already_have_the_same_card); the operation
-- checks first, this index is the last line of defence against a race.
CREATE UNIQUE INDEX cards_same_card_once ON cards (account_id, livemode, customer_id, fingerprint, exp_month, exp_year) WHERE deleted_at IS NULL;
CREATE INDEX cards_by_customer ON cards (account_id, livemode, customer_id, created_at DESC, card_id DESC) WHERE deleted_at IS NULL;
