-- 0012: an endpoint's deliveries are made as the dispatcher reaches its
-- events (a few ahead of the one being sent), no longer one row per event
-- and endpoint when the event is numbered (docs/events.md, Webhooks).
-- fanned_seq is the number up to which the endpoint has its deliveries:
-- the events after it that it wants are still to be given one. Until now
-- every numbered event was fanned out at once, so every endpoint has its
-- deliveries up to the highest number.
ALTER TABLE webhooks ADD COLUMN fanned_seq BIGINT NOT NULL DEFAULT 0;
UPDATE webhooks SET fanned_seq = (SELECT COALESCE(MAX(seq), 0) FROM events);
