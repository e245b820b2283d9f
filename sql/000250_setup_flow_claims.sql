-- The v2 setup flows claim the card network in network_claims (src/engine/network-claims.ts)
-- instead of stamping their `processing` row: a setup flow left `processing` by a confirmation that
-- died at the network gets the claim it would have taken, dated at its `updated_at` (its stamp until
-- now), so it is refused to others until that lease lapses and then taken over by the next
-- confirmation, as before. Its recovery point names no authorization: the taker verifies the card
-- again under the flow's id and releases what it gets.
INSERT INTO network_claims (account_id, livemode, resource, resource_id, operation, claimed_at, lease_until, recovery)
SELECT f.account_id, f.livemode, 'setup_flow', f.setup_flow_id, 'setup_flows.confirm', f.updated_at, f.updated_at + interval '60 seconds',
       jsonb_build_object('authorizations', '[]'::jsonb)
FROM setup_flows f
WHERE f.status = 'processing'
ON CONFLICT ON CONSTRAINT network_claims_pkey DO NOTHING;
