-- 0008: signals, parking, pause and retry, as in the Postgres adapter's
-- 0007. seq is AUTOINCREMENT, so a seq is never used twice in a store,
-- even after the sweep deleted the newest signals (signals are rare: the
-- sqlite_sequence update that 0004 removed from results costs nothing
-- here).
CREATE TABLE instance_signals (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    instance_id     TEXT NOT NULL REFERENCES runner_instances (instance_id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    payload         BLOB NOT NULL,
    idempotency_key TEXT,
    created_at      INTEGER NOT NULL,
    consumed_by     TEXT
) STRICT;
CREATE INDEX instance_signals_instance ON instance_signals (instance_id, seq);
CREATE INDEX instance_signals_pending ON instance_signals (instance_id, seq) WHERE consumed_by IS NULL;
CREATE UNIQUE INDEX instance_signals_key
    ON instance_signals (instance_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

ALTER TABLE queued_instances ADD COLUMN wake INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runner_instances ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runner_instances ADD COLUMN runs INTEGER NOT NULL DEFAULT 1 CHECK (runs >= 1);
