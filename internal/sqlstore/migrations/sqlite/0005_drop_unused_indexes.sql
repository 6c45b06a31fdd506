-- 0005: two indexes no query reads, which every change of a transaction
-- paid for: the deadline index (recovery lists PENDING transactions by
-- creation, through transactions_one_active's rows) and the undelivered
-- index (the delivered column is never written). Without them the ack,
-- which sets the deadline, changes no indexed column (on PostgreSQL a
-- heap-only update), and every other change has two indexes fewer to keep.
-- docs/benchmarks.md, purchase.
DROP INDEX transactions_pending_deadline;
DROP INDEX transactions_undelivered;
