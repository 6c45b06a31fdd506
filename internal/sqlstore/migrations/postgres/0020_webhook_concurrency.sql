-- 0020: how many deliveries of an endpoint may be in flight at once
-- (instore.Webhook.Concurrency, docs/events.md): 1, one at a time in the
-- events' order, as every endpoint made before; up to 16, in order per
-- terminal.
ALTER TABLE webhooks ADD COLUMN concurrency INTEGER NOT NULL DEFAULT 1 CHECK (concurrency BETWEEN 1 AND 16);
