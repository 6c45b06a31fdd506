-- 0014: pre-authorisation (instore.Authorization). The new transaction
-- types PRE_AUTH, INCREMENT, CAPTURE and VOID; an approved PRE_AUTH's
-- authorisation: auth_state (OPEN, CAPTURED, VOIDED, EXPIRED; NULL: none),
-- authorized_amount, captured_amount and auth_expires_at; by_timer marks
-- the VOID the service sent when its pre-auth expired. The OPEN ones are
-- read by their expiry (recovery and the sweep void them).
ALTER TABLE transactions DROP CONSTRAINT IF EXISTS transactions_type_check;
ALTER TABLE transactions ADD CONSTRAINT transactions_type_check
    CHECK (type IN ('PURCHASE', 'REFUND', 'REVERSAL', 'PRE_AUTH', 'INCREMENT', 'CAPTURE', 'VOID'));
ALTER TABLE transactions ADD COLUMN auth_state TEXT;
ALTER TABLE transactions ADD COLUMN authorized_amount BIGINT NOT NULL DEFAULT 0;
ALTER TABLE transactions ADD COLUMN captured_amount BIGINT NOT NULL DEFAULT 0;
ALTER TABLE transactions ADD COLUMN auth_expires_at BIGINT;
ALTER TABLE transactions ADD COLUMN by_timer BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX transactions_preauth_open ON transactions(auth_expires_at, id) WHERE auth_state = 'OPEN';
