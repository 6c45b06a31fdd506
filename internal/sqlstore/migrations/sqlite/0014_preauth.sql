-- 0014: pre-authorisation (instore.Authorization). The new transaction
-- types PRE_AUTH, INCREMENT, CAPTURE and VOID; an approved PRE_AUTH's
-- authorisation: auth_state (OPEN, CAPTURED, VOIDED, EXPIRED; NULL: none),
-- authorized_amount, captured_amount and auth_expires_at; by_timer marks
-- the VOID the service sent when its pre-auth expired. The OPEN ones are
-- read by their expiry (recovery and the sweep void them).
--
-- SQLite cannot change a CHECK constraint in place: the table is rebuilt
-- (https://www.sqlite.org/lang_altertable.html, "other kinds of table
-- schema changes"), its foreign keys checked at the commit, when the new
-- table holds every row again, and its indexes made anew.
PRAGMA defer_foreign_keys = ON;
CREATE TABLE transactions_new (
    id                TEXT PRIMARY KEY,           -- onlineAPIRefId, time-sortable
    merchant_id       TEXT NOT NULL REFERENCES merchants(id),
    terminal_id       TEXT NOT NULL REFERENCES terminals(terminal_id),
    type              TEXT NOT NULL CHECK (type IN ('PURCHASE', 'REFUND', 'REVERSAL', 'PRE_AUTH', 'INCREMENT', 'CAPTURE', 'VOID')),
    amount            BIGINT NOT NULL,
    cashback_amount   BIGINT NOT NULL DEFAULT 0,
    vat_amount        BIGINT,
    currency          TEXT NOT NULL,
    payment_method_id INTEGER,
    ecr_reference     TEXT,
    print_receipt     INTEGER NOT NULL DEFAULT 0,
    status_id         INTEGER NOT NULL,
    error_id          INTEGER,
    progress          TEXT NOT NULL,
    version           BIGINT NOT NULL DEFAULT 1,
    original_id       TEXT REFERENCES transactions(id), -- refund, reversal, increment, capture or void of
    reverses          TEXT REFERENCES transactions(id),
    reversed_by       TEXT REFERENCES transactions(id),
    result            TEXT,                       -- JSON as the terminal reported it
    result_message_id TEXT,                       -- the terminal's message id of the applied result
    delivered         INTEGER NOT NULL DEFAULT 0, -- command written to a session
    created_at        BIGINT NOT NULL,
    acknowledged_at   BIGINT,
    deadline_at       BIGINT,
    completed_at      BIGINT,
    device_serial     TEXT,
    cancel_requested  INTEGER NOT NULL DEFAULT 0,
    confirm_within    INTEGER,
    confirm_state     TEXT,
    confirm_deadline  BIGINT,
    confirmed_at      BIGINT,
    tip               TEXT,
    tip_amount        BIGINT NOT NULL DEFAULT 0,
    auth_state        TEXT,
    authorized_amount BIGINT NOT NULL DEFAULT 0,
    captured_amount   BIGINT NOT NULL DEFAULT 0,
    auth_expires_at   BIGINT,
    by_timer          INTEGER NOT NULL DEFAULT 0
);
INSERT INTO transactions_new (id, merchant_id, terminal_id, type, amount, cashback_amount, vat_amount, currency,
    payment_method_id, ecr_reference, print_receipt, status_id, error_id, progress, version, original_id, reverses,
    reversed_by, result, result_message_id, delivered, created_at, acknowledged_at, deadline_at, completed_at,
    device_serial, cancel_requested, confirm_within, confirm_state, confirm_deadline, confirmed_at, tip, tip_amount)
SELECT id, merchant_id, terminal_id, type, amount, cashback_amount, vat_amount, currency,
    payment_method_id, ecr_reference, print_receipt, status_id, error_id, progress, version, original_id, reverses,
    reversed_by, result, result_message_id, delivered, created_at, acknowledged_at, deadline_at, completed_at,
    device_serial, cancel_requested, confirm_within, confirm_state, confirm_deadline, confirmed_at, tip, tip_amount
FROM transactions;
DROP TABLE transactions;
ALTER TABLE transactions_new RENAME TO transactions;
CREATE UNIQUE INDEX transactions_one_active ON transactions(terminal_id) WHERE status_id = 14;
CREATE INDEX transactions_merchant_created ON transactions(merchant_id, created_at, id);
CREATE INDEX transactions_terminal_created ON transactions(terminal_id, created_at, id);
CREATE INDEX transactions_original ON transactions(original_id) WHERE original_id IS NOT NULL;
CREATE INDEX transactions_merchant_terminal_created ON transactions(merchant_id, terminal_id, created_at, id);
CREATE INDEX transactions_merchant_status_created ON transactions(merchant_id, status_id, created_at, id);
CREATE INDEX transactions_merchant_terminal_status_created ON transactions(merchant_id, terminal_id, status_id, created_at, id);
CREATE INDEX transactions_merchant_ecr_created ON transactions(merchant_id, ecr_reference, created_at, id) WHERE ecr_reference IS NOT NULL;
CREATE INDEX transactions_unconfirmed ON transactions(confirm_deadline) WHERE confirm_state = 'PENDING';
CREATE INDEX transactions_preauth_open ON transactions(auth_expires_at, id) WHERE auth_state = 'OPEN';
