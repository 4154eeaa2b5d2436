-- 0006: child workflows. A task whose body is another workflow starts a
-- child instance per attempt; the child's row names that attempt for
-- life (engine.ParentRef): the parent instance, its execution ("scan[2]")
-- and the attempt. NULL for an instance that was submitted. Adding
-- nullable columns rewrites nothing.
ALTER TABLE runner_instances
    ADD COLUMN parent_instance_id uuid,
    ADD COLUMN parent_execution   text COLLATE "C",
    ADD COLUMN parent_attempt     bigint CHECK (parent_attempt BETWEEN 0 AND 4294967295);
