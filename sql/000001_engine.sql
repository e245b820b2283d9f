-- Engine foundation: accounts and their keys, the event outbox, the job run ledger.
--
-- Citus-ready (see ARCHITECTURE.md): every table of account data carries account_id in its primary
-- key and in every unique constraint, and no foreign key crosses accounts. The run ledger and the
-- schedule high-water marks are engine-wide and stay small.

CREATE TABLE accounts (
  account_id    text        PRIMARY KEY,
  name          text        NOT NULL,
  -- Live mode must be granted; until then live keys answer not_activated_account.
  live_enabled  boolean     NOT NULL DEFAULT false,
  -- Settlement cycle of the account's terms (service rules §4).
  term_cycle    text        NOT NULL DEFAULT 'monthly' CHECK (term_cycle IN ('monthly', 'semi_monthly')),
  created_at    timestamptz NOT NULL
);

-- The fee rate the account pays per card brand, in percent with two decimals.
CREATE TABLE account_fee_rates (
  account_id  text         NOT NULL,
  brand       text         NOT NULL,
  fee_rate    numeric(5,2) NOT NULL CHECK (fee_rate >= 0 AND fee_rate <= 100),
  PRIMARY KEY (account_id, brand)
);

-- API keys are stored as SHA-256 digests: the key itself is shown once, at creation.
CREATE TABLE api_keys (
  account_id  text        NOT NULL,
  key_digest  text        NOT NULL,
  kind        text        NOT NULL CHECK (kind IN ('secret', 'public')),
  livemode    boolean     NOT NULL,
  -- First characters of the key ("sk_test_3f9a"), to tell keys apart in listings.
  key_hint    text        NOT NULL,
  created_at  timestamptz NOT NULL,
  revoked_at  timestamptz,
  PRIMARY KEY (account_id, key_digest)
);
-- Authentication looks a key up by digest alone; not unique across accounts by constraint (Citus),
-- unique in practice because keys carry 120 random bits.
CREATE INDEX api_keys_by_digest ON api_keys (key_digest);

-- The event outbox: written in the same transaction as the state change it reports.
CREATE TABLE events (
  account_id       text        NOT NULL,
  event_id         text        NOT NULL,
  livemode         boolean     NOT NULL,
  -- 'v1' renders as evnt_/created, 'v2' as evt_/created_at (service rules §5).
  api_version      text        NOT NULL CHECK (api_version IN ('v1', 'v2')),
  type             text        NOT NULL,
  object_type      text        NOT NULL,
  resource_id      text        NOT NULL,
  data             jsonb       NOT NULL,
  created_at       timestamptz NOT NULL,
  -- Insertion order within the account, so events written at one instant keep their order.
  seq              bigint      GENERATED ALWAYS AS IDENTITY,
  pending_webhooks integer     NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, event_id)
);
CREATE INDEX events_by_created ON events (account_id, created_at, seq);
CREATE INDEX events_by_resource ON events (account_id, resource_id);

-- The run ledger: one row per (job, slot). A slot is claimed by inserting its row; only the
-- claimer runs it, under a lease that another worker may take over once it has lapsed.
CREATE TABLE job_runs (
  job          text        NOT NULL,
  slot         timestamptz NOT NULL,
  -- pending: scheduled, not yet claimed; running: claimed under a lease; failed: waits for
  -- retry_at; abandoned: out of attempts; succeeded: done.
  status       text        NOT NULL CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'abandoned')),
  -- Claims so far; the claim that finishes a run must still hold this number (fencing).
  attempt      integer     NOT NULL DEFAULT 0,
  owner        text,
  lease_until  timestamptz,
  started_at   timestamptz,
  finished_at  timestamptz,
  duration_ms  integer,
  counts       jsonb,
  error        text,
  retry_at     timestamptz,
  PRIMARY KEY (job, slot)
);
-- Finds slots to claim: pending ones, failed ones whose retry time came, running ones whose lease lapsed.
CREATE INDEX job_runs_claimable ON job_runs (slot, job) WHERE status IN ('pending', 'running', 'failed');

-- Per job, the latest slot already scheduled. Advanced only forwards (a conditional upsert), so a
-- clock that moves backwards schedules nothing twice.
CREATE TABLE job_schedule (
  job         text        PRIMARY KEY,
  high_water  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL
);
