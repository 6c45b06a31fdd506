-- 0011: events for integrators (docs/events.md): the outbox, webhook
-- endpoints, their deliveries and each delivery's attempts.
--
-- An event is inserted in the database transaction of the change it
-- describes, with seq NULL. The sequencer (SequenceEvents: one at a time,
-- under an advisory lock) numbers the committed ones in order: seq is what
-- the stream resumes after and what event ids are made of, so a reader that
-- saw seq N has seen every event numbered below N (they committed with it
-- or before), which ids taken from a sequence at insert would not give.
CREATE TABLE events (
    id          BIGSERIAL PRIMARY KEY,
    seq         BIGINT UNIQUE,
    merchant_id TEXT NOT NULL,
    type        TEXT NOT NULL,
    terminal_id TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,   -- unix microseconds
    data        TEXT NOT NULL      -- the resource as the API showed it (JSON)
);
CREATE INDEX events_unsequenced ON events(id) WHERE seq IS NULL;
CREATE INDEX events_merchant_seq ON events(merchant_id, seq) WHERE seq IS NOT NULL;
CREATE INDEX events_created ON events(created_at);

CREATE TABLE webhooks (
    id                TEXT PRIMARY KEY,
    merchant_id       TEXT NOT NULL,
    url               TEXT NOT NULL,
    event_types       TEXT NOT NULL DEFAULT '',  -- ',a,b,' or '' for all
    description       TEXT NOT NULL DEFAULT '',
    status            TEXT NOT NULL CHECK (status IN ('enabled', 'disabled')),
    disabled_reason   TEXT NOT NULL DEFAULT '',
    secret            TEXT NOT NULL,
    previous_secret   TEXT NOT NULL DEFAULT '',
    previous_until    BIGINT,
    failing_since     BIGINT,
    created_at        BIGINT NOT NULL,
    deleted_at        BIGINT
);
CREATE INDEX webhooks_merchant ON webhooks(merchant_id, created_at, id);

CREATE TABLE webhook_deliveries (
    id          BIGSERIAL PRIMARY KEY,
    webhook_id  TEXT NOT NULL REFERENCES webhooks(id),
    event_seq   BIGINT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_at     BIGINT NOT NULL,
    lease_until BIGINT NOT NULL DEFAULT 0,
    created_at  BIGINT NOT NULL,
    done_at     BIGINT,
    UNIQUE (webhook_id, event_seq)
);
-- The head of each endpoint's queue, and what is due.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries(webhook_id, event_seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_list ON webhook_deliveries(webhook_id, id);

CREATE TABLE webhook_attempts (
    delivery_id  BIGINT NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    n            INTEGER NOT NULL,
    at           BIGINT NOT NULL,
    status_code  INTEGER NOT NULL DEFAULT 0,  -- 0: no HTTP answer (error says why)
    duration_ms  INTEGER NOT NULL,
    response     TEXT NOT NULL DEFAULT '',    -- the first bytes of the answer
    error        TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (delivery_id, n)
);

-- ECR confirmation (a purchase's confirmWithinSeconds): the window, its
-- state (NULL: none asked; PENDING, CONFIRMED, AUTO_REVERSED) and times.
ALTER TABLE transactions ADD COLUMN confirm_within INTEGER;
ALTER TABLE transactions ADD COLUMN confirm_state TEXT;
ALTER TABLE transactions ADD COLUMN confirm_deadline BIGINT;
ALTER TABLE transactions ADD COLUMN confirmed_at BIGINT;
CREATE INDEX transactions_unconfirmed ON transactions(confirm_deadline) WHERE confirm_state = 'PENDING';
