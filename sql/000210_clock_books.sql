-- A test clock's books: the terms its charges, refunds and disputes are settled into, and the
-- statements and balances their closes write, carry the clock (null: the account's own books).
-- The live worker closes terms and balances without a clock; a clock's advance closes its own, at
-- the clock's instants, through the same job code (src/test-clocks/clock-scope.ts).
ALTER TABLE terms ADD COLUMN test_clock_id text;
ALTER TABLE terms DROP CONSTRAINT terms_account_id_livemode_start_at_key;
-- One term per start instant and book: the natural key that makes opening a term idempotent.
ALTER TABLE terms ADD CONSTRAINT terms_one_per_start UNIQUE NULLS NOT DISTINCT (account_id, livemode, test_clock_id, start_at);

ALTER TABLE balances ADD COLUMN test_clock_id text;
DROP INDEX balances_one_collecting;
-- At most one collecting balance per owner and book: deferred statements merge into it.
CREATE UNIQUE INDEX balances_one_collecting ON balances (account_id, livemode, test_clock_id, owner_ref) NULLS NOT DISTINCT WHERE state = 'collecting';

ALTER TABLE statements ADD COLUMN test_clock_id text;
