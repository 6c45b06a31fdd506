-- 0021: on PostgreSQL, the order of a transaction's events within its
-- number (migrations/postgres/0021_event_order.sql). SQLite numbers
-- events by their row id, in the order they are inserted: nothing to
-- change here.
SELECT 1;
