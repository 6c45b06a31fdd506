-- 0010: the twin of migrations/postgres/0010_cluster.sql. SQLite is one
-- node (a second process on the data directory is refused at start), so
-- these tables stay empty here; they keep the two schemas alike.
CREATE TABLE cluster_nodes (
    id         TEXT PRIMARY KEY,
    started_at INTEGER NOT NULL,
    beat_at    INTEGER NOT NULL,
    draining   INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE terminal_sessions (
    serial_number TEXT PRIMARY KEY,
    node_id       TEXT,
    epoch         INTEGER NOT NULL,
    connected_at  INTEGER NOT NULL
);
