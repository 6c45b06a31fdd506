-- 0006: room in every page of transactions for the changes of its rows.
-- A transaction row changes five times within a second of its insert (ack,
-- three progress stages, result); with full pages a change that finds no
-- room in its row's page becomes a new tuple elsewhere with new entries in
-- every index, instead of a heap-only update. docs/benchmarks.md, purchase.
ALTER TABLE transactions SET (fillfactor = 70);
