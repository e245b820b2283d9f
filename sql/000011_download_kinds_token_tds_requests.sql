-- Issue 15 point 3 (i15c): the v1 routes not yet served.
--
-- 1. statement_urls serves every expiring URL kessai issues, one mechanism: a statement's download
--    (kind 'statement'), a balance's statements (kind 'balance') and a tenant's application page
--    (kind 'tenant_application'). `statement_id` names the object of that kind; one row per object,
--    kind and `platformer`, so a newer URL still invalidates the older.
ALTER TABLE statement_urls ADD COLUMN kind text NOT NULL DEFAULT 'statement';
ALTER TABLE statement_urls ADD CONSTRAINT statement_urls_kind_known CHECK (kind IN ('statement', 'balance', 'tenant_application'));
ALTER TABLE statement_urls DROP CONSTRAINT statement_urls_pkey;
ALTER TABLE statement_urls ADD CONSTRAINT statement_urls_pkey PRIMARY KEY (account_id, livemode, kind, statement_id, platformer);

-- 2. Token-level 3-D Secure (tokens created with three_d_secure=true): the token is usable once
--    tds_finish ran on a `verified` or `attempted` authentication, within the window.
CREATE TABLE token_three_d_secure (
  account_id    text        NOT NULL,
  livemode      boolean     NOT NULL,
  token_id      text        NOT NULL,
  -- unverified → verified | attempted | failed | error (the buyer's authentication).
  status        text        NOT NULL,
  expires_at    timestamptz NOT NULL,
  finished_at   timestamptz,
  CONSTRAINT token_three_d_secure_pkey PRIMARY KEY (account_id, livemode, token_id)
);
ALTER TABLE token_three_d_secure ADD CONSTRAINT token_three_d_secure_status_known CHECK (status IN ('unverified', 'verified', 'attempted', 'failed', 'error'));

-- 3. 3-D Secure requests for a customer's card (three_d_secure_requests, `tdsr_`).
CREATE TABLE three_d_secure_requests (
  account_id            text        NOT NULL,
  livemode              boolean     NOT NULL,
  request_id            text        NOT NULL,
  resource_id           text        NOT NULL,
  tenant_id             text,
  state                 text        NOT NULL,
  three_d_secure_status text        NOT NULL,
  created_at            timestamptz NOT NULL,
  updated_at            timestamptz NOT NULL,
  started_at            timestamptz,
  result_received_at    timestamptz,
  finished_at           timestamptz,
  expires_at            timestamptz NOT NULL,
  CONSTRAINT three_d_secure_requests_pkey PRIMARY KEY (account_id, livemode, request_id)
);
ALTER TABLE three_d_secure_requests ADD CONSTRAINT three_d_secure_requests_state_known CHECK (state IN ('created', 'in_progress', 'result_received', 'finished'));
ALTER TABLE three_d_secure_requests ADD CONSTRAINT three_d_secure_requests_status_known CHECK (three_d_secure_status IN ('unverified', 'verified', 'attempted', 'failed', 'error'));
CREATE INDEX three_d_secure_requests_by_created ON three_d_secure_requests (account_id, livemode, created_at DESC, request_id DESC);

-- 4. A card's `three_d_secure_status` (v1 §2.3): the status of its last finished 3-D Secure request,
--    or of the token it was made from when that token finished 3-D Secure; null when never.
ALTER TABLE cards ADD COLUMN three_d_secure_status text;
ALTER TABLE cards ADD CONSTRAINT cards_three_d_secure_status_known CHECK (three_d_secure_status IN ('verified', 'attempted', 'failed', 'error'));
