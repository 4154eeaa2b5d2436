-- 0005: when a running instance reached GATHERING (no task waits for its
-- predecessors any more), as its owner recorded it with its progress.
-- Reads on every server show GATHERING from the store once it is set, so
-- an instance's state never goes back when its owner changes. Adding a
-- nullable column rewrites nothing.
ALTER TABLE runner_instances ADD COLUMN gathering_at timestamptz;
