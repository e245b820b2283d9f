-- Issue 16 (h6): capture and cancel of a v2 payment flow call the card network (capture, release)
-- outside any transaction, as its confirmation does: the flow is claimed (`processing`, committed)
-- with the network work named here, the network is asked with no row locked, and the outcome is
-- recorded only while the claim holds. A claim left by a crash is finished by the next call of
-- the same kind. Shape: {"op": "capture", "amount": n} or {"op": "release", "amount": n,
-- "reason": text|null, "lapsed": bool}; null when no capture or release is in flight (a
-- confirmation's claim has none: it is `processing` with a null network_claim).
ALTER TABLE payment_flows ADD COLUMN network_claim jsonb;
