-- 0003: what refunds, listings and printing need beyond 0002: indexes that
-- make every filter combination of the transaction listing (a merchant and
-- a created_at range; optionally a terminal ID, a status, an ECR reference)
-- a range scan of one index read backwards, in the listing's order
-- (created_at, id descending), which the keyset cursor only narrows. The
-- merchant-only listing uses transactions_merchant_created (0001); refunds
-- of an original use transactions_original (0001).
CREATE INDEX transactions_merchant_terminal_created ON transactions(merchant_id, terminal_id, created_at, id);
CREATE INDEX transactions_merchant_status_created ON transactions(merchant_id, status_id, created_at, id);
CREATE INDEX transactions_merchant_terminal_status_created ON transactions(merchant_id, terminal_id, status_id, created_at, id);
-- Transactions without an ECR reference are left out of its index.
CREATE INDEX transactions_merchant_ecr_created ON transactions(merchant_id, ecr_reference, created_at, id) WHERE ecr_reference IS NOT NULL;
