-- The task log (engine.LogStore, SPEC K7) for stores opened with
-- pgstore.Options.Log: one row per task revision, written in the same
-- statement as the revision, deleted with its task.
CREATE TABLE IF NOT EXISTS public.a2a_task_log (
	task_id  text        NOT NULL REFERENCES public.a2a_tasks (id) ON DELETE CASCADE,
	revision bigint      NOT NULL,
	at       timestamptz NOT NULL,
	kind     smallint    NOT NULL,
	state    text        NOT NULL,
	body     bytea       NOT NULL,
	PRIMARY KEY (task_id, revision)
);
