-- 0005: partitions, as in the Postgres adapter's 0004. Every instance
-- belongs to one partition for life (engine.PartitionOf its id); the queue
-- row keeps it, and rows queued before this migration are partition 0.
ALTER TABLE queued_instances ADD COLUMN partition INTEGER NOT NULL DEFAULT 0;

-- No index on partition, as in Postgres: a claim scoped to some
-- partitions walks queued_instances_scheduled in due order and filters.

-- One row per fenced partition: its owner (the lock id of a runloop) and
-- the epoch it fenced at. Writes of any other runloop on the partition's
-- instances are refused; a partition without a row is gated by leases and
-- terms alone.
CREATE TABLE partitions (
    partition INTEGER PRIMARY KEY CHECK (partition >= 0),
    owner     TEXT NOT NULL,
    epoch     INTEGER NOT NULL CHECK (epoch >= 0),
    fenced_at INTEGER NOT NULL
) STRICT;
