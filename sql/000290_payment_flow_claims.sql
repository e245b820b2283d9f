-- The v2 payment flows claim the card network in network_claims (src/engine/network-claims.ts;
-- resource `payment_flow`) instead of stamping their `processing` row (`updated_at` the claim's
-- instant, `network_claim` naming a capture's or release's work). A payment flow left `processing`
-- by a call that died at the network gets the claim it would have taken, dated at its `updated_at`
-- (its stamp until now), so it is refused to others until that lease lapses and then taken over by
-- the next call of the same kind (confirm or complete_action; capture; cancel), as before. Its
-- recovery point names the work (`{"op": "confirm"}`, or the capture's or release's work as
-- `network_claim` held it) and no authorization: the engine's recovery leaves it to that call.
INSERT INTO network_claims (account_id, livemode, resource, resource_id, operation, claimed_at, lease_until, recovery)
SELECT f.account_id, f.livemode, 'payment_flow', f.payment_flow_id,
       'payment_flows.' || COALESCE(f.network_claim ->> 'op', 'confirm'), f.updated_at, f.updated_at + interval '60 seconds',
       jsonb_build_object('authorizations', '[]'::jsonb, 'work', COALESCE(f.network_claim, jsonb_build_object('op', 'confirm')))
FROM payment_flows f
WHERE f.status = 'processing'
ON CONFLICT ON CONSTRAINT network_claims_pkey DO NOTHING;
ALTER TABLE payment_flows DROP COLUMN network_claim;
