DROP TRIGGER a2a_task_counts_update ON a2a_tasks;
CREATE TRIGGER a2a_task_counts_update AFTER UPDATE OF id, state, context_id, owner ON a2a_tasks FOR EACH ROW
  WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.context_id IS DISTINCT FROM NEW.context_id OR OLD.owner IS DISTINCT FROM NEW.owner OR OLD.id IS DISTINCT FROM NEW.id)
  EXECUTE FUNCTION a2a_task_counts_on_update();
