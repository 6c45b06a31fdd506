-- 0022: a transaction's terminal ID and merchant are checked by one foreign
-- key, to the terminal ID's row, instead of one to each table.
--
-- Each foreign key check of an insert locks the row it finds (FOR KEY
-- SHARE). The merchant's row was locked by every transaction of every
-- terminal of the merchant at once: concurrent lockers of one row make
-- PostgreSQL create a multixact for each new one, copying the others, and
-- write the row's lock to its page and the WAL, on every purchase of a
-- busy shop (docs/benchmarks.md, "One lock per creation"). The terminal
-- ID's row is locked by its own transactions only, one at a time.
--
-- The key is stricter than the two it replaces: the transaction's merchant
-- must be its terminal ID's (terminals_merchant_terminal), not any
-- merchant. A terminal ID's merchant never changes once allocated, and
-- neither table's rows are deleted. linkTerminal's FOR UPDATE of the
-- terminal ID still waits for, and holds back, a creation's key share lock
-- (sqlstore/terminal.go).
--
-- NOT VALID: the new key holds for every row written from now on, and
-- the rows already stored are not scanned again inside this migration,
-- which holds the table's lock until it commits (the two keys it replaces
-- checked each of them, and the service always wrote the terminal ID's
-- merchant). An operator who wants the old rows checked too runs
-- `ALTER TABLE transactions VALIDATE CONSTRAINT
-- transactions_merchant_terminal_fkey` at any time: it lets the sales go on
-- (docs/operations.md, "Several nodes", the rolling upgrade).
--
-- Every statement here changes only the catalogue, or builds the small
-- index of terminals, so the migration is quick; it waits at most 10 s
-- for the table's lock (as 0021), and a node that cannot take it fails to
-- start and is started again rather than stalling the other nodes'
-- writes behind its wait.
--
-- transactions_terminal_created was read by one query, a day close's
-- transactions of a terminal ID, which now names the merchant too and
-- reads transactions_merchant_terminal_created: one index less to write at
-- each creation and at each result.
SET LOCAL lock_timeout = '10s';
CREATE UNIQUE INDEX terminals_merchant_terminal ON terminals(merchant_id, terminal_id);
DROP INDEX terminals_merchant;
ALTER TABLE transactions ADD CONSTRAINT transactions_merchant_terminal_fkey
    FOREIGN KEY (merchant_id, terminal_id) REFERENCES terminals(merchant_id, terminal_id) NOT VALID;
ALTER TABLE transactions DROP CONSTRAINT transactions_merchant_id_fkey;
ALTER TABLE transactions DROP CONSTRAINT transactions_terminal_id_fkey;
DROP INDEX transactions_terminal_created;
