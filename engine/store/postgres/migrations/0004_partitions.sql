-- 0004: partitions. Every instance belongs to one partition for life
-- (engine.PartitionOf its id); the queue row keeps it, and rows queued
-- before this migration are partition 0 (a mesh of one partition).
-- Adding a NOT NULL column with a constant default rewrites nothing.
ALTER TABLE queued_instances ADD COLUMN partition integer NOT NULL DEFAULT 0;

-- No index on partition. A claim scoped to some partitions walks
-- queued_instances_scheduled in due order like any claim and filters the
-- partition on the row: an index on (partition, scheduled_at) was chosen
-- by the planner only when the listed partitions held next to nothing
-- due (an array of partitions loses the due order, so it sorts them
-- all), while every claim, submission and schedule change, none of them
-- HOT, paid one more index entry per row (BenchmarkClaimHydrate1000:
-- 12.7 ms without, 14.7 ms with).

-- One row per fenced partition: its owner (the lock id of a runloop) and
-- the epoch it fenced at. Writes of any other runloop on the partition's
-- instances are refused (see doc.go); a partition without a row is gated
-- by leases and terms alone.
CREATE TABLE partitions (
    partition integer PRIMARY KEY CHECK (partition >= 0),
    owner     uuid NOT NULL,
    epoch     bigint NOT NULL CHECK (epoch >= 0),
    fenced_at timestamptz NOT NULL DEFAULT now()
);
