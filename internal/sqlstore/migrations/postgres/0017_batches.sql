-- 0017 (the same in both dialects): day closes (instore.Batch, docs/decisions.md "Day close"). A close
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
