package client

import (
	"context"
	"iter"
	"net/url"
	"time"

	"github.com/instore-dev/instore"
)

// Batch is a terminal's day close as the service shows it
// (instore.BatchWire): PENDING while the terminal closes, CLOSED with the
// terminal's totals, the service's totals of the same window and each
// transaction whose records differ (Matched when none), or FAILED
// (ErrorCode WP25 or WP23; a late answer of the terminal still closes it,
// the error kept).
type Batch struct {
	instore.BatchWire
}

// BatchListParams selects batches for GET /in-store/api/v1/batches. Zero
// members are not sent: the service then lists the batches closed in the
// last 24 hours, 100 at a time.
type BatchListParams struct {
	// From and To bound closedAt: at most 30 days apart (WP26), From
	// within the past 90 days (WP27).
	From, To   time.Time
	TerminalID string
	// Limit is the page size, 1 to 1000.
	Limit int
	// Cursor continues a listing (BatchPage.NextCursor).
	Cursor string
}

func (p BatchListParams) at(cursor string) BatchListParams { p.Cursor = cursor; return p }

func (p BatchListParams) query() url.Values {
	return ListParams{From: p.From, To: p.To, TerminalID: p.TerminalID, Limit: p.Limit, Cursor: p.Cursor}.query()
}

// BatchPage is one page of batches, newest first (by closedAt).
type BatchPage struct {
	Batches []*Batch `json:"batches"`
	// NextCursor continues the listing; "" on the last page.
	NextCursor string `json:"nextCursor"`
}

func (p *BatchPage) items() ([]*Batch, string) { return p.Batches, p.NextCursor }

// CloseBatch closes the terminal's batch (the day close) and returns it
// once the terminal answered: CLOSED, with the comparison. The terminal is
// busy meanwhile (a purchase answers WP09 with Reason BATCH_CLOSE).
// Errors: validation, WP03, WP16, WP01, WP30, WP23, WP09 (a transaction,
// an update or a close runs); WP25 when the terminal did not answer in
// time (the batch, named in the detail, is FAILED; Batch shows it closed
// if the terminal answers later).
func (c *Client) CloseBatch(ctx context.Context, terminalID string, opts ...CallOption) (*Batch, error) {
	return postAt[Batch](ctx, c, Prefix+"/terminal/"+url.PathEscape(terminalID)+"/close", Prefix+"/terminal/{terminalId}/close", nil, opts)
}

// Batch returns one of the merchant's batches. Errors: WP03, not-found.
func (c *Client) Batch(ctx context.Context, batchID string, opts ...CallOption) (*Batch, error) {
	return getAs[Batch](ctx, c, Prefix+"/batch/"+url.PathEscape(batchID), Prefix+"/batch/{batchId}", nil, opts)
}

// Batches returns one page of the merchant's batches, newest first.
// Errors: validation, WP03, WP26, WP27, WP16 (terminalId).
func (c *Client) Batches(ctx context.Context, p BatchListParams, opts ...CallOption) (*BatchPage, error) {
	return getAs[BatchPage](ctx, c, Prefix+"/batches", Prefix+"/batches", p.query(), opts)
}

// AllBatches iterates over every batch p selects, newest first, fetching
// pages as it goes; it stops after the first error, which it yields.
func (c *Client) AllBatches(ctx context.Context, p BatchListParams, opts ...CallOption) iter.Seq2[*Batch, error] {
	return listAll(ctx, c.Batches, p, opts)
}

// listing is what selects a listing (ListParams, BatchListParams,
// DeliveryQuery); at returns it continued at a cursor.
type listing[P any] interface{ at(cursor string) P }

// listPage is one page of a listing of T: its items and the cursor of the
// next page ("" on the last).
type listPage[T any] interface{ items() ([]T, string) }

// listAll iterates over every item of the listing p selects, from p's
// cursor on ("": its first page), one page a call of list; it stops after
// the first error, which it yields.
func listAll[P listing[P], L listPage[T], T any](ctx context.Context, list func(context.Context, P, ...CallOption) (L, error), p P, opts []CallOption) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		at := p // each range starts over
		for {
			page, err := list(ctx, at, opts...)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			items, next := page.items()
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			at = p.at(next)
		}
	}
}

// SandboxBatchExtraParams is a sale the virtual terminal approved on its
// own: Type (default PURCHASE), Amount (minor units), Currency (default
// SEK).
type SandboxBatchExtraParams struct {
	Type     instore.TransactionType `json:"type,omitempty"`
	Amount   int64                   `json:"amount"`
	Currency string                  `json:"currency,omitempty"`
}

// SandboxBatchExtra is the answer of SandboxBatchExtra: the terminal's own
// reference of the sale and the number of its open batch.
type SandboxBatchExtra struct {
	Reference   string `json:"reference"`
	BatchNumber int64  `json:"batchNumber"`
}

// SandboxBatchExtra adds to the virtual terminal's open batch an APPROVED
// sale the service never saw: its next close lists it MISSING_IN_SERVICE
// under Reference.
func (c *Client) SandboxBatchExtra(ctx context.Context, terminalID string, p SandboxBatchExtraParams, opts ...CallOption) (*SandboxBatchExtra, error) {
	return postAt[SandboxBatchExtra](ctx, c, "/sandbox/v1/terminals/"+url.PathEscape(terminalID)+"/batch-extra",
		"/sandbox/v1/terminals/{terminalId}/batch-extra", p, opts)
}
