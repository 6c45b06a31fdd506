-- 0001: the whole schema the service is designed around. Times are BIGINT
-- unix microseconds (UTC) in both dialects; ids are TEXT. Booleans are
-- INTEGER 0/1 here and BOOLEAN in PostgreSQL.

CREATE TABLE customers (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE TABLE merchants (
    id          TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers(id),
    name        TEXT NOT NULL,
    active      INTEGER NOT NULL DEFAULT 1,
    created_at  BIGINT NOT NULL
);
CREATE INDEX merchants_customer ON merchants(customer_id, created_at);

-- OAuth clients. surface 'online' belongs to a merchant, 'access' to a customer.
CREATE TABLE api_clients (
    id          TEXT PRIMARY KEY,
    surface     TEXT NOT NULL CHECK (surface IN ('online', 'access')),
    customer_id TEXT NOT NULL REFERENCES customers(id),
    merchant_id TEXT REFERENCES merchants(id),
    name        TEXT NOT NULL DEFAULT '',
    secret_hash BLOB NOT NULL,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT,
    CHECK ((surface = 'online') = (merchant_id IS NOT NULL))
);
CREATE INDEX api_clients_customer ON api_clients(customer_id, created_at);

CREATE TABLE subscription_keys (
    id          TEXT PRIMARY KEY,
    surface     TEXT NOT NULL CHECK (surface IN ('online', 'access')),
    customer_id TEXT NOT NULL REFERENCES customers(id),
    merchant_id TEXT REFERENCES merchants(id),
    prefix      TEXT NOT NULL,
    key_hash    BLOB NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT,
    CHECK ((surface = 'online') = (merchant_id IS NOT NULL))
);
CREATE INDEX subscription_keys_customer ON subscription_keys(customer_id, created_at);

-- Named service settings: the token signing key, terminal-ID counters.
CREATE TABLE settings (
    name        TEXT PRIMARY KEY,
    value       TEXT NOT NULL
);

-- Terminal devices (physical or virtual), authenticated on the gateway by
-- serial number and device secret.
CREATE TABLE devices (
    serial_number    TEXT PRIMARY KEY,
    model            TEXT NOT NULL,
    customer_id      TEXT REFERENCES customers(id),
    secret_hash      BLOB NOT NULL,
    software_version TEXT NOT NULL DEFAULT '',
    link_code        TEXT UNIQUE,
    last_seen_at     BIGINT,
    created_at       BIGINT NOT NULL
);

-- Terminal IDs: 8 digits, allocated to a customer, optionally to a merchant,
-- linked to at most one device and a device to at most one terminal ID.
CREATE TABLE terminals (
    terminal_id   TEXT PRIMARY KEY,
    customer_id   TEXT NOT NULL REFERENCES customers(id),
    merchant_id   TEXT REFERENCES merchants(id),
    serial_number TEXT UNIQUE REFERENCES devices(serial_number),
    linked_at     BIGINT,
    created_at    BIGINT NOT NULL
);
CREATE INDEX terminals_merchant ON terminals(merchant_id, terminal_id);
CREATE INDEX terminals_customer ON terminals(customer_id, terminal_id);

CREATE TABLE transactions (
    id                TEXT PRIMARY KEY,           -- onlineAPIRefId, time-sortable
    merchant_id       TEXT NOT NULL REFERENCES merchants(id),
    terminal_id       TEXT NOT NULL REFERENCES terminals(terminal_id),
    type              TEXT NOT NULL CHECK (type IN ('PURCHASE', 'REFUND', 'REVERSAL')),
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
    original_id       TEXT REFERENCES transactions(id), -- refund of / reversal of
    reverses          TEXT REFERENCES transactions(id),
    reversed_by       TEXT REFERENCES transactions(id),
    result            TEXT,                       -- JSON as the terminal reported it
    result_message_id TEXT,                       -- the terminal's message id of the applied result
    delivered         INTEGER NOT NULL DEFAULT 0, -- command written to a session
    created_at        BIGINT NOT NULL,
    acknowledged_at   BIGINT,
    deadline_at       BIGINT,
    completed_at      BIGINT
);
-- One active (PENDING = 14) transaction per terminal, enforced here.
CREATE UNIQUE INDEX transactions_one_active ON transactions(terminal_id) WHERE status_id = 14;
CREATE INDEX transactions_merchant_created ON transactions(merchant_id, created_at, id);
CREATE INDEX transactions_terminal_created ON transactions(terminal_id, created_at, id);
CREATE INDEX transactions_original ON transactions(original_id) WHERE original_id IS NOT NULL;
CREATE INDEX transactions_undelivered ON transactions(terminal_id) WHERE delivered = 0 AND status_id = 14;

CREATE TABLE print_jobs (
    id             TEXT PRIMARY KEY,              -- printId
    merchant_id    TEXT NOT NULL REFERENCES merchants(id),
    terminal_id    TEXT NOT NULL REFERENCES terminals(terminal_id),
    transaction_id TEXT REFERENCES transactions(id),
    copy           TEXT,
    lines          TEXT NOT NULL,                 -- JSON array of strings
    status_id      INTEGER,                       -- NULL while running
    created_at     BIGINT NOT NULL,
    completed_at   BIGINT
);
CREATE INDEX print_jobs_merchant_created ON print_jobs(merchant_id, created_at, id);

-- Idempotency records, scope merchant, kept 24 h.
CREATE TABLE idempotency_keys (
    merchant_id   TEXT NOT NULL,
    key           TEXT NOT NULL,
    method        TEXT NOT NULL,
    path          TEXT NOT NULL,
    request_hash  BLOB NOT NULL,
    status_code   INTEGER,                        -- NULL while the first request runs
    response_body BLOB,
    response_headers TEXT,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (merchant_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);

-- Access API: software packages and terminal updates.
CREATE TABLE packages (
    id          TEXT PRIMARY KEY,
    customer_id TEXT REFERENCES customers(id),    -- NULL: for every customer
    model       TEXT NOT NULL,
    name        TEXT NOT NULL,
    version     TEXT NOT NULL,
    mandatory   INTEGER NOT NULL DEFAULT 0,
    size_bytes  BIGINT NOT NULL,
    sha256      TEXT NOT NULL,
    released_at BIGINT NOT NULL
);
CREATE INDEX packages_model ON packages(model, released_at);

CREATE TABLE updates (
    id           TEXT PRIMARY KEY,
    terminal_id  TEXT NOT NULL REFERENCES terminals(terminal_id),
    package_id   TEXT NOT NULL REFERENCES packages(id),
    status       TEXT NOT NULL CHECK (status IN ('SCHEDULED', 'DOWNLOADING', 'INSTALLED', 'FAILED')),
    reason       TEXT,
    not_before   BIGINT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
-- At most one unfinished update per terminal.
CREATE UNIQUE INDEX updates_one_open ON updates(terminal_id) WHERE status IN ('SCHEDULED', 'DOWNLOADING');
