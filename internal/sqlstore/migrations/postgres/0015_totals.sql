-- 0015: totals (GET /totals). A merchant's transactions summed by
-- currency, type and status over a window of creation times: the index is
-- searched by merchant and creation time and INCLUDEs every other column
-- the grouped sum reads, so the sum is an index-only scan of one range.
-- The included columns change only when a transaction is created and
-- when it gets its final status and tip, an update that already changes
-- an indexed column (status_id), so no heap-only update is lost; the
-- acknowledgement still is one.
CREATE INDEX transactions_merchant_totals ON transactions(merchant_id, created_at)
    INCLUDE (terminal_id, currency, type, status_id, amount, tip_amount);
