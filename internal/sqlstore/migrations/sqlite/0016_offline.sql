-- 0016: offline approvals (instore.Forwarding). An APPROVED purchase the
-- terminal approved offline has a forwarding state: QUEUED until the
-- terminal forwards it, then FORWARDED (the issuer accepted it) or
-- DECLINED (the issuer declined it: the merchant was not paid), and
-- forwarded_at, when the terminal forwarded it; NULL on every other
-- transaction (result.offline is in the result's JSON). The partial index
-- serves GET /transactions?forwarding= (newest first, by merchant): only
-- offline approvals have an entry.
ALTER TABLE transactions ADD COLUMN forwarding_state TEXT
    CHECK (forwarding_state IN ('QUEUED', 'FORWARDED', 'DECLINED'));
ALTER TABLE transactions ADD COLUMN forwarded_at BIGINT;
CREATE INDEX transactions_merchant_forwarding_created ON transactions(merchant_id, forwarding_state, created_at, id)
    WHERE forwarding_state IS NOT NULL;
