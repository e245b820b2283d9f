-- Plans, subscriptions and the charges that bill them (v1 §2.2, §2.4, §2.5; service rules §1).
--
-- Keys as in 000002: (account_id, livemode, id). Plans and subscriptions are deleted softly
-- (deleted_at) so charges keep pointing at rows that exist.

CREATE TABLE plans (
  account_id   text        NOT NULL,
  livemode     boolean     NOT NULL,
  plan_id      text        NOT NULL,
  amount       bigint      NOT NULL CHECK (amount BETWEEN 50 AND 9999999),
  currency     text        NOT NULL DEFAULT 'jpy',
  interval     text        NOT NULL CHECK (interval IN ('month', 'year')),
  name         text,
  trial_days   integer     NOT NULL DEFAULT 0 CHECK (trial_days BETWEEN 0 AND 365),
  -- 1..31 for monthly plans; a yearly plan may carry one but cannot be subscribed (invalid_plan).
  billing_day  integer     CHECK (billing_day BETWEEN 1 AND 31),
  metadata     jsonb       NOT NULL DEFAULT '{}',
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL,
  deleted_at   timestamptz,
  PRIMARY KEY (account_id, livemode, plan_id)
);
CREATE INDEX plans_by_created ON plans (account_id, livemode, created_at DESC, plan_id DESC) WHERE deleted_at IS NULL;

CREATE TABLE subscriptions (
  account_id            text        NOT NULL,
  livemode              boolean     NOT NULL,
  subscription_id       text        NOT NULL,
  customer_id           text        NOT NULL,
  plan_id               text        NOT NULL,
  -- Replaces plan_id at the next renewal; reset to null once switched (service rules §1.5).
  next_cycle_plan_id    text,
  status                text        NOT NULL CHECK (status IN ('trial', 'active', 'canceled', 'paused')),
  prorate               boolean     NOT NULL DEFAULT false,
  start_at              timestamptz NOT NULL,
  current_period_start  timestamptz NOT NULL,
  current_period_end    timestamptz NOT NULL,
  trial_start           timestamptz,
  trial_end             timestamptz,
  paused_at             timestamptz,
  canceled_at           timestamptz,
  resumed_at            timestamptz,
  -- When the renewal job next has work for this subscription: trial_end of a trial,
  -- current_period_end of an active or canceled one; null when paused or deleted.
  renews_at             timestamptz,
  -- The last successful charge, for the pro-rata refund on delete (service rules §1.6).
  last_charge_id        text,
  metadata              jsonb       NOT NULL DEFAULT '{}',
  created_at            timestamptz NOT NULL,
  updated_at            timestamptz NOT NULL,
  deleted_at            timestamptz,
  PRIMARY KEY (account_id, livemode, subscription_id)
);
-- The renewal job's due work: (state, due instant), state being "has a renews_at".
CREATE INDEX subscriptions_due ON subscriptions (renews_at, account_id, livemode, subscription_id) WHERE renews_at IS NOT NULL;
CREATE INDEX subscriptions_by_created ON subscriptions (account_id, livemode, created_at DESC, subscription_id DESC) WHERE deleted_at IS NULL;
CREATE INDEX subscriptions_by_customer ON subscriptions (account_id, livemode, customer_id) WHERE deleted_at IS NULL;
CREATE INDEX subscriptions_by_plan ON subscriptions (account_id, livemode, plan_id) WHERE deleted_at IS NULL;

CREATE TABLE charges (
  account_id                 text         NOT NULL,
  livemode                   boolean      NOT NULL,
  charge_id                  text         NOT NULL,
  amount                     bigint       NOT NULL CHECK (amount > 0),
  currency                   text         NOT NULL DEFAULT 'jpy',
  -- Whether the authorization succeeded; a failed charge is kept with its failure code.
  paid                       boolean      NOT NULL,
  captured                   boolean      NOT NULL,
  captured_at                timestamptz,
  expired_at                 timestamptz,
  card_id                    text         NOT NULL,
  customer_id                text,
  subscription_id            text,
  -- The period a subscription charge pays for starts here; with subscription_id it is the
  -- natural key that makes a renewal charge unique.
  period_start               timestamptz,
  description                text,
  failure_code               text,
  failure_message            text,
  fee_rate                   numeric(5,2) NOT NULL,
  refunded                   boolean      NOT NULL DEFAULT false,
  amount_refunded            bigint       NOT NULL DEFAULT 0,
  refund_reason              text,
  three_d_secure_status      text,
  metadata                   jsonb        NOT NULL DEFAULT '{}',
  created_at                 timestamptz  NOT NULL,
  updated_at                 timestamptz  NOT NULL,
  PRIMARY KEY (account_id, livemode, charge_id)
);
-- One charge per subscription and period start: the last line of defence against billing a
-- period twice (a replayed slot, two workers, a crash mid-batch).
CREATE UNIQUE INDEX charges_one_per_period ON charges (account_id, livemode, subscription_id, period_start)
  WHERE subscription_id IS NOT NULL AND period_start IS NOT NULL;
CREATE INDEX charges_by_created ON charges (account_id, livemode, created_at DESC, charge_id DESC);
CREATE INDEX charges_by_subscription ON charges (account_id, livemode, subscription_id, created_at) WHERE subscription_id IS NOT NULL;
