-- The hosted checkout page (issue 16 points 3–4) is opened by its URL alone: the buyer's browser
-- has the session id and no API key. The directory maps each session id to its account and mode,
-- engine-wide like api_key_directory (000042): no account_id column, so on Citus it stays local on
-- the coordinator, which answers the lookup itself; the session is then read by account from its
-- one shard. Written with the session, in the same transaction (checkout.sessions.create).
-- Unique with its account and mode, as the session is: ids carry 120 random bits in production,
-- but seeded generators (simulation, tests) repeat ids across accounts; a page id found under
-- more than one account is refused as unknown.
CREATE TABLE checkout_session_directory (
  checkout_session_id  text    NOT NULL,
  account              text    NOT NULL,
  livemode             boolean NOT NULL,
  CONSTRAINT checkout_session_directory_pkey PRIMARY KEY (checkout_session_id, account, livemode)
);

INSERT INTO checkout_session_directory (checkout_session_id, account, livemode)
SELECT checkout_session_id, account_id, livemode FROM checkout_sessions;

-- The page tokenizes the buyer's card with the account's public key, as a merchant's own page
-- would: public keys are published in browser pages by design, so they are kept in clear (secret
-- keys stay digests only). Keys made before this file have none: their accounts' hosted page says
-- so (docs/decisions.md, "Issue 16 hosted checkout (H7)").
ALTER TABLE api_keys ADD COLUMN public_key text;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_public_key_of_public_kind CHECK (public_key IS NULL OR kind = 'public');
