-- 0018 (the twin of migrations/postgres/0018_one_record.sql): one record
-- per change (docs/events.md, "One record, numbered at insert"). A
-- transaction's timeline entry and the event integrators are told of it
-- are one row of events, inserted with the change; events of no
-- transaction are rows without transaction_id.
--
-- SQLite has one writer: seq, the row id, is taken in commit order, and
-- nothing numbers the rows afterwards. A reader shows only the rows up to
-- the store's told horizon, the highest number committed with synchronous
-- FULL (a relaxed write's row waits for the next durable commit, which
-- flushes it: sqlstore/commit.go). AUTOINCREMENT: a number is never taken
-- twice.
--
-- merchant_id is NULL for a timeline entry integrators are not told of
-- (and for one whose event expired). The old timeline entries become rows
-- of their own (negative numbers, never told); the old events keep theirs.
CREATE TABLE events_new (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    merchant_id    TEXT,
    type           TEXT NOT NULL DEFAULT '',
    terminal_id    TEXT NOT NULL DEFAULT '',
    created_at     BIGINT NOT NULL,
    data           TEXT,
    transaction_id TEXT,
    version        BIGINT,
    kind           TEXT NOT NULL DEFAULT '',
    actor          TEXT NOT NULL DEFAULT '',
    status_before  TEXT NOT NULL DEFAULT '',
    status_after   TEXT NOT NULL DEFAULT '',
    detail         TEXT NOT NULL DEFAULT ''
);
INSERT INTO events_new (seq, merchant_id, type, terminal_id, created_at, data)
    SELECT COALESCE(seq, id), merchant_id, type, terminal_id, created_at, data FROM events;
INSERT INTO events_new (seq, created_at, transaction_id, version, kind, actor, status_before, status_after, detail)
    SELECT -row_number() OVER (ORDER BY transaction_id, version), at, transaction_id, version, kind, actor,
        status_before, status_after, detail FROM transaction_events;
DROP TABLE events;
DROP TABLE transaction_events;
ALTER TABLE events_new RENAME TO events;
CREATE UNIQUE INDEX events_transaction ON events(transaction_id, version);
CREATE INDEX events_merchant_seq ON events(merchant_id, seq) WHERE merchant_id IS NOT NULL;
CREATE INDEX events_created ON events(created_at);
CREATE VIEW transaction_events AS
    SELECT transaction_id, version, created_at AS at, kind, actor, status_before, status_after, detail
    FROM events WHERE transaction_id IS NOT NULL;
