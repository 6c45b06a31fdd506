-- 0018: one record per change (docs/events.md, "One record, numbered at
-- insert"). A transaction's timeline entry and the event integrators are
-- told of it are one row of events, inserted with the change; events of no
-- transaction (a terminal's session, a print job, ...) are rows without
-- transaction_id.
--
-- seq is taken at insert: the inserting transaction's id (xid8) shifted
-- left by 20 bits, plus the low 20 bits of a sequence (the order within
-- it). Nothing numbers the rows afterwards. A reader shows only the rows
-- below the store's told horizon: the oldest transaction still running
-- when it looked (pg_snapshot_xmin), once the WAL holding everything below
-- it is on disk (sqlstore/events.go). Every event below that number has
-- committed or never will, so a reader that saw seq N has seen every
-- event below N.
--
-- merchant_id is NULL for a timeline entry integrators are not told of
-- (and for one whose event expired): the stream's index holds only the
-- told ones. The old timeline entries become rows of their own (negative
-- numbers, never told); the old events keep their numbers, which are
-- below every new one.
CREATE SEQUENCE events_order;
CREATE TABLE events_new (
    seq            BIGINT PRIMARY KEY
                   DEFAULT ((pg_current_xact_id()::text::bigint << 20) | (nextval('events_order') & 1048575)),
    merchant_id    TEXT,            -- NULL: integrators are not told of it
    type           TEXT NOT NULL DEFAULT '',
    terminal_id    TEXT NOT NULL DEFAULT '',
    created_at     BIGINT NOT NULL, -- unix microseconds (the timeline's "at")
    data           TEXT,            -- the resource as the API showed it (JSON)
    transaction_id TEXT,            -- NULL: an event of no transaction
    version        BIGINT,
    kind           TEXT NOT NULL DEFAULT '',
    actor          TEXT NOT NULL DEFAULT '',
    status_before  TEXT NOT NULL DEFAULT '',
    status_after   TEXT NOT NULL DEFAULT '',
    detail         TEXT NOT NULL DEFAULT ''
);
UPDATE events SET seq = n.top + n.r
    FROM (SELECT id, row_number() OVER (ORDER BY id) AS r, (SELECT COALESCE(MAX(seq), 0) FROM events) AS top
          FROM events WHERE seq IS NULL) n
    WHERE events.id = n.id;
INSERT INTO events_new (seq, merchant_id, type, terminal_id, created_at, data)
    SELECT seq, merchant_id, type, terminal_id, created_at, data FROM events;
INSERT INTO events_new (seq, created_at, transaction_id, version, kind, actor, status_before, status_after, detail)
    SELECT -row_number() OVER (ORDER BY transaction_id, version), at, transaction_id, version, kind, actor,
        status_before, status_after, detail FROM transaction_events;
DROP TABLE events;
DROP TABLE transaction_events;
ALTER TABLE events_new RENAME TO events;
ALTER INDEX events_new_pkey RENAME TO events_pkey;
ALTER SEQUENCE events_order OWNED BY events.seq;
-- A transaction's timeline, in order.
CREATE UNIQUE INDEX events_transaction ON events(transaction_id, version);
-- A merchant's stream (the told rows only).
CREATE INDEX events_merchant_seq ON events(merchant_id, seq) WHERE merchant_id IS NOT NULL;
-- Expiry by age: rows are inserted in time order, so a block range index
-- is enough and costs an insert next to nothing.
CREATE INDEX events_created ON events USING brin (created_at);
-- What the timeline was, for reading (tests, operators' queries).
CREATE VIEW transaction_events AS
    SELECT transaction_id, version, created_at AS at, kind, actor, status_before, status_after, detail
    FROM events WHERE transaction_id IS NOT NULL;
