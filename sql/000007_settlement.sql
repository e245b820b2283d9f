-- Settlement (service rules §4; v1 §2.2 platform and term fields, §2.6, §2.7, §4.7): tenants,
-- fees at capture, terms, statements with their items, balances, statement download URLs.
--
-- Keys as everywhere: (account_id, livemode, <id>), no foreign keys (Citus). Every row a term close
-- writes has a natural unique key, so re-running a close creates nothing twice. The account's term
-- cycle is accounts.term_cycle (000001).

CREATE TABLE tenants (
  account_id               text         NOT NULL,
  livemode                 boolean      NOT NULL,
  tenant_id                text         NOT NULL,
  name                     text,
  platform_fee_rate        numeric(5,2) NOT NULL CHECK (platform_fee_rate >= 0 AND platform_fee_rate <= 95),
  -- Fixed at creation: whether the platform fee contains the service fee.
  payjp_fee_included       boolean      NOT NULL,
  minimum_transfer_amount  bigint       NOT NULL DEFAULT 10000 CHECK (minimum_transfer_amount >= 1000),
  metadata                 jsonb        NOT NULL DEFAULT '{}',
  created_at               timestamptz  NOT NULL,
  updated_at               timestamptz  NOT NULL,
  deleted_at               timestamptz,
  PRIMARY KEY (account_id, livemode, tenant_id)
);
CREATE INDEX tenants_by_created ON tenants (account_id, livemode, created_at DESC, tenant_id DESC) WHERE deleted_at IS NULL;

-- Platform fields chosen at charge creation; fee fields filled at capture (settleCaptured).
ALTER TABLE charges
  ADD COLUMN tenant_id           text,
  -- The platform fee of the charge (of `amount` at creation, of the captured amount once captured).
  ADD COLUMN platform_fee        bigint CHECK (platform_fee >= 0),
  -- The tenant's rate when the fee was derived from it; null when `platform_fee` was given.
  ADD COLUMN platform_fee_rate   numeric(5,2),
  -- The tenant's payjp_fee_included, copied at creation (it never changes on the tenant).
  ADD COLUMN payjp_fee_included  boolean,
  -- The service fee of the captured amount, floor(amount_captured × fee_rate / 100).
  ADD COLUMN fee                 bigint,
  ADD COLUMN total_platform_fee  bigint NOT NULL DEFAULT 0,
  -- The settlement term of captured_at; null until settled.
  ADD COLUMN term_id             text;
CREATE INDEX charges_by_term ON charges (account_id, livemode, term_id) INCLUDE (tenant_id, payjp_fee_included, amount_captured, fee, platform_fee)
  WHERE term_id IS NOT NULL;

ALTER TABLE refunds
  ADD COLUMN tenant_id                   text,
  ADD COLUMN payjp_fee_included          boolean,
  ADD COLUMN refund_fee_offset           bigint,
  ADD COLUMN refund_platform_fee_offset  bigint,
  ADD COLUMN term_id                     text;
CREATE INDEX refunds_by_term ON refunds (account_id, livemode, term_id) WHERE term_id IS NOT NULL;

-- Terms: [start_at, end_at) at 00:00 JST. end_at is stored for every term (the job's due instant);
-- the API shows it as null while the term is open.
CREATE TABLE terms (
  account_id     text        NOT NULL,
  livemode       boolean     NOT NULL,
  term_id        text        NOT NULL,
  cycle          text        NOT NULL CHECK (cycle IN ('monthly', 'semi_monthly')),
  start_at       timestamptz NOT NULL,
  end_at         timestamptz NOT NULL CHECK (end_at > start_at),
  closed         boolean     NOT NULL DEFAULT false,
  closed_at      timestamptz,
  charge_count   integer     NOT NULL DEFAULT 0,
  refund_count   integer     NOT NULL DEFAULT 0,
  dispute_count  integer     NOT NULL DEFAULT 0,
  created_at     timestamptz NOT NULL,
  PRIMARY KEY (account_id, livemode, term_id),
  -- One term per start instant: the natural key that makes opening a term idempotent.
  UNIQUE (account_id, livemode, start_at)
);
-- The term-close job's due work: open terms by end instant.
CREATE INDEX terms_due ON terms (end_at, account_id, livemode) WHERE NOT closed;
CREATE INDEX terms_by_created ON terms (account_id, livemode, created_at DESC, term_id DESC);

-- Balances collect an owner's statements. owner_ref: 'merchant', 'platform' or the tenant id.
CREATE TABLE balances (
  account_id     text        NOT NULL,
  livemode       boolean     NOT NULL,
  balance_id     text        NOT NULL,
  owner          text        NOT NULL CHECK (owner IN ('merchant', 'tenant', 'platform')),
  owner_ref      text        NOT NULL,
  tenant_id      text,
  state          text        NOT NULL CHECK (state IN ('collecting', 'transfer', 'claim')),
  net            bigint      NOT NULL,
  -- Deferral deadline: end of the term of the latest sales statement + 1 year; null without one.
  deadline       timestamptz,
  due_date       date,
  -- 00:00 JST of due_date: the balance-close job's due instant.
  due_at         timestamptz,
  closed         boolean     NOT NULL DEFAULT false,
  closed_date    date,
  -- The last term whose close decided this balance.
  last_term_id   text        NOT NULL,
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL,
  PRIMARY KEY (account_id, livemode, balance_id)
);
-- At most one collecting balance per owner: deferred statements merge into it.
CREATE UNIQUE INDEX balances_one_collecting ON balances (account_id, livemode, owner_ref) WHERE state = 'collecting';
-- The balance-close job's due work.
CREATE INDEX balances_due ON balances (due_at, account_id, livemode) WHERE NOT closed AND due_at IS NOT NULL;
CREATE INDEX balances_by_created ON balances (account_id, livemode, created_at DESC, balance_id DESC);

CREATE TABLE statements (
  account_id     text        NOT NULL,
  livemode       boolean     NOT NULL,
  statement_id   text        NOT NULL,
  owner          text        NOT NULL CHECK (owner IN ('merchant', 'tenant', 'platform')),
  owner_ref      text        NOT NULL,
  tenant_id      text,
  type           text        NOT NULL CHECK (type IN ('sales', 'service_fee', 'forfeit', 'transfer_fee', 'misc')),
  title          text,
  term_id        text,
  balance_id     text        NOT NULL,
  net            bigint      NOT NULL,
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL,
  PRIMARY KEY (account_id, livemode, statement_id)
);
-- One statement per owner, term and type: a re-run close creates nothing.
CREATE UNIQUE INDEX statements_one_per_term ON statements (account_id, livemode, term_id, owner_ref, type) WHERE term_id IS NOT NULL;
CREATE INDEX statements_by_created ON statements (account_id, livemode, created_at DESC, statement_id DESC);
CREATE INDEX statements_by_balance ON statements (account_id, livemode, balance_id);

CREATE TABLE statement_items (
  account_id     text         NOT NULL,
  livemode       boolean      NOT NULL,
  statement_id   text         NOT NULL,
  position       smallint     NOT NULL,
  subject        text         NOT NULL,
  amount         bigint       NOT NULL,
  tax_rate       numeric(5,2) NOT NULL,
  PRIMARY KEY (account_id, livemode, statement_id, position),
  UNIQUE (account_id, livemode, statement_id, subject)
);

-- The live download URL of a statement per `platformer` value: issuing a new one replaces the row,
-- which invalidates the older URL (v1 §4.7).
CREATE TABLE statement_urls (
  account_id     text        NOT NULL,
  livemode       boolean     NOT NULL,
  statement_id   text        NOT NULL,
  platformer     boolean     NOT NULL,
  nonce          text        NOT NULL,
  issued_at      timestamptz NOT NULL,
  expires_at     timestamptz NOT NULL,
  PRIMARY KEY (account_id, livemode, statement_id, platformer)
);
