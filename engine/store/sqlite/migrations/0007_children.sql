-- 0007: child workflows: the task attempt that started a child instance
-- (its parent instance, execution and attempt), as in the Postgres
-- adapter's 0006. NULL for an instance that was submitted.
ALTER TABLE runner_instances ADD COLUMN parent_instance_id TEXT;
ALTER TABLE runner_instances ADD COLUMN parent_execution TEXT;
ALTER TABLE runner_instances ADD COLUMN parent_attempt INTEGER CHECK (parent_attempt BETWEEN 0 AND 4294967295);
