-- The operator API and console (`kessai serve` /admin, /console): every change an operator makes
-- is recorded with who made it (the operator token's name) and when. Engine-wide like the run
-- ledger (no account_id column: on Citus it stays local on the coordinator); `account_id` names
-- the account a change concerns, when it concerns one. Never a secret in `detail`: a new key or
-- endpoint token is shown once to the operator and never stored here.
CREATE TABLE operator_audit (
  audit_id    bigint      GENERATED ALWAYS AS IDENTITY,
  at          timestamptz NOT NULL,
  operator    text        NOT NULL,
  action      text        NOT NULL,
  account     text,
  target      text,
  detail      jsonb       NOT NULL DEFAULT '{}'::jsonb,
  CONSTRAINT operator_audit_pkey PRIMARY KEY (audit_id)
);
CREATE INDEX operator_audit_at ON operator_audit (at);

-- A re-send of a given-up webhook delivery: one new attempt of the same event to the same
-- endpoint, recorded as such. One row per re-send request, keyed by the request's key (its
-- Idempotency-Key, or the attempt count the operator saw given up), so a retried request re-sends
-- nothing more. `attempt` is the attempt number the re-send made (webhook_attempts.attempt).
CREATE TABLE webhook_resends (
  account_id   text        NOT NULL,
  endpoint_id  text        NOT NULL,
  event_id     text        NOT NULL,
  request_key  text        NOT NULL,
  attempt      integer     NOT NULL,
  operator     text        NOT NULL,
  requested_at timestamptz NOT NULL,
  CONSTRAINT webhook_resends_pkey PRIMARY KEY (account_id, endpoint_id, event_id, request_key)
);
ALTER TABLE webhook_resends ADD CONSTRAINT webhook_resends_attempt_positive CHECK (attempt > 0);

-- The given-up deliveries of an endpoint (the console's list, the re-send of all of them, the
-- metrics' count): a partial index, as the due index is for pending ones.
CREATE INDEX webhook_deliveries_given_up ON webhook_deliveries (account_id, endpoint_id) WHERE status = 'failed';
