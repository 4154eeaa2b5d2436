-- 0006: when a running instance reached GATHERING (Unix microseconds), as
-- its owner recorded it with its progress; as in the Postgres adapter's
-- 0005.
ALTER TABLE runner_instances ADD COLUMN gathering_at INTEGER;
