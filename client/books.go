package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/instore-dev/instore"
)

// Totals is the answer of GET /totals: the window summed and its groups,
// one per currency, type and status (every status: the money that moved
// is the APPROVED groups).
type Totals = instore.TotalsWire

// Total is one group of the totals: Count transactions of one currency,
// type and status, their TotalAmounts (tips included) summed in Amount.
type Total = instore.Total

// TotalsParams selects the window summed: From (inclusive) and To
// (exclusive), both optional (the last 24 hours up to To, or from From up
// to now, as the listing), and optionally one terminal ID.
type TotalsParams struct {
	From, To   time.Time
	TerminalID string
}

// Totals sums the merchant's transactions of a window by currency, type
// and status. Errors: validation, WP03, WP26 (over 30 days), WP27 (from
// more than 90 days ago), WP16 (terminalId).
func (c *Client) Totals(ctx context.Context, p TotalsParams, opts ...CallOption) (*Totals, error) {
	q := url.Values{}
	for name, t := range map[string]time.Time{"from": p.From, "to": p.To} {
		if !t.IsZero() {
			q.Set(name, t.UTC().Format(time.RFC3339Nano)) // to the nanosecond: the end is exclusive
		}
	}
	if p.TerminalID != "" {
		q.Set("terminalId", p.TerminalID)
	}
	return getAs[Totals](ctx, c, Prefix+"/totals", Prefix+"/totals", q, opts)
}

// ReconcileLine is one transaction of the ECR's books: OnlineAPIRefID or,
// without it, ECRReference names it; Amount is what the card was charged
// (the transaction's TotalAmount) in minor units, Status a code of the
// transactionStatuses list (APPROVED...).
type ReconcileLine = instore.ReconcileLine

// Reconciliation is the answer of POST /reconciliation: Matched when
// nothing differs, the counts, the lines the service has no transaction
// for, the service's transactions that moved money and no line names, and
// one Mismatch per differing field (ECR and Service are a string, or a
// float64 for an amount, as decoded from JSON).
type Reconciliation = instore.ReconcileResult

// ReconcileParams is the window (both ends required, at most 30 days
// apart), optionally one terminal ID, and the ECR's books of it (at most
// instore.MaxReconcileLines lines).
type ReconcileParams struct {
	From, To     time.Time
	TerminalID   string
	Transactions []ReconcileLine
}

// Reconcile compares the ECR's books with the service's transactions of
// the window (docs/accounting.md says how lines are paired and compared).
// It changes nothing. Errors: validation (a line, more than 10,000 lines,
// two lines with one onlineAPIRefId, more than 50,000 transactions in the
// window), WP03, WP26, WP27, WP16.
func (c *Client) Reconcile(ctx context.Context, p ReconcileParams, opts ...CallOption) (*Reconciliation, error) {
	lines := p.Transactions
	if lines == nil {
		lines = []ReconcileLine{}
	}
	body := &instore.ReconcileRequest{From: p.From.UTC().Format(time.RFC3339Nano), To: p.To.UTC().Format(time.RFC3339Nano),
		TerminalID: p.TerminalID, Transactions: lines}
	return postAs[Reconciliation](ctx, c, Prefix+"/reconciliation", body, opts)
}

// TransactionsCSV returns one page of the listing p selects as RFC 4180
// CSV (a header row, then the transactions newest first; text cells that
// start with = + - @ carry a leading apostrophe) and the cursor of the
// next page, "" on the last: pass it as p.Cursor, with the same other
// parameters, for the next page.
func (c *Client) TransactionsCSV(ctx context.Context, p ListParams, opts ...CallOption) (csv []byte, nextCursor string, err error) {
	resp, err := c.do(ctx, call{s: c.online, method: http.MethodGet, path: Prefix + "/transactions", route: Prefix + "/transactions",
		query: p.query(), opts: opts, accept: "text/csv"}, nil)
	if err != nil {
		return nil, "", err
	}
	return resp.body, nextLinkCursor(resp.header.Get("Link")), nil
}

// nextLinkCursor is the cursor of a Link header's rel="next" target ("" if
// none).
func nextLinkCursor(link string) string {
	for part := range strings.SplitSeq(link, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
		if !ok || !strings.Contains(params, `rel="next"`) {
			continue
		}
		u, err := url.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
		if err == nil {
			return u.Query().Get("cursor")
		}
	}
	return ""
}
