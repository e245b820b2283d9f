-- Issue 20: a slot is given up only after attempts that made no progress, not after any five
-- claims. An attempt that committed a batch moved work off the due list; counting it as a failure
-- abandoned slots whose every crash had made progress.
--
-- Consecutive attempts that ended (with an error, or with a worker that died) without committing
-- a batch; set back to 0 by every committed batch. The slot is abandoned when it reaches the
-- scheduler's maxAttempts.
ALTER TABLE job_runs ADD COLUMN attempts_without_progress integer NOT NULL DEFAULT 0;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_attempts_without_progress_not_negative CHECK (attempts_without_progress >= 0);
-- The attempt that committed the latest batch, written in that batch's transaction and cleared by
-- every claim: equal to `attempt` when the current (or last) attempt made progress, so a take-over
-- knows whether the worker that died had committed anything.
ALTER TABLE job_runs ADD COLUMN progress_attempt integer;
-- `jobs list` shows each job's abandoned slots: they wait for an operator, however old.
CREATE INDEX job_runs_abandoned ON job_runs (job, slot) WHERE status = 'abandoned';
