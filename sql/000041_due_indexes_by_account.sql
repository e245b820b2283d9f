-- Jobs work account by account (issue 18): each batch takes the due rows of one account,
-- `WHERE account_id = $1 AND <due instant> <= $slot ORDER BY <due instant> …`, and the accounts
-- with due work are found by one probe per account. The due indexes therefore lead with
-- account_id (before, they led with the due instant, and a batch of one account walked past every
-- other account's due rows). Replaced, not added: each index is written by every change of its
-- rows, so the jobs' writes cost what they did. Names and predicates are unchanged. On Citus every
-- index lives on each shard, which holds whole accounts.
DROP INDEX subscriptions_due;
CREATE INDEX subscriptions_due ON subscriptions (account_id, renews_at, livemode, subscription_id) WHERE renews_at IS NOT NULL;

DROP INDEX charges_hold_due;
CREATE INDEX charges_hold_due ON charges (account_id, expired_at, livemode, charge_id)
  WHERE paid AND NOT captured AND NOT refunded AND released_at IS NULL AND expired_at IS NOT NULL;

DROP INDEX charges_tds_due;
CREATE INDEX charges_tds_due ON charges (account_id, tds_expires_at, livemode, charge_id) WHERE tds_expires_at IS NOT NULL;

DROP INDEX payment_flows_hold_due;
CREATE INDEX payment_flows_hold_due ON payment_flows (account_id, capture_before, livemode, payment_flow_id) WHERE status = 'requires_capture';

DROP INDEX checkout_sessions_expiry_due;
CREATE INDEX checkout_sessions_expiry_due ON checkout_sessions (account_id, expires_at, livemode, checkout_session_id) WHERE status = 'open';

DROP INDEX terms_due;
CREATE INDEX terms_due ON terms (account_id, end_at, livemode) WHERE NOT closed;

DROP INDEX balances_due;
CREATE INDEX balances_due ON balances (account_id, due_at, livemode) WHERE NOT closed AND due_at IS NOT NULL;
