-- One *paid* charge per subscription and period start. Declined attempts are kept as charges
-- (v1 shows them), but they must not hold the period's key: a resume or plan change that was
-- declined and is retried at the same instant with another card would otherwise collide with the
-- declined row and lose its approved authorization.
DROP INDEX charges_one_per_period;
CREATE UNIQUE INDEX charges_one_per_period ON charges (account_id, livemode, subscription_id, period_start)
  WHERE subscription_id IS NOT NULL AND period_start IS NOT NULL AND paid;
