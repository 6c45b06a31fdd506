-- 0017 (the same in both dialects but for the trigger's body): day closes (instore.Batch, docs/decisions.md "Day close"). A close
-- is stored PENDING when it is sent to its terminal (one PENDING close per
-- terminal ID), and ends CLOSED with the terminal's batch or FAILED (WP25,
-- WP23; a late answer still closes it). Its window is (opened_at,
-- closed_at]; report holds the terminal's list and the comparison as JSON
-- ({"items", "terminalTotals", "serviceTotals", "matched", "differences"}).
CREATE TABLE batches (
    id            TEXT PRIMARY KEY,
    merchant_id   TEXT NOT NULL REFERENCES merchants(id),
    terminal_id   TEXT NOT NULL REFERENCES terminals(terminal_id),
    device_serial TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('PENDING', 'CLOSED', 'FAILED')),
    number        BIGINT NOT NULL DEFAULT 0,   -- the terminal's batch number (0 until it answers)
    opened_at     BIGINT NOT NULL,             -- unix microseconds
    closed_at     BIGINT NOT NULL,
    error_id      INTEGER,                     -- WP25 or WP23 when it failed
    message_id    TEXT NOT NULL DEFAULT '',    -- the terminal's batch message applied
    reported_at   BIGINT,
    report        TEXT NOT NULL DEFAULT '{}'
);
-- One running close per terminal ID; what a purchase and a restart look for.
CREATE UNIQUE INDEX batches_pending ON batches(terminal_id) WHERE state = 'PENDING';
-- GET /batches, newest first, of a merchant or of one terminal ID; the
-- latest CLOSED batch of a terminal ID (the next window's start).
CREATE INDEX batches_merchant_closed ON batches(merchant_id, closed_at, id);
CREATE INDEX batches_terminal_closed ON batches(terminal_id, closed_at, id);

-- A terminal ID closing its batch is busy as if a transaction ran on it: a
-- PENDING transaction is refused (the store's ErrConflict, as
-- transactions_one_active refuses a second one) while the terminal ID has
-- a PENDING close, checked inside the insert itself, so a purchase pays no
-- read of its own for it. The close's creation (CreateBatch) refuses a
-- terminal ID with a PENDING transaction; SQLite's writes are serial, so
-- the two never both miss the other.
CREATE TRIGGER transactions_not_closing BEFORE INSERT ON transactions
    WHEN NEW.status_id = 14 AND EXISTS (SELECT 1 FROM batches WHERE terminal_id = NEW.terminal_id AND state = 'PENDING')
BEGIN
    SELECT RAISE(ABORT, 'the terminal ID is closing its batch');
END;
