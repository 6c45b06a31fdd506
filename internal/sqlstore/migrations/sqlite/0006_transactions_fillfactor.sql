-- 0006: PostgreSQL leaves room in the pages of transactions for the
-- changes of their rows (fillfactor); SQLite has no such setting, and its
-- B-tree rewrites a changed row in place. Kept so that both dialects have
-- the same migration numbers.
SELECT 1;
