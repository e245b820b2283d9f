-- v2 payment flows, prices, checkout sessions and payment method configurations (v2 §2–§4,
-- service rules §3), and the link from captured flows to `charges`, through which settlement sees
-- their money (service rules §4: a charge belongs to the term in which it is captured).
--
-- Citus-ready like the earlier files: (account_id, livemode, <id>) is every primary key, no
-- foreign keys. Instants are business instants (bound from the engine's clock), never now().

CREATE TABLE payment_flows (
  account_id                      text        NOT NULL,
  livemode                        boolean     NOT NULL,
  payment_flow_id                 text        NOT NULL,
  status                          text        NOT NULL CHECK (status IN ('requires_payment_method', 'requires_confirmation', 'requires_action',
                                                                        'processing', 'requires_capture', 'canceled', 'succeeded')),
  amount                          bigint      NOT NULL CHECK (amount > 0),
  currency                        text        NOT NULL DEFAULT 'jpy',
  capture_method                  text        NOT NULL CHECK (capture_method IN ('automatic', 'manual')),
  -- JSON array of method identifiers (card, paypay, apple_pay), in the order the merchant gave.
  payment_method_types            jsonb       NOT NULL,
  -- payment_method_options.card.request_extended_authorization: must_extend, if_available or null.
  request_extended_authorization  text        CHECK (request_extended_authorization IN ('must_extend', 'if_available')),
  client_secret                   text        NOT NULL,
  customer_id                     text,
  description                     text,
  -- The payment method attached (a token or a customer card, or a wallet), and what the network
  -- needs to know of it: the card fields are copied so that capture and release need no join.
  payment_method_type             text        CHECK (payment_method_type IN ('card', 'paypay', 'apple_pay')),
  payment_method_id               text,
  card_id                         text,
  card_fingerprint                text,
  card_brand                      text,
  card_last4                      text,
  card_exp_month                  integer,
  card_exp_year                   integer,
  card_funding                    text,
  card_issuer                     text,
  -- The approved authorization (hold): its code, when it was taken, whether it was extended, and
  -- the instant it lapses (service rules §2.1). capture_before is null unless a hold exists.
  authorization_code              text,
  authorized_at                   timestamptz,
  extended_authorization          boolean     NOT NULL DEFAULT false,
  capture_before                  timestamptz,
  amount_received                 bigint      NOT NULL DEFAULT 0 CHECK (amount_received >= 0),
  amount_capturable               bigint      NOT NULL DEFAULT 0 CHECK (amount_capturable >= 0),
  -- Captures made so far: at most one partial capture, then the full remainder (v2 §3, §8).
  capture_count                   integer     NOT NULL DEFAULT 0 CHECK (capture_count BETWEEN 0 AND 2),
  three_d_secure_status           text,
  next_action                     jsonb,
  last_payment_error              jsonb,
  cancellation_reason             text,
  canceled_at                     timestamptz,
  checkout_session_id             text,
  metadata                        jsonb       NOT NULL DEFAULT '{}',
  created_at                      timestamptz NOT NULL,
  updated_at                      timestamptz NOT NULL,
  PRIMARY KEY (account_id, livemode, payment_flow_id),
  CHECK (amount_received + amount_capturable <= amount)
);
-- The hold-expiry job's due work: (state, due instant).
CREATE INDEX payment_flows_hold_due ON payment_flows (capture_before, account_id, livemode, payment_flow_id) WHERE status = 'requires_capture';
-- v2 lists: newest first, the id breaking ties.
CREATE INDEX payment_flows_by_created ON payment_flows (account_id, livemode, created_at DESC, payment_flow_id DESC);
CREATE INDEX payment_flows_by_session ON payment_flows (account_id, livemode, checkout_session_id) WHERE checkout_session_id IS NOT NULL;

CREATE TABLE prices (
  account_id   text        NOT NULL,
  livemode     boolean     NOT NULL,
  price_id     text        NOT NULL,
  unit_amount  bigint      NOT NULL CHECK (unit_amount > 0),
  currency     text        NOT NULL DEFAULT 'jpy',
  active       boolean     NOT NULL DEFAULT true,
  metadata     jsonb       NOT NULL DEFAULT '{}',
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL,
  PRIMARY KEY (account_id, livemode, price_id)
);

CREATE TABLE checkout_sessions (
  account_id             text        NOT NULL,
  livemode               boolean     NOT NULL,
  checkout_session_id    text        NOT NULL,
  -- open → complete or expired (service rules §3).
  status                 text        NOT NULL CHECK (status IN ('open', 'complete', 'expired')),
  mode                   text        NOT NULL CHECK (mode IN ('payment')),
  currency               text        NOT NULL DEFAULT 'jpy',
  amount_total           bigint      NOT NULL CHECK (amount_total > 0),
  payment_method_types   jsonb       NOT NULL,
  capture_method         text        NOT NULL DEFAULT 'automatic' CHECK (capture_method IN ('automatic', 'manual')),
  success_url            text        NOT NULL,
  cancel_url             text,
  customer_id            text,
  metadata               jsonb       NOT NULL DEFAULT '{}',
  -- payment_flow_data.metadata / setup_flow_data.metadata: become the metadata of the flow the
  -- session creates (v2 §2.6 rule 6).
  payment_flow_metadata  jsonb       NOT NULL DEFAULT '{}',
  setup_flow_metadata    jsonb       NOT NULL DEFAULT '{}',
  payment_flow_id        text,
  expires_at             timestamptz NOT NULL,
  completed_at           timestamptz,
  expired_at             timestamptz,
  created_at             timestamptz NOT NULL,
  updated_at             timestamptz NOT NULL,
  PRIMARY KEY (account_id, livemode, checkout_session_id)
);
-- The session-expiry job's due work: (state, due instant).
CREATE INDEX checkout_sessions_expiry_due ON checkout_sessions (expires_at, account_id, livemode, checkout_session_id) WHERE status = 'open';

CREATE TABLE checkout_session_line_items (
  account_id           text    NOT NULL,
  livemode             boolean NOT NULL,
  checkout_session_id  text    NOT NULL,
  position             integer NOT NULL,
  price_id             text    NOT NULL,
  quantity             integer NOT NULL CHECK (quantity > 0),
  -- The price's amount when the session was created: a later price change does not reprice it.
  unit_amount          bigint  NOT NULL,
  amount_total         bigint  NOT NULL,
  PRIMARY KEY (account_id, livemode, checkout_session_id, position)
);

-- Which payment methods appear on the payment screen (v2 §2.4, §4.5). One default configuration
-- per account and mode: test and live are separate (rule 6). The stored preferences are what the
-- merchant sets; the capability columns are what the account may use (rule 3), set by the service.
CREATE TABLE payment_method_configurations (
  account_id             text        NOT NULL,
  livemode               boolean     NOT NULL,
  configuration_id       text        NOT NULL,
  name                   text        NOT NULL,
  active                 boolean     NOT NULL DEFAULT true,
  is_default             boolean     NOT NULL DEFAULT true,
  card_preference        text        NOT NULL DEFAULT 'none' CHECK (card_preference IN ('on', 'off', 'none')),
  paypay_preference      text        NOT NULL DEFAULT 'none' CHECK (paypay_preference IN ('on', 'off', 'none')),
  apple_pay_preference   text        NOT NULL DEFAULT 'none' CHECK (apple_pay_preference IN ('on', 'off', 'none')),
  -- Card brands the account is able to accept (JSON array of v1 brand names).
  usable_card_brands     jsonb       NOT NULL,
  paypay_usable          boolean     NOT NULL DEFAULT false,
  created_at             timestamptz NOT NULL,
  updated_at             timestamptz NOT NULL,
  PRIMARY KEY (account_id, livemode, configuration_id)
);
CREATE UNIQUE INDEX payment_method_configurations_one_default ON payment_method_configurations (account_id, livemode) WHERE is_default;

-- Captured flow money as charge rows (one per capture), so settlement sees v2 sales like v1 ones.
-- (flow, capture number) is the natural key: a capture is written once, whatever retries.
ALTER TABLE charges ADD COLUMN payment_flow_id text;
ALTER TABLE charges ADD COLUMN payment_flow_capture smallint;
CREATE UNIQUE INDEX charges_payment_flow_capture_once ON charges (account_id, livemode, payment_flow_id, payment_flow_capture) WHERE payment_flow_id IS NOT NULL;
