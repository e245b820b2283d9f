-- Statements that do not come from payments (v1 §2.6, service rules §4): a merchant account's own
-- paid plan of the service, billed monthly into a `service_fee` statement, and operator adjustments
-- that become a `misc` statement. Both are summed by the term close like charges and refunds.
--
-- Citus-ready: (account_id, livemode, …) leads every key; named constraints, one per statement.

-- The account's paid plan, effective-dated: the row with the latest effective_from at or before a
-- month's start decides that month's fee (a monthly_fee of 0 ends the paid plan). A change is a new
-- row, so a fee raised from April leaves March's billing as it was. next_bill_at: the next month
-- start this row bills (00:00 JST on the 1st), null once a later row took over or the fee is 0.
CREATE TABLE account_service_plans (
  account_id      text        NOT NULL,
  livemode        boolean     NOT NULL,
  effective_from  timestamptz NOT NULL,
  subject         text        NOT NULL,
  monthly_fee     bigint      NOT NULL,
  next_bill_at    timestamptz,
  created_at      timestamptz NOT NULL,
  CONSTRAINT account_service_plans_pkey PRIMARY KEY (account_id, livemode, effective_from)
);
ALTER TABLE account_service_plans ADD CONSTRAINT account_service_plans_subject_known CHECK (subject IN ('proplan', 'plan_fee'));
ALTER TABLE account_service_plans ADD CONSTRAINT account_service_plans_fee_range CHECK (monthly_fee >= 0 AND monthly_fee <= 9999999);
-- The billing job's due index, leading with account_id like every due index (000041).
CREATE INDEX account_service_plans_due ON account_service_plans (account_id, next_bill_at) WHERE next_bill_at IS NOT NULL;

-- One billed plan fee per account, mode and month (`service_fees.bill`): the natural key is the
-- job's last line of defence against billing a month twice. term_id: the term it is settled in.
CREATE TABLE service_fee_charges (
  account_id    text        NOT NULL,
  livemode      boolean     NOT NULL,
  period_start  timestamptz NOT NULL,
  subject       text        NOT NULL,
  amount        bigint      NOT NULL,
  term_id       text        NOT NULL,
  created_at    timestamptz NOT NULL,
  CONSTRAINT service_fee_charges_pkey PRIMARY KEY (account_id, livemode, period_start)
);
ALTER TABLE service_fee_charges ADD CONSTRAINT service_fee_charges_subject_known CHECK (subject IN ('proplan', 'plan_fee'));
ALTER TABLE service_fee_charges ADD CONSTRAINT service_fee_charges_amount_positive CHECK (amount > 0);
CREATE INDEX service_fee_charges_by_term ON service_fee_charges (account_id, livemode, term_id);

-- Operator adjustments: positive = paid to the owner, negative = billed, each with its reason.
-- request_key: the operator's idempotency key, so a retried request books once.
CREATE TABLE adjustments (
  account_id     text        NOT NULL,
  livemode       boolean     NOT NULL,
  adjustment_id  text        NOT NULL,
  owner          text        NOT NULL,
  owner_ref      text        NOT NULL,
  tenant_id      text,
  subject        text        NOT NULL,
  amount         bigint      NOT NULL,
  reason         text        NOT NULL,
  request_key    text,
  term_id        text        NOT NULL,
  created_at     timestamptz NOT NULL,
  CONSTRAINT adjustments_pkey PRIMARY KEY (account_id, livemode, adjustment_id)
);
ALTER TABLE adjustments ADD CONSTRAINT adjustments_owner_known CHECK (owner IN ('merchant', 'tenant', 'platform'));
ALTER TABLE adjustments ADD CONSTRAINT adjustments_subject_known CHECK (subject IN ('reallocation', 'other'));
ALTER TABLE adjustments ADD CONSTRAINT adjustments_amount_not_zero CHECK (amount <> 0);
ALTER TABLE adjustments ADD CONSTRAINT adjustments_reason_length CHECK (char_length(reason) BETWEEN 1 AND 500);
CREATE UNIQUE INDEX adjustments_by_request_key ON adjustments (account_id, livemode, request_key) WHERE request_key IS NOT NULL;
CREATE INDEX adjustments_by_term ON adjustments (account_id, livemode, term_id);
CREATE INDEX adjustments_by_created ON adjustments (account_id, livemode, created_at DESC, adjustment_id DESC);
