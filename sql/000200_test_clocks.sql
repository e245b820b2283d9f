-- Test clocks: a test-mode account's own time for the customers attached to it, and for
-- everything that hangs off those customers. An object is on a clock exactly when its customer is
-- (customers.test_clock_id); webhook deliveries carry the clock of their event's customer, so the
-- delivery job can take a clock's deliveries or leave them without reading the event.
CREATE TABLE test_clocks (
  account_id          text        NOT NULL,
  test_clock_id       text        NOT NULL,
  name                text,
  -- The clock's instant: what every request on the clock's objects sees as now.
  frozen_time         timestamptz NOT NULL,
  -- ready, or advancing to advancing_to (the instant an advance runs the jobs up to).
  status              text        NOT NULL DEFAULT 'ready',
  advancing_to        timestamptz,
  -- The process running the advance, under a lease in real time: a lapsed lease is resumed by
  -- the next caller (advance or resume), exactly once.
  advance_owner       text,
  advance_lease_until timestamptz,
  -- Real time (audit), unlike frozen_time.
  created_at          timestamptz NOT NULL,
  CONSTRAINT test_clocks_pkey PRIMARY KEY (account_id, test_clock_id)
);
ALTER TABLE test_clocks ADD CONSTRAINT test_clocks_status_check CHECK (status IN ('ready', 'advancing'));
ALTER TABLE test_clocks ADD CONSTRAINT test_clocks_advancing_check CHECK ((status = 'advancing') = (advancing_to IS NOT NULL));
CREATE INDEX test_clocks_by_created ON test_clocks (account_id, created_at DESC, test_clock_id DESC);

-- The clock every new test-mode customer of the account is attached to when none is named.
ALTER TABLE accounts ADD COLUMN default_test_clock_id text;

ALTER TABLE customers ADD COLUMN test_clock_id text;
-- The jobs' scope probes this (is a due row's customer on a clock?): empty for a book without clocks.
CREATE INDEX customers_on_test_clock ON customers (account_id, livemode, customer_id, test_clock_id) WHERE test_clock_id IS NOT NULL;

ALTER TABLE webhook_deliveries ADD COLUMN test_clock_id text;
CREATE INDEX webhook_deliveries_due_on_test_clock ON webhook_deliveries (account_id, test_clock_id, next_attempt_at) WHERE status = 'pending' AND test_clock_id IS NOT NULL;
