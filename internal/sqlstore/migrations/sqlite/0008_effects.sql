-- 0008: the effects: messages the service owes a terminal device (a
-- cancel, the reversal of a late approval, a print), each written in the
-- database transaction of the change that makes it owed, sent after the
-- commit, sent again after every hello of the device, and done once the
-- device confirms it (CONFIRMED), what it concerns ends (MOOT: a result for
-- the transaction, a final status of the print job) or it is older than the
-- bound the sweep keeps (EXPIRED). The id is also the message id of every
-- send, so the device's confirm names it. docs/decisions.md, owed messages.
CREATE TABLE effects (
    id            TEXT PRIMARY KEY,
    kind          TEXT NOT NULL CHECK (kind IN ('CANCEL', 'REVERSAL', 'PRINT')),
    device_serial TEXT NOT NULL,                  -- the device it is owed to
    ref           TEXT NOT NULL,                  -- the transaction (CANCEL, REVERSAL) or print job (PRINT)
    reason        TEXT NOT NULL DEFAULT '',       -- the cancel's or the reversal's reason
    created_at    BIGINT NOT NULL,
    done_at       BIGINT,
    outcome       TEXT CHECK (outcome IN ('CONFIRMED', 'MOOT', 'EXPIRED')),
    CHECK ((done_at IS NULL) = (outcome IS NULL))
);
-- What a hello sends: a device's open effects, oldest first.
CREATE INDEX effects_open_device ON effects(device_serial, created_at, id) WHERE done_at IS NULL;
-- What a result or a print job's end makes moot; the sweep reads it whole.
CREATE INDEX effects_open_ref ON effects(ref) WHERE done_at IS NULL;
-- The print jobs without a final status, which restarts and the sweep end.
CREATE INDEX print_jobs_running ON print_jobs(created_at) WHERE status_id IS NULL;
