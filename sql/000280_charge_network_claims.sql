-- v1 charges claim the card network in network_claims (src/engine/network-claims.ts; resource
-- `charge`) instead of `pending` rows of idempotency_keys under the reserved key `charge:<id>`. A
-- running system may hold some: a claim of an operation in flight (capture, hold cancel, reauth,
-- tds_finish, the 3-D Secure step; `request_hash` names it) or the create intent of a charge whose
-- authorization is at the network (`charges.create`, its `response_body` the authorization request
-- and the token it consumed). Each moves over with its instant (`created_at`, the fencing token)
-- and its lease (`expires_at`); a create intent's recovery point is its authorization request and
-- its token (null when none, or given back already), so the hold-expiry job undoes it once it
-- lapses, as before. Then the rows leave idempotency_keys, which holds only the API's keys.
INSERT INTO network_claims (account_id, livemode, resource, resource_id, operation, claimed_at, lease_until, recovery)
SELECT k.account_id, k.livemode, 'charge', substr(k.idempotency_key, 8), k.request_hash, k.created_at,
       GREATEST(k.expires_at, k.created_at + interval '1 millisecond'),
       CASE WHEN k.request_hash = 'charges.create' AND k.response_body IS NOT NULL THEN jsonb_build_object(
         'authorizations', jsonb_build_array(k.response_body::jsonb -> 'request'),
         'token', CASE WHEN k.response_body::jsonb ->> 'tokenId' IS NULL THEN 'null'::jsonb
                       ELSE jsonb_build_object('tokenId', k.response_body::jsonb ->> 'tokenId', 'usedAt', k.response_body::jsonb -> 'tokenUsedAt') END)
       ELSE jsonb_build_object('authorizations', '[]'::jsonb) END
FROM idempotency_keys k
WHERE k.idempotency_key LIKE 'charge:%' AND k.state = 'pending'
ON CONFLICT ON CONSTRAINT network_claims_pkey DO NOTHING;
DELETE FROM idempotency_keys WHERE idempotency_key LIKE 'charge:%';
