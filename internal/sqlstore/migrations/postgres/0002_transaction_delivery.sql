-- 0002: what the life of a purchase needs beyond 0001: the device a command
-- went to, whether the ECR asked to cancel, and the index the deadline
-- recovery scans.
ALTER TABLE transactions ADD COLUMN device_serial TEXT;
ALTER TABLE transactions ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX transactions_pending_deadline ON transactions(deadline_at) WHERE status_id = 14;
