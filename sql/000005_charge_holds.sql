-- Holds of v1 charges (v1 §3.1, §4.2, §4.3; service rules §2): authorize now, capture later,
-- 3-D Secure pending charges, the hold-expiry and 3-D Secure timeout jobs, and scheduled
-- reauthorization (service rules §2 Decision) with one row per attempt.

ALTER TABLE charges
  -- What creation asked for, applied when a 3-D Secure charge is finished (v1 §3.1: "capture,
  -- captured_at, expired_at take the values requested at creation"); also the expiry_days a
  -- scheduled reauthorization repeats. Null for charges that are never held (subscriptions).
  ADD COLUMN capture_requested       boolean,
  ADD COLUMN expiry_days             integer CHECK (expiry_days BETWEEN 1 AND 60),
  -- The card's funding and issuer at charge time: hold periods (§2.1) and reauth eligibility
  -- (never debit) depend on them; copied so the jobs need no join to cards or tokens.
  ADD COLUMN card_funding            text,
  ADD COLUMN card_issuer             text,
  -- The network's approval of the current hold, for capture and release.
  ADD COLUMN authorization_code      text,
  -- The instant the current hold was authorized (creation, tds_finish or the last reauth).
  ADD COLUMN authorized_at           timestamptz,
  -- While a 3-D Secure charge is pending: the end of its completion window (created + 30 min).
  -- Cleared when the charge is finished or abandoned.
  ADD COLUMN tds_expires_at          timestamptz,
  -- When the hold lapsed and was given back by the hold-expiry job (its own expired_at).
  ADD COLUMN released_at             timestamptz,
  -- Scheduled reauthorizations attempted so far, and the expired_at of the hold last attempted
  -- (a failed attempt is not repeated for the same hold: it is left to lapse).
  ADD COLUMN reauth_count            integer NOT NULL DEFAULT 0,
  ADD COLUMN reauth_tried_expired_at timestamptz;

-- The hold-expiry and reauth jobs' due work: live, uncaptured, unreleased holds by expiry.
CREATE INDEX charges_hold_due ON charges (expired_at, account_id, livemode, charge_id)
  WHERE paid AND NOT captured AND NOT refunded AND released_at IS NULL AND expired_at IS NOT NULL;
-- The 3-D Secure timeout job's due work.
CREATE INDEX charges_tds_due ON charges (tds_expires_at, account_id, livemode, charge_id) WHERE tds_expires_at IS NOT NULL;
-- charges.list filters.
CREATE INDEX charges_by_customer ON charges (account_id, livemode, customer_id, created_at DESC, charge_id DESC) WHERE customer_id IS NOT NULL;
-- A charge made with a token embeds the token's card, found by card id.
CREATE INDEX tokens_by_card ON tokens (account_id, livemode, card_id);

-- Scheduled reauthorization is opt-in per account (service rules §2 Decision).
ALTER TABLE accounts
  ADD COLUMN reauth_enabled    boolean NOT NULL DEFAULT false,
  -- Holds lapsing within this many hours are reauthorized.
  ADD COLUMN reauth_lead_hours integer NOT NULL DEFAULT 24 CHECK (reauth_lead_hours BETWEEN 1 AND 720),
  -- At most this many scheduled attempts per charge.
  ADD COLUMN reauth_max_count  integer NOT NULL DEFAULT 1 CHECK (reauth_max_count BETWEEN 0 AND 100);

-- Every reauthorization attempt (charges.reauth and the scheduled job) with its outcome.
CREATE TABLE reauthorizations (
  account_id          text        NOT NULL,
  livemode            boolean     NOT NULL,
  reauth_id           text        NOT NULL,
  charge_id           text        NOT NULL,
  -- true: made by the reauthorization job; false: charges.reauth.
  scheduled           boolean     NOT NULL,
  amount              bigint      NOT NULL CHECK (amount > 0),
  outcome             text        NOT NULL CHECK (outcome IN ('succeeded', 'failed')),
  failure_code        text,
  failure_message     text,
  authorization_code  text,
  -- expired_at of the hold before the attempt, and of the new hold (null when it failed).
  previous_expired_at timestamptz,
  expired_at          timestamptz,
  attempted_at        timestamptz NOT NULL,
  PRIMARY KEY (account_id, livemode, reauth_id)
);
CREATE INDEX reauthorizations_by_charge ON reauthorizations (account_id, livemode, charge_id, attempted_at);
-- One scheduled attempt per hold: the last line of defence against reauthorizing twice.
CREATE UNIQUE INDEX reauthorizations_scheduled_once ON reauthorizations (account_id, livemode, charge_id, previous_expired_at) WHERE scheduled;
