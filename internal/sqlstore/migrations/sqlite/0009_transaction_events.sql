-- 0009: a transaction's timeline (instore.TransactionEvent): one row per
-- change, inserted in the database transaction (or the one statement) that
-- writes the change, so the timeline never disagrees with the state.
-- version is the transaction's version after the change. docs/lifecycle.md.
CREATE TABLE transaction_events (
    transaction_id TEXT NOT NULL,
    version        BIGINT NOT NULL,
    at             BIGINT NOT NULL,          -- unix microseconds
    kind           TEXT NOT NULL,
    actor          TEXT NOT NULL,
    status_before  TEXT NOT NULL DEFAULT '',
    status_after   TEXT NOT NULL,
    detail         TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (transaction_id, version)
) WITHOUT ROWID; -- one b-tree, keyed as it is read (a transaction's events in order)
