-- 0001: the six tables of the engine store. See doc.go for what each table
-- is for and why the writes happen in the order they do.
--
-- Text columns that the store sorts on or compares byte for byte use the "C"
-- collation, so that ordering is the same on every server (whatever its
-- locale) and the same as in the SQLite adapter.

-- Immutable workflow versions. (name, version) is the identity; ir_hash
-- detects a changed definition under an existing version.
CREATE TABLE workflow_versions (
    id               bigserial PRIMARY KEY,
    workflow_name    text COLLATE "C" NOT NULL,
    workflow_version bigint NOT NULL CHECK (workflow_version BETWEEN 0 AND 4294967295),
    ir_hash          text NOT NULL,
    ir               bytea NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_versions_name_version UNIQUE (workflow_name, workflow_version)
);

-- One row per instance, live or finished: inputs, the latest state
-- snapshot, and the outcome. Finished rows stay until the retention sweep.
CREATE TABLE runner_instances (
    instance_id         uuid PRIMARY KEY,
    workflow_version_id bigint NOT NULL REFERENCES workflow_versions (id),
    status              text NOT NULL
        CHECK (status IN ('queued', 'running', 'complete', 'failed', 'cancelled')),
    inputs              bytea NOT NULL,
    state               bytea NOT NULL,
    output              bytea,
    error               text NOT NULL DEFAULT '',
    idempotency_key     text COLLATE "C",
    cancel_requested    boolean NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL DEFAULT now(),
    started_at          timestamptz,
    finished_at         timestamptz,
    updated_at          timestamptz NOT NULL DEFAULT now()
);

-- An idempotency key names at most one instance.
CREATE UNIQUE INDEX runner_instances_idempotency_key
    ON runner_instances (idempotency_key) WHERE idempotency_key IS NOT NULL;
-- ListInstances: newest first, keyset paging on (created_at, instance_id).
CREATE INDEX runner_instances_created
    ON runner_instances (created_at DESC, instance_id DESC);
-- ListInstances filtered by workflow (name → version ids) or by status.
CREATE INDEX runner_instances_workflow_created
    ON runner_instances (workflow_version_id, created_at DESC, instance_id DESC);
CREATE INDEX runner_instances_status_created
    ON runner_instances (status, created_at DESC, instance_id DESC);
-- Retention sweep: finished rows by finish time.
CREATE INDEX runner_instances_finished
    ON runner_instances (finished_at) WHERE finished_at IS NOT NULL;

-- The claim table: one row per live instance. A row is a lease: lock_uuid
-- is the owner, lock_expires_at the end of the lease, term the Raft term of
-- the owner (the fencing token). A completed instance's row is deleted, so
-- the table stays as small as the live work.
CREATE TABLE queued_instances (
    instance_id      uuid PRIMARY KEY REFERENCES runner_instances (instance_id) ON DELETE CASCADE,
    scheduled_at     timestamptz NOT NULL,
    lock_uuid        uuid,
    lock_expires_at  timestamptz,
    term             bigint NOT NULL DEFAULT 0,
    cancel_requested boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CHECK ((lock_uuid IS NULL) = (lock_expires_at IS NULL))
);

-- Claims scan due rows in scheduled_at order.
CREATE INDEX queued_instances_scheduled ON queued_instances (scheduled_at);
-- The hydration half of a claim finds the rows it just stamped by owner.
-- lock_expires_at is deliberately not indexed: lease refreshes (the most
-- frequent write) then change no indexed column and stay HOT updates.
CREATE INDEX queued_instances_lock ON queued_instances (lock_uuid) WHERE lock_uuid IS NOT NULL;

-- Append-only log of finished attempts. (instance, execution, attempt) is
-- unique: a result is recorded once, a replay is ignored. id gives the
-- recording order.
CREATE TABLE runner_actions_done (
    id           bigserial PRIMARY KEY,
    instance_id  uuid NOT NULL REFERENCES runner_instances (instance_id) ON DELETE CASCADE,
    execution_id text COLLATE "C" NOT NULL,
    attempt      bigint NOT NULL CHECK (attempt BETWEEN 0 AND 4294967295),
    ok           boolean NOT NULL,
    output       bytea,
    error        text NOT NULL DEFAULT '',
    worker_id    text NOT NULL DEFAULT '',
    started_at   timestamptz,
    finished_at  timestamptz,
    recorded_at  timestamptz NOT NULL DEFAULT now()
);

-- Dedup, hydration (latest attempt per execution: the index order is the
-- DISTINCT ON order, so hydration reads it without sorting) and the cascade
-- of the retention sweep.
CREATE UNIQUE INDEX runner_actions_done_execution
    ON runner_actions_done (instance_id, execution_id, attempt DESC);

-- Recurring schedules (no Store methods yet; the scheduler will add them).
CREATE TABLE workflow_schedules (
    id               bigserial PRIMARY KEY,
    workflow_name    text COLLATE "C" NOT NULL,
    schedule_name    text COLLATE "C" NOT NULL,
    cron             text NOT NULL DEFAULT '',
    interval_seconds bigint,
    inputs           bytea NOT NULL DEFAULT '',
    allow_duplicate  boolean NOT NULL DEFAULT false,
    status           text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
    next_run_at      timestamptz,
    last_run_at      timestamptz,
    last_instance_id uuid,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_schedules_name UNIQUE (workflow_name, schedule_name)
);
CREATE INDEX workflow_schedules_due ON workflow_schedules (next_run_at) WHERE status = 'active';

-- Rolling throughput and latency per worker pool (no Store methods yet).
CREATE TABLE worker_status (
    pool_id             text COLLATE "C" NOT NULL,
    worker_id           text COLLATE "C" NOT NULL,
    capability          text NOT NULL DEFAULT '',
    node                text NOT NULL DEFAULT '',
    tasks_completed     bigint NOT NULL DEFAULT 0,
    tasks_failed        bigint NOT NULL DEFAULT 0,
    in_flight           integer NOT NULL DEFAULT 0,
    throughput_per_min  double precision NOT NULL DEFAULT 0,
    latency_p50_ms      double precision NOT NULL DEFAULT 0,
    latency_p99_ms      double precision NOT NULL DEFAULT 0,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pool_id, worker_id)
);

-- Autovacuum for the hot tables. The defaults (vacuum at 20% dead rows,
-- throttled) let a queue table bloat long before a vacuum runs; these keep
-- the claim scan short and the visibility map current.
--
-- queued_instances: small, updated on every claim, refresh and schedule
-- change, rows deleted on completion. Vacuum after a few hundred dead rows,
-- unthrottled; leave room on each page for HOT updates.
ALTER TABLE queued_instances SET (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 200,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);
-- runner_instances: one update per progress batch per instance (state
-- snapshots, often TOASTed), then cold once finished.
ALTER TABLE runner_instances SET (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 1,
    toast.autovacuum_vacuum_scale_factor = 0.05
);
-- runner_actions_done: append-only (deleted only by the sweep). Vacuum after
-- inserts too, so the visibility map stays set and index scans stay cheap.
ALTER TABLE runner_actions_done SET (
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_vacuum_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 1
);
