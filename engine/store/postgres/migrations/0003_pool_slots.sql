-- 0003: worker_status holds one row per worker pool (worker_id ''), as the
-- leader last collected it from the pool's node; slots gives utilisation
-- (in_flight / slots).
ALTER TABLE worker_status ADD COLUMN slots INTEGER NOT NULL DEFAULT 0;
