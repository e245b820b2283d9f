-- The v2 refunds claim the card network in network_claims (src/engine/network-claims.ts) instead
-- of stamping their `pending` row: a refund left `pending` by a request that died at the network
-- gets the claim it would have taken, dated at its `updated_at` (its stamp until now), with the
-- issuer's request it made as the recovery point (none for a flow not paid by card), so the
-- flow's next refund request or the hold-expiry job finishes it once.
INSERT INTO network_claims (account_id, livemode, resource, resource_id, operation, claimed_at, lease_until, recovery)
SELECT r.account_id, r.livemode, 'payment_refund', r.payment_refund_id, 'payment_refunds.create', r.updated_at, r.updated_at + interval '60 seconds',
       jsonb_build_object(
         'authorizations', '[]'::jsonb,
         'refunds', CASE WHEN f.card_fingerprint IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(jsonb_build_object(
           'reference', r.payment_refund_id,
           'authorizationCode', coalesce(f.authorization_code, ''),
           'fingerprint', f.card_fingerprint,
           'amount', r.amount,
           'at', to_char(r.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))) END)
FROM payment_refunds r
JOIN payment_flows f ON f.account_id = r.account_id AND f.livemode = r.livemode AND f.payment_flow_id = r.payment_flow_id
WHERE r.status = 'pending'
ON CONFLICT ON CONSTRAINT network_claims_pkey DO NOTHING;
