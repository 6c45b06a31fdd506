-- 0019: the deliveries of an event, by its number. The event sweep
-- (ExpireEvents) keeps an event that still has a delivery, an anti-join
-- (NOT EXISTS) that this index answers per event. The NOT IN it replaces
-- became a nested comparison of every expired event with every delivery
-- once the deliveries outgrew work_mem on PostgreSQL (192 s for one hour
-- of events in a store of 1,000,000: docs/benchmarks.md).
CREATE INDEX webhook_deliveries_event ON webhook_deliveries(event_seq);
