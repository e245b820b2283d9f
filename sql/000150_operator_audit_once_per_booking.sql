-- An adjustment's booking is audited once: a retried request racing the first one (the same
-- Idempotency-Key, so the same booking) may not add a second `adjustment.book` row. The audit
-- insert is ON CONFLICT DO NOTHING against this index, one statement instead of a read and an
-- insert that two requests could both pass. operator_audit is engine-wide (no account_id column,
-- local on Citus), so the index need not start with account_id.
-- Rows a race already doubled keep their first (lowest audit_id) so the index can be built.
DELETE FROM operator_audit AS later
  USING operator_audit AS earlier
  WHERE later.action = 'adjustment.book'
    AND earlier.action = 'adjustment.book'
    AND earlier.account = later.account
    AND earlier.target = later.target
    AND earlier.audit_id < later.audit_id;
CREATE UNIQUE INDEX operator_audit_once_per_booking ON operator_audit (account, target) WHERE action = 'adjustment.book';
