-- Webhook endpoints and deliveries (v2 §6.2, service rules §5, issue 17).
--
-- An endpoint belongs to an account and a mode. Its token is sent with every delivery (the
-- receiver compares it), so it is kept as written, not as a digest; it never reaches a log line.
-- A delivery is one (endpoint, event) pair, written in the event's own transaction (outbox.ts);
-- its attempts are claimed under a lease (`claims` is the fencing counter: only the claim that
-- still holds the row records its outcome) and every recorded attempt is kept in
-- webhook_attempts. Citus-ready like the earlier files: account_id first in every key.

CREATE TABLE webhook_endpoints (
  account_id   text        NOT NULL,
  endpoint_id  text        NOT NULL,
  livemode     boolean     NOT NULL,
  url          text        NOT NULL,
  token        text        NOT NULL,
  -- null: every event, each rendered in its own API version; 'v1' or 'v2': only those events.
  api_version  text,
  -- null: every event type; else only these types.
  event_types  text[],
  status       text        NOT NULL DEFAULT 'enabled',
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL
);
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (account_id, endpoint_id);
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_status_check CHECK (status IN ('enabled', 'disabled', 'removed'));
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_api_version_check CHECK (api_version IN ('v1', 'v2'));
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_url_check CHECK (url ~ '^https?://');
-- The outbox looks up the enabled endpoints of an account and mode for every event it writes.
CREATE INDEX webhook_endpoints_enabled ON webhook_endpoints (account_id, livemode) WHERE status = 'enabled';

CREATE TABLE webhook_deliveries (
  account_id      text        NOT NULL,
  endpoint_id     text        NOT NULL,
  event_id        text        NOT NULL,
  -- pending (attempts left), delivered (a 2xx answer), failed (given up after the last retry).
  status          text        NOT NULL DEFAULT 'pending',
  -- Attempts whose outcome was recorded.
  attempts        integer     NOT NULL DEFAULT 0,
  -- Claims taken (the fence): a claim records its outcome only while this is still its number.
  claims          integer     NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL,
  lease_owner     text,
  lease_until     timestamptz,
  last_status     integer,
  last_error      text,
  delivered_at    timestamptz,
  created_at      timestamptz NOT NULL
);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (account_id, endpoint_id, event_id);
-- Every delivery is updated at least twice (its claim, its outcome): free room in each page lets
-- the claim's update stay on its page without new index entries (a HOT update).
ALTER TABLE webhook_deliveries SET (fillfactor = 60);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending', 'delivered', 'failed'));
-- The job's claim: pending deliveries in due order.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';

CREATE TABLE webhook_attempts (
  account_id   text        NOT NULL,
  endpoint_id  text        NOT NULL,
  event_id     text        NOT NULL,
  attempt      integer     NOT NULL,
  attempted_at timestamptz NOT NULL,
  succeeded    boolean     NOT NULL,
  -- The HTTP status, or null for a timeout or a connection error (then `error` says which).
  http_status  integer,
  error        text,
  duration_ms  integer     NOT NULL
);
-- One row per attempt number: an attempt is recorded once, by the claim that made it.
ALTER TABLE webhook_attempts ADD CONSTRAINT webhook_attempts_pkey PRIMARY KEY (account_id, endpoint_id, event_id, attempt);
