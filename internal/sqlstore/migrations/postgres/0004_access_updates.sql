-- 0004: the PostgreSQL twin of migrations/sqlite/0004_access_updates.sql:
-- what the Access API needs beyond 0001's packages and updates: the
-- model a terminal ID is declared for when it is allocated without a
-- device, the version a device reported when an update was installed, when
-- an update was last handed to the device's session, and the index of a
-- terminal's updates newest first.
ALTER TABLE terminals ADD COLUMN model TEXT;
ALTER TABLE updates ADD COLUMN software_version TEXT;
ALTER TABLE updates ADD COLUMN delivered_at BIGINT;
CREATE INDEX updates_terminal_created ON updates(terminal_id, created_at, id);
