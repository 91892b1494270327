DROP TRIGGER a2a_task_counts_update ON a2a_tasks;
CREATE TRIGGER a2a_task_counts_update AFTER UPDATE OF id, state, context_id, owner ON a2a_tasks FOR EACH ROW
  WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.context_id IS DISTINCT FROM NEW.context_id OR OLD.owner IS DISTINCT FROM NEW.owner OR OLD.id IS DISTINCT FROM NEW.id)
  EXECUTE FUNCTION a2a_task_counts_on_update();
CREATE FUNCTION a2a_task_counts_on_insert_row() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	INSERT INTO a2a_task_count_deltas (shard, state, context_id, owner, d) VALUES
		(0::smallint, NEW.state, NEW.context_id, NEW.owner, 1);
	RETURN NULL;
END
$fn$;
DROP TRIGGER a2a_task_counts_insert ON a2a_tasks;
CREATE TRIGGER a2a_task_counts_insert AFTER INSERT ON a2a_tasks FOR EACH ROW EXECUTE FUNCTION a2a_task_counts_on_insert_row();
CREATE OR REPLACE FUNCTION a2a_task_counts_on_update() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	INSERT INTO a2a_task_count_deltas (shard, state, context_id, owner, d) VALUES
		(0::smallint, OLD.state, OLD.context_id, OLD.owner, -1),
		(0::smallint, NEW.state, NEW.context_id, NEW.owner, 1);
	RETURN NULL;
END
$fn$;
