-- Idempotency keys (issue 15, point 7): a POST sent with an `Idempotency-Key` header reserves the
-- key here first ('pending', committed before the work starts), then stores the response it gave
-- ('done'). A retry within 24 hours gets the stored response; the same key with another request
-- (hash of method, path and body) is refused. Per account and mode, like every account table.
CREATE TABLE idempotency_keys (
  account_id       text        NOT NULL,
  livemode         boolean     NOT NULL,
  idempotency_key  text        NOT NULL,
  -- sha256 (hex) of the method, the path with its query string, and the canonical body.
  request_hash     text        NOT NULL,
  state            text        NOT NULL,
  -- The response, once stored: status, the headers that matter (content type), the body as sent.
  status_code      integer,
  response_headers jsonb,
  response_body    text,
  created_at       timestamptz NOT NULL,
  expires_at       timestamptz NOT NULL
);
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (account_id, livemode, idempotency_key);
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_state_check CHECK (state IN ('pending', 'done'));
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_done_has_response CHECK (state = 'pending' OR (status_code IS NOT NULL AND response_body IS NOT NULL));
-- The purge deletes by expiry across accounts.
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);

-- Rate-limit counters (issue 15, point 6) in the layout rate-limiter-flexible's PostgreSQL store
-- reads and writes: one row per limiter key (`<account>:<mode>:<zone>`), its points in the
-- current window and the window's end in epoch milliseconds. Engine-wide and short-lived like the
-- run ledger (the account is inside the key), so not sharded; UNLOGGED because a counter lost in a
-- crash only resets a window of a second.
CREATE UNLOGGED TABLE rate_limit_counters (
  key    varchar(255) NOT NULL,
  points integer      NOT NULL DEFAULT 0,
  expire bigint
);
ALTER TABLE rate_limit_counters ADD CONSTRAINT rate_limit_counters_pkey PRIMARY KEY (key);
