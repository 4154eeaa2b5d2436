-- 0002: what the scheduler needs of workflow_schedules. A schedule's name
-- is unique in the mesh (roboctl schedules pause NAME); it may pin a
-- workflow version (0: the latest at each run); runs are delayed by a
-- jitter fixed per slot; the last skipped slot says why.
ALTER TABLE workflow_schedules ADD COLUMN workflow_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflow_schedules ADD COLUMN jitter_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflow_schedules ADD COLUMN last_skipped TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX workflow_schedules_schedule_name ON workflow_schedules (schedule_name);
