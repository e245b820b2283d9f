-- Refunds as rows of their own, and the captured amount of a charge (service rules §4: a charge
-- belongs to the term in which it is captured, a refund to the term in which it is made).
--
-- `charges.amount_refunded` stays the v1 field; it also counts the part of a hold released by a
-- capture of a smaller amount (v1 §3.1), which was never captured and is not a refund. Settlement
-- therefore reads `amount_captured` (null until captured) for sales and the `refunds` rows, each
-- with its own instant, for refunds.

ALTER TABLE charges ADD COLUMN amount_captured bigint CHECK (amount_captured > 0);
UPDATE charges SET amount_captured = amount WHERE captured;
CREATE INDEX charges_by_captured ON charges (account_id, livemode, captured_at) WHERE captured_at IS NOT NULL;

CREATE TABLE refunds (
  account_id   text        NOT NULL,
  livemode     boolean     NOT NULL,
  refund_id    text        NOT NULL,
  charge_id    text        NOT NULL,
  amount       bigint      NOT NULL CHECK (amount > 0),
  -- v1 `refund_reason`; null for refunds the engine makes itself (a prorated subscription delete).
  reason       text,
  created_at   timestamptz NOT NULL,
  PRIMARY KEY (account_id, livemode, refund_id)
);
CREATE INDEX refunds_by_charge ON refunds (account_id, livemode, charge_id);
CREATE INDEX refunds_by_created ON refunds (account_id, livemode, created_at);
