-- a2astore migration 006: the status-ordered indexes (SPEC C7), for an
-- externally managed schema (pgstore.Options{ExternalSchema: true}). Run it
-- after 003_owner_and_counts.sql (the second index leads with its owner
-- column), with psql:
--
--   psql "$DSN" -v ON_ERROR_STOP=1 -f pgstore/migrations/006_status_indexes.sql
--
-- Do not pass --single-transaction, nor wrap the file in BEGIN/COMMIT:
-- CREATE INDEX CONCURRENTLY runs only outside a transaction block, each
-- statement on its own (psql -f sends them one by one).
--
-- It is written for schema public; for another schema replace "public."
-- (quoted or as quote_ident writes the name). Running it again is harmless:
-- IF NOT EXISTS skips an index that exists. Startup (P3) checks both indexes
-- by definition, whatever their names, and that they are valid, and names
-- this file when one is missing. The managed schema (the default) runs the
-- same statements at startup.
--
-- What it buys: a page filtered by status, alone or with the owner (every
-- list under engine/authz's OwnerPolicy), seeks one of these indexes and
-- reads PageSize+1 entries, however rare the status and whatever the
-- planner's statistics; without them such a page reads every task newer
-- than the page's tasks. A page with a context as well reads the context's
-- index (001) or the owner's in the context (003) and filters by status.
--
-- Locks: CREATE INDEX CONCURRENTLY takes SHARE UPDATE EXCLUSIVE on
-- a2a_tasks: reads and writes go on while it builds; it waits for the
-- transactions already running when it starts, reads the table twice, and
-- two builds on the table run one after the other. If a build is
-- interrupted (cancelled, connection lost) it leaves an INVALID index of
-- that name, which IF NOT EXISTS then keeps and startup reports: drop it
-- with DROP INDEX CONCURRENTLY public.<name>, then run the file again.
-- Each index costs every insert and every update of a task one index
-- entry (see docs/postgres.md for the measured write cost).

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_a2a_tasks_state_updated
  ON public.a2a_tasks (state, updated_at DESC, id COLLATE "C" DESC);

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_a2a_tasks_owner_state_updated
  ON public.a2a_tasks (owner, state, updated_at DESC, id COLLATE "C" DESC);
