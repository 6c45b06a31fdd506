-- 0021: the order of a transaction's events within its number (0018). The
-- low 20 bits of seq were the low bits of a sequence shared by every
-- transaction: when the sequence passed a multiple of 2^20 between two
-- events of one transaction, the later event got the lower number, and a
-- reader was told the two in the wrong order (once in about a million
-- events, for a change of two transactions or a batch of one terminal's
-- events). They are now a count of the transaction's own events, kept in a
-- setting local to the transaction (set_config(..., true): it starts again
-- at 1 in the next transaction, and a rolled-back savepoint takes back
-- what it counted, with its rows).
-- The ALTER waits for every transaction on events (each store write locks
-- it first), and every write would queue behind the ALTER meanwhile: a
-- node that cannot take the lock soon fails to start and is started
-- again, instead of stalling the other nodes' writes.
SET LOCAL lock_timeout = '10s';
CREATE FUNCTION events_order_in_xact() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT set_config('instore.events_order',
        (COALESCE(NULLIF(current_setting('instore.events_order', true), ''), '0')::bigint + 1)::text, true)::bigint
$$;
ALTER TABLE events ALTER COLUMN seq
    SET DEFAULT ((pg_current_xact_id()::text::bigint << 20) | (events_order_in_xact() & 1048575));
DROP SEQUENCE events_order;
