-- Optional, for externally managed schemas: refuse stored times that no page
-- cursor can represent (before 1970, after 2^63-1 µs, ±infinity), as a
-- managed schema does. NOT VALID: rows already outside keep their times;
-- the store's startup names them. Idempotent.
ALTER TABLE "public"."a2a_tasks"
  DROP CONSTRAINT IF EXISTS a2a_tasks_updated_at_range,
  ADD CONSTRAINT a2a_tasks_updated_at_range
    CHECK (updated_at >= '1970-01-01 00:00:00+00' AND updated_at <= '294247-01-10 04:00:54.775807+00') NOT VALID;
