-- 0015: totals (GET /totals). A merchant's transactions summed by
-- currency, type and status over a window of creation times: the index
-- holds every column the grouped sum reads (terminal_id to filter on, and
-- currency, type, status_id, amount, tip_amount), so the sum reads one
-- range of it and no table row. Its columns change only when a
-- transaction is created and when it gets its final status and tip, the
-- writes that already change transactions_merchant_status_created.
CREATE INDEX transactions_merchant_totals ON transactions(merchant_id, created_at, terminal_id, currency, type, status_id, amount, tip_amount);
