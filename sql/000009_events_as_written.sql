-- The outbox keeps each event's document as the engine wrote it (json, not jsonb). Nothing queries
-- inside event documents; they are only stored, listed and sent. Converting to jsonb on every
-- insert was about 45 % of an event INSERT (20,000 renewal events: 350 ms as jsonb, 185–270 ms as
-- json), and events are the largest write of every renewal, release and sign-up. Readers get the
-- same document; its keys stay in the order the renderer gave them.
ALTER TABLE events ALTER COLUMN data TYPE json USING data::json;
