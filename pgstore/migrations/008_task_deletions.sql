-- The deletions the task log remembers (engine.LogStore.Deleted, SPEC K7)
-- for stores opened with pgstore.Options.Log: one row per task ID deleted
-- (Delete, retention), the mark of its last deletion, kept for the log
-- retention (TrimLog forgets older marks through the index on at). A log
-- reader that started before its task existed tells by it a task created
-- and deleted since from one not created yet. Run after 005.
CREATE TABLE IF NOT EXISTS public.a2a_task_deletions (
	task_id text        NOT NULL PRIMARY KEY,
	at      timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS a2a_task_deletions_at ON public.a2a_task_deletions (at);
