-- The account groups of a slot (src/engine/slot-groups.ts): a slot stays one record of what is
-- due as of its instant (`job_runs`), and the accounts with due work are divided into groups (the
-- batches of the job's first round: on Citus the accounts of one shard), one row each, that several
-- workers claim under a lease, a round at a time, and process in parallel. A worker node that
-- cannot be reached leaves only its own groups pending. `accounts` shrinks to those still due
-- after each round (`rounds`). Local to the coordinator with the rest of the run ledger; the
-- ledger's retention deletes a slot's groups with the slot.
--
-- pending: not claimed yet (or between rounds, or handed back at a stop); running: claimed under `lease_until` by
-- `owner`, `attempt` being the fencing number; done: every batch of its accounts committed;
-- failed: an error stopped it in the slot's attempt `failed_attempt` (the slot's next attempt takes
-- it again), `unavailable` when the error was a database or node that could not be reached.
CREATE TABLE job_run_groups (
  job            text        NOT NULL,
  slot           timestamptz NOT NULL,
  grp            integer     NOT NULL,
  accounts       text[]      NOT NULL,
  rounds         integer     NOT NULL DEFAULT 0,
  status         text        NOT NULL,
  attempt        integer     NOT NULL DEFAULT 0,
  owner          text,
  lease_until    timestamptz,
  failed_attempt integer,
  unavailable    boolean     NOT NULL DEFAULT false,
  error          text,
  CONSTRAINT job_run_groups_pkey PRIMARY KEY (job, slot, grp)
);
ALTER TABLE job_run_groups ADD CONSTRAINT job_run_groups_status_known CHECK (status IN ('pending', 'running', 'done', 'failed'));
-- Helpers look for running slots' claimable groups; finished slots keep only done groups.
CREATE INDEX job_run_groups_open ON job_run_groups (slot, job) WHERE status <> 'done';
