-- 0010: the nodes of a cluster on one PostgreSQL database and the terminal
-- sessions they hold (internal/cluster; docs/operations.md, Several nodes).
-- A node beats every second; one that stopped beating is gone, and so are
-- its sessions. A terminal's session row names the node holding it and an
-- epoch that grows at every (re)connect of the device: a node whose epoch
-- is stale may neither send to the terminal nor record for it.
CREATE TABLE cluster_nodes (
    id         TEXT PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    beat_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    draining   BOOLEAN NOT NULL DEFAULT false
);
CREATE TABLE terminal_sessions (
    serial_number TEXT PRIMARY KEY,
    node_id       TEXT,            -- NULL: no session
    epoch         BIGINT NOT NULL,
    connected_at  TIMESTAMPTZ NOT NULL
);
