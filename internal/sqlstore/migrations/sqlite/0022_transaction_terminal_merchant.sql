-- 0022: a transaction's merchant is its terminal ID's merchant
-- (migrations/postgres/0022_transaction_terminal_merchant.sql, where one
-- foreign key on both columns says it). SQLite cannot change a table's
-- foreign keys without rebuilding it: a trigger refuses the insert
-- instead, with the same outcome (the store's ErrConflict). Its read is
-- one primary-key lookup of the row the terminal's foreign key reads
-- anyway.
CREATE TRIGGER transactions_terminal_merchant BEFORE INSERT ON transactions
    WHEN NOT EXISTS (SELECT 1 FROM terminals WHERE terminal_id = NEW.terminal_id AND merchant_id = NEW.merchant_id)
BEGIN
    SELECT RAISE(ABORT, 'the transaction''s merchant is not its terminal ID''s');
END;
-- The index of a terminal ID's transactions by creation had one reader, a
-- day close's, which now names the merchant and reads
-- transactions_merchant_terminal_created.
DROP INDEX transactions_terminal_created;
