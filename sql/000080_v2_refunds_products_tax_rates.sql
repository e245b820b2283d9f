-- Issue 16 (engine part): v2 payment refunds, products and tax rates, and the product a price
-- belongs to.
--
-- A v2 refund (`payment_refunds`) is the merchant's object; the money it returns is written as
-- rows of `refunds` against the flow's capture rows in `charges` (one row per capture it draws on),
-- so settlement books v2 refunds exactly like v1 ones (service rules §4: a refund belongs to the
-- term in which it is made). `refunds.payment_refund_id` links them.
--
-- Citus-ready like the earlier files: (account_id, livemode, <id>) leads every key; named
-- constraints, one per statement.

CREATE TABLE payment_refunds (
  account_id         text        NOT NULL,
  livemode           boolean     NOT NULL,
  payment_refund_id  text        NOT NULL,
  payment_flow_id    text        NOT NULL,
  amount             bigint      NOT NULL,
  status             text        NOT NULL,
  reason             text,
  metadata           jsonb       NOT NULL DEFAULT '{}',
  created_at         timestamptz NOT NULL,
  updated_at         timestamptz NOT NULL
);
ALTER TABLE payment_refunds ADD CONSTRAINT payment_refunds_pkey PRIMARY KEY (account_id, livemode, payment_refund_id);
ALTER TABLE payment_refunds ADD CONSTRAINT payment_refunds_amount_positive CHECK (amount > 0);
ALTER TABLE payment_refunds ADD CONSTRAINT payment_refunds_status_known CHECK (status IN ('succeeded', 'failed', 'pending', 'canceled', 'requires_action'));
ALTER TABLE payment_refunds ADD CONSTRAINT payment_refunds_reason_known CHECK (reason IN ('duplicate', 'fraudulent', 'requested_by_customer'));
-- A flow's refunds (the sum already refunded, payment_flows.refunds), and v2 lists newest first.
CREATE INDEX payment_refunds_by_flow ON payment_refunds (account_id, livemode, payment_flow_id, created_at DESC, payment_refund_id DESC);
CREATE INDEX payment_refunds_by_created ON payment_refunds (account_id, livemode, created_at DESC, payment_refund_id DESC);

ALTER TABLE refunds ADD COLUMN payment_refund_id text;

CREATE TABLE products (
  account_id        text        NOT NULL,
  livemode          boolean     NOT NULL,
  product_id        text        NOT NULL,
  name              text        NOT NULL,
  active            boolean     NOT NULL DEFAULT true,
  description       text,
  unit_label        text,
  url               text,
  default_price_id  text,
  metadata          jsonb       NOT NULL DEFAULT '{}',
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL
);
ALTER TABLE products ADD CONSTRAINT products_pkey PRIMARY KEY (account_id, livemode, product_id);
CREATE INDEX products_by_created ON products (account_id, livemode, created_at DESC, product_id DESC);

-- Prices created before this migration belong to no product (checkout used them bare).
ALTER TABLE prices ADD COLUMN product_id text;
ALTER TABLE prices ADD COLUMN nickname text;
ALTER TABLE prices ADD COLUMN lookup_key text;
CREATE INDEX prices_by_product ON prices (account_id, livemode, product_id) WHERE product_id IS NOT NULL;
CREATE INDEX prices_by_created ON prices (account_id, livemode, created_at DESC, price_id DESC);

CREATE TABLE tax_rates (
  account_id    text         NOT NULL,
  livemode      boolean      NOT NULL,
  tax_rate_id   text         NOT NULL,
  display_name  text         NOT NULL,
  percentage    numeric(6,4) NOT NULL,
  inclusive     boolean      NOT NULL,
  active        boolean      NOT NULL DEFAULT true,
  country       text,
  description   text,
  metadata      jsonb        NOT NULL DEFAULT '{}',
  created_at    timestamptz  NOT NULL,
  updated_at    timestamptz  NOT NULL
);
ALTER TABLE tax_rates ADD CONSTRAINT tax_rates_pkey PRIMARY KEY (account_id, livemode, tax_rate_id);
ALTER TABLE tax_rates ADD CONSTRAINT tax_rates_percentage_range CHECK (percentage >= 0 AND percentage <= 100);
CREATE INDEX tax_rates_by_created ON tax_rates (account_id, livemode, created_at DESC, tax_rate_id DESC);
