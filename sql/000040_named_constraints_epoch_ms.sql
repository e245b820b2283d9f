-- Citus readiness (issue 18): constraints added to existing tables get names of their own, and the
-- epoch-milliseconds helper becomes an IMMUTABLE function.
--
-- 000004, 000005 and 000007 added CHECK constraints inline in ALTER TABLE … ADD COLUMN, so
-- PostgreSQL named them itself (<table>_<column>_check). Citus refuses such a command on a
-- distributed table ("all constraints in Citus must have explicit names"), and a name chosen by the
-- server is not one to rely on in later migrations. Landed files are immutable, so each constraint
-- is replaced here by the same check under a name of its own, one statement each. Not RENAME
-- CONSTRAINT: Citus cannot rename constraints of distributed tables, and this file must apply on
-- a database distributed before it. Adding a CHECK reads the table once to validate it.
-- sql/README.md gives the rule for new files.
ALTER TABLE charges ADD CONSTRAINT charges_amount_captured_positive CHECK (amount_captured > 0);
ALTER TABLE charges DROP CONSTRAINT charges_amount_captured_check;
ALTER TABLE charges ADD CONSTRAINT charges_expiry_days_range CHECK (expiry_days BETWEEN 1 AND 60);
ALTER TABLE charges DROP CONSTRAINT charges_expiry_days_check;
ALTER TABLE charges ADD CONSTRAINT charges_platform_fee_not_negative CHECK (platform_fee >= 0);
ALTER TABLE charges DROP CONSTRAINT charges_platform_fee_check;
ALTER TABLE accounts ADD CONSTRAINT accounts_reauth_lead_hours_range CHECK (reauth_lead_hours BETWEEN 1 AND 720);
ALTER TABLE accounts DROP CONSTRAINT accounts_reauth_lead_hours_check;
ALTER TABLE accounts ADD CONSTRAINT accounts_reauth_max_count_range CHECK (reauth_max_count BETWEEN 0 AND 100);
ALTER TABLE accounts DROP CONSTRAINT accounts_reauth_max_count_check;

-- The exact instant of an epoch-milliseconds number: whole seconds through to_timestamp (exact for
-- any integer), plus the milliseconds as an interval (to_timestamp of a fractional double would
-- round far-future instants). src/db/epoch-ms.ts calls it. `timestamptz + interval` is STABLE in
-- general because adding days or months depends on the time zone; adding under a second does not,
-- so IMMUTABLE is honest. Citus needs it: it refuses STABLE functions with column references in a
-- distributed UPDATE, and copies this function to its workers.
CREATE FUNCTION kessai_instant_ms(ms bigint) RETURNS timestamptz
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT to_timestamp(ms / 1000) + ms % 1000 * interval '1 millisecond' $$;
