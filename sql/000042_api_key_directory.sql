-- API keys by digest (issue 18, i18): a request names only its key, so authentication looked the
-- key up by digest in api_keys, which on Citus is distributed by account_id: a query sent to every
-- shard for every request. The directory maps each key digest to its account. It is engine-wide,
-- like the run ledger: deliberately no account_id column, so `kessai migrate --citus` leaves it
-- local on the coordinator, which answers the lookup itself; the key row (revocation, kind, mode)
-- is then read by account and digest from the account's one shard. Written with the keys, in the
-- same transaction (createAccount); keys are never deleted (revoked_at stays in api_keys).
CREATE TABLE api_key_directory (
  key_digest  text NOT NULL,
  account     text NOT NULL,
  CONSTRAINT api_key_directory_pkey PRIMARY KEY (key_digest)
);

INSERT INTO api_key_directory (key_digest, account)
SELECT key_digest, min(account_id) FROM api_keys GROUP BY key_digest;
