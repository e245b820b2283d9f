-- Issue 16: v2 setup flows (official-sdks.md §2 "Setup flows", v2 §6.1 setup_flow.* events): a
-- card saved for later without a payment. The card itself lives in payment_methods; a flow names
-- the payment method it was confirmed with. `processing` is the claim a confirmation holds while
-- the card network verifies the card outside any transaction (no row lock across network I/O).

CREATE TABLE setup_flows (
  account_id            text        NOT NULL,
  livemode              boolean     NOT NULL,
  setup_flow_id         text        NOT NULL,
  status                text        NOT NULL,
  usage                 text        NOT NULL,
  payment_method_types  jsonb       NOT NULL,
  client_secret         text        NOT NULL,
  customer_id           text,
  description           text,
  payment_method_id     text,
  three_d_secure_status text,
  next_action           jsonb,
  last_setup_error      jsonb,
  return_url            text,
  cancellation_reason   text,
  canceled_at           timestamptz,
  checkout_session_id   text,
  metadata              jsonb       NOT NULL DEFAULT '{}',
  created_at            timestamptz NOT NULL,
  updated_at            timestamptz NOT NULL
);
ALTER TABLE setup_flows ADD CONSTRAINT setup_flows_pkey PRIMARY KEY (account_id, livemode, setup_flow_id);
ALTER TABLE setup_flows ADD CONSTRAINT setup_flows_status_known CHECK (status IN ('requires_payment_method', 'requires_confirmation', 'requires_action', 'processing', 'canceled', 'succeeded'));
ALTER TABLE setup_flows ADD CONSTRAINT setup_flows_usage_known CHECK (usage IN ('on_session', 'off_session'));
ALTER TABLE setup_flows ADD CONSTRAINT setup_flows_cancellation_reason_known CHECK (cancellation_reason IN ('abandoned', 'duplicate', 'requested_by_customer'));
CREATE INDEX setup_flows_by_created ON setup_flows (account_id, livemode, created_at DESC, setup_flow_id DESC);


-- Checkout sessions in mode `setup` (no line items, nothing to pay) create a setup flow with
-- `setup_flow_data.metadata` as its metadata (v2 §2.6 rule 6). 000006's unnamed CHECKs on mode and
-- amount_total (PostgreSQL named them <table>_<column>_check) give way to named ones.
ALTER TABLE checkout_sessions ADD COLUMN setup_flow_id text;
ALTER TABLE checkout_sessions DROP CONSTRAINT checkout_sessions_mode_check;
ALTER TABLE checkout_sessions ADD CONSTRAINT checkout_sessions_mode_known CHECK (mode IN ('payment', 'setup'));
ALTER TABLE checkout_sessions DROP CONSTRAINT checkout_sessions_amount_total_check;
ALTER TABLE checkout_sessions ADD CONSTRAINT checkout_sessions_amount_by_mode CHECK ((mode = 'payment' AND amount_total > 0) OR (mode = 'setup' AND amount_total = 0));
CREATE INDEX setup_flows_by_session ON setup_flows (account_id, livemode, checkout_session_id) WHERE checkout_session_id IS NOT NULL;
