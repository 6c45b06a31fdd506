-- 0013: tips (instore.Tip). tip is how a purchase asked for one, as JSON
-- ({"mode": "PROMPT", "suggestions": [10, 15, 20]}; NULL: none); tip_amount
-- the tip the terminal charged with its APPROVED result (0: none). The
-- transaction's totalAmount is amount + tip_amount, not stored.
ALTER TABLE transactions ADD COLUMN tip TEXT;
ALTER TABLE transactions ADD COLUMN tip_amount BIGINT NOT NULL DEFAULT 0;
