-- kessai_instant_ms (000040) with a body PostgreSQL can inline. An IMMUTABLE SQL function is
-- inlined into the statement that calls it only when its body is immutable too, and
-- `timestamptz + interval` is STABLE: every call was a separate SQL-function execution, about
-- 4.4 µs a row per column (a million calls 4.9 s against 0.5–1.0 s written inline), paid by each
-- bulk write of instants (charges, subscription changes, events). The milliseconds are now added
-- to the instant read at UTC offset zero (`timezone(interval, …)` both ways, immutable): the same
-- instant for every bigint (checked against the old body over millions of values, negative and
-- far-future ones included), so rows and results do not change. Still IMMUTABLE for Citus.
CREATE OR REPLACE FUNCTION kessai_instant_ms(ms bigint) RETURNS timestamptz
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT timezone(interval '0', timezone(interval '0', to_timestamp(ms / 1000)) + ms % 1000 * interval '1 millisecond') $$;
