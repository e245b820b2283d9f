-- Claims around the card network (src/engine/network-claims.ts): an operation that must ask the
-- network about an object takes a claim on it in a short transaction (committed), asks the network
-- with no transaction open, and records the outcome only while the claim holds, dropping it in the
-- same commit. One row per claimed object (resource, resource_id); `operation` names who holds it,
-- `claimed_at` is its instant and fencing token, `lease_until` when another process may take it
-- over. `recovery` is the recovery point: the network requests made under the claim (their
-- references are the network's idempotency), what a taker asks again and undoes, exactly once,
-- when the holder died between the network's answer and the record.
CREATE TABLE network_claims (
  account_id  text        NOT NULL,
  livemode    boolean     NOT NULL,
  resource    text        NOT NULL,
  resource_id text        NOT NULL,
  operation   text        NOT NULL,
  claimed_at  timestamptz NOT NULL,
  lease_until timestamptz NOT NULL,
  recovery    jsonb       NOT NULL,
  CONSTRAINT network_claims_pkey PRIMARY KEY (account_id, livemode, resource, resource_id)
);
ALTER TABLE network_claims ADD CONSTRAINT network_claims_lease_after_claim CHECK (lease_until > claimed_at);
-- The recovery reads lapsed claims through their lease, account by account.
CREATE INDEX network_claims_by_lease ON network_claims (lease_until, account_id);
