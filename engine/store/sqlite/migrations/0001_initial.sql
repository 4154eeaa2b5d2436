-- 0001: the six tables of the engine store, in SQLite's dialect. The
-- Postgres adapter's migration (engine/store/postgres/migrations) is the
-- reference; this one differs only where SQLite does:
--   * STRICT tables; uuids are TEXT (canonical lowercase form), booleans are
--     INTEGER 0/1, times are INTEGER microseconds since the Unix epoch (UTC),
--     the precision Postgres keeps;
--   * TEXT compares in byte order (BINARY), like COLLATE "C" in Postgres;
--   * no autovacuum settings (SQLite has no vacuum daemon; deleted pages are
--     reused).

CREATE TABLE workflow_versions (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_name    TEXT NOT NULL,
    workflow_version INTEGER NOT NULL CHECK (workflow_version BETWEEN 0 AND 4294967295),
    ir_hash          TEXT NOT NULL,
    ir               BLOB NOT NULL,
    created_at       INTEGER NOT NULL,
    UNIQUE (workflow_name, workflow_version)
) STRICT;

CREATE TABLE runner_instances (
    instance_id         TEXT PRIMARY KEY,
    workflow_version_id INTEGER NOT NULL REFERENCES workflow_versions (id),
    status              TEXT NOT NULL
        CHECK (status IN ('queued', 'running', 'complete', 'failed', 'cancelled')),
    inputs              BLOB NOT NULL,
    state               BLOB NOT NULL,
    output              BLOB,
    error               TEXT NOT NULL DEFAULT '',
    idempotency_key     TEXT,
    cancel_requested    INTEGER NOT NULL DEFAULT 0,
    created_at          INTEGER NOT NULL,
    started_at          INTEGER,
    finished_at         INTEGER,
    updated_at          INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX runner_instances_idempotency_key
    ON runner_instances (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX runner_instances_created
    ON runner_instances (created_at DESC, instance_id DESC);
CREATE INDEX runner_instances_workflow_created
    ON runner_instances (workflow_version_id, created_at DESC, instance_id DESC);
CREATE INDEX runner_instances_status_created
    ON runner_instances (status, created_at DESC, instance_id DESC);
CREATE INDEX runner_instances_finished
    ON runner_instances (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE queued_instances (
    instance_id      TEXT PRIMARY KEY REFERENCES runner_instances (instance_id) ON DELETE CASCADE,
    scheduled_at     INTEGER NOT NULL,
    lock_uuid        TEXT,
    lock_expires_at  INTEGER,
    term             INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    CHECK ((lock_uuid IS NULL) = (lock_expires_at IS NULL))
) STRICT;
CREATE INDEX queued_instances_scheduled ON queued_instances (scheduled_at);
CREATE INDEX queued_instances_lock ON queued_instances (lock_uuid) WHERE lock_uuid IS NOT NULL;

CREATE TABLE runner_actions_done (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    instance_id  TEXT NOT NULL REFERENCES runner_instances (instance_id) ON DELETE CASCADE,
    execution_id TEXT NOT NULL,
    attempt      INTEGER NOT NULL CHECK (attempt BETWEEN 0 AND 4294967295),
    ok           INTEGER NOT NULL,
    output       BLOB,
    error        TEXT NOT NULL DEFAULT '',
    worker_id    TEXT NOT NULL DEFAULT '',
    started_at   INTEGER,
    finished_at  INTEGER,
    recorded_at  INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX runner_actions_done_execution
    ON runner_actions_done (instance_id, execution_id, attempt DESC);

-- Recurring schedules (no Store methods yet).
CREATE TABLE workflow_schedules (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_name    TEXT NOT NULL,
    schedule_name    TEXT NOT NULL,
    cron             TEXT NOT NULL DEFAULT '',
    interval_seconds INTEGER,
    inputs           BLOB NOT NULL DEFAULT x'',
    allow_duplicate  INTEGER NOT NULL DEFAULT 0,
    status           TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
    next_run_at      INTEGER,
    last_run_at      INTEGER,
    last_instance_id TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (workflow_name, schedule_name)
) STRICT;
CREATE INDEX workflow_schedules_due ON workflow_schedules (next_run_at) WHERE status = 'active';

-- Rolling throughput and latency per worker pool (no Store methods yet).
CREATE TABLE worker_status (
    pool_id            TEXT NOT NULL,
    worker_id          TEXT NOT NULL,
    capability         TEXT NOT NULL DEFAULT '',
    node               TEXT NOT NULL DEFAULT '',
    tasks_completed    INTEGER NOT NULL DEFAULT 0,
    tasks_failed       INTEGER NOT NULL DEFAULT 0,
    in_flight          INTEGER NOT NULL DEFAULT 0,
    throughput_per_min REAL NOT NULL DEFAULT 0,
    latency_p50_ms     REAL NOT NULL DEFAULT 0,
    latency_p99_ms     REAL NOT NULL DEFAULT 0,
    updated_at         INTEGER NOT NULL,
    PRIMARY KEY (pool_id, worker_id)
) STRICT;
