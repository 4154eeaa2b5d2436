-- 0007: signals, parking, pause and retry (issue 36).
--
-- instance_signals holds the signals sent to an instance, in recording
-- order (seq), until the retention sweep deletes the instance (ON DELETE
-- CASCADE). consumed_by names the attempt that took one
-- ("execution#attempt"); NULL while nobody did. An idempotency key names
-- at most one signal of an instance.
CREATE TABLE instance_signals (
    seq             bigserial PRIMARY KEY,
    instance_id     uuid NOT NULL REFERENCES runner_instances (instance_id) ON DELETE CASCADE,
    name            text COLLATE "C" NOT NULL,
    payload         bytea NOT NULL,
    idempotency_key text COLLATE "C",
    created_at      timestamptz NOT NULL DEFAULT now(),
    consumed_by     text
);
-- ListSignals and the cascade of the sweep.
CREATE INDEX instance_signals_instance ON instance_signals (instance_id, seq);
-- A claim reads the unconsumed signals of what it claimed; RecordSignal
-- counts them against its cap.
CREATE INDEX instance_signals_pending ON instance_signals (instance_id, seq) WHERE consumed_by IS NULL;
CREATE UNIQUE INDEX instance_signals_key
    ON instance_signals (instance_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- wake counts what may change a parked instance's mind: every signal,
-- pause or resume and cancellation request bumps it. A park compares it
-- with the value its owner acted on, in the same UPDATE that releases the
-- lease. It is not indexed, so bumping it keeps updates HOT.
ALTER TABLE queued_instances ADD COLUMN wake bigint NOT NULL DEFAULT 0;

-- paused: SetPaused's flag, cleared when the instance finishes. runs:
-- 1, then one more per ReopenInstance (retry). Adding columns with
-- constant defaults rewrites nothing.
ALTER TABLE runner_instances
    ADD COLUMN paused boolean NOT NULL DEFAULT false,
    ADD COLUMN runs   integer NOT NULL DEFAULT 1 CHECK (runs >= 1);
