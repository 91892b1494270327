-- The trace context of each task log entry (engine.LogEntry.Trace, SPEC
-- H2) for stores opened with pgstore.Options.Log: the W3C traceparent of
-- the write that made the revision, when it was made under a sampled
-- span, NULL otherwise. A push delivery made by another instance, or
-- after a restart, carries the writer's trace on from it. Run after 005;
-- running it again is harmless. A nullable column without a default: the
-- ALTER changes the catalog only (an instant ACCESS EXCLUSIVE lock on the
-- log table), existing rows read NULL.
ALTER TABLE public.a2a_task_log ADD COLUMN IF NOT EXISTS trace text;
