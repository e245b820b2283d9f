-- Issue 16: disputes (chargebacks). A test card of the simulated network (src/processor/test-cards.ts)
-- has its captured charges disputed a set number of days after the capture: settlement writes that
-- instant on the charge when it settles the capture (`dispute_due_at`), and the `disputes.open`
-- job opens the dispute at it, exactly once per charge, clearing `dispute_due_at` in the same
-- transaction. A dispute is booked like a refund of what was still captured: it belongs to the
-- term in which it is opened, with the fee and platform fee it gives back (service rules §4
-- `chargeback`, `chargeback_fee_offset`, `chargeback_platform_fee_offset`).
--
-- Citus-ready: (account_id, livemode, …) leads every key; named constraints, one per statement.

ALTER TABLE charges ADD COLUMN dispute_due_at timestamptz;
-- The job's due index, leading with account_id like every due index (000041); tiny: only charges
-- of disputed cards whose dispute is not open yet are in it.
CREATE INDEX charges_dispute_due ON charges (account_id, dispute_due_at, livemode, charge_id) WHERE dispute_due_at IS NOT NULL;

CREATE TABLE disputes (
  account_id                      text        NOT NULL,
  livemode                        boolean     NOT NULL,
  dispute_id                      text        NOT NULL,
  charge_id                       text        NOT NULL,
  payment_flow_id                 text,
  amount                          bigint      NOT NULL,
  status                          text        NOT NULL,
  reason                          text,
  due_by                          timestamptz,
  metadata                        jsonb       NOT NULL DEFAULT '{}',
  tenant_id                       text,
  payjp_fee_included              boolean     NOT NULL,
  chargeback_fee_offset           bigint      NOT NULL,
  chargeback_platform_fee_offset  bigint      NOT NULL,
  term_id                         text        NOT NULL,
  created_at                      timestamptz NOT NULL,
  updated_at                      timestamptz NOT NULL
);
ALTER TABLE disputes ADD CONSTRAINT disputes_pkey PRIMARY KEY (account_id, livemode, dispute_id);
-- One dispute per charge: the job's last line of defence against opening one twice.
ALTER TABLE disputes ADD CONSTRAINT disputes_one_per_charge UNIQUE (account_id, livemode, charge_id);
ALTER TABLE disputes ADD CONSTRAINT disputes_amount_positive CHECK (amount > 0);
ALTER TABLE disputes ADD CONSTRAINT disputes_status_known CHECK (status IN ('pre_warning_needs_response', 'warning_needs_response', 'warning_needs_refund', 'warning_under_review', 'needs_response', 'under_review', 'lost', 'cancel'));
ALTER TABLE disputes ADD CONSTRAINT disputes_offsets_not_negative CHECK (chargeback_fee_offset >= 0 AND chargeback_platform_fee_offset >= 0);
-- v2 lists newest first (all, or a flow's); the term close's aggregation by term.
CREATE INDEX disputes_by_created ON disputes (account_id, livemode, created_at DESC, dispute_id DESC);
CREATE INDEX disputes_by_flow ON disputes (account_id, livemode, payment_flow_id, created_at DESC, dispute_id DESC) WHERE payment_flow_id IS NOT NULL;
CREATE INDEX disputes_by_term ON disputes (account_id, livemode, term_id);
