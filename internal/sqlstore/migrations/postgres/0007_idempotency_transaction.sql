-- 0007: an idempotency record names the request holding it (attempt) and
-- the transaction that request created, written in the same database
-- transaction as the creation: a retry after a crash answers about that
-- transaction instead of creating a second one.
ALTER TABLE idempotency_keys ADD COLUMN attempt TEXT NOT NULL DEFAULT '';
ALTER TABLE idempotency_keys ADD COLUMN transaction_id TEXT;
