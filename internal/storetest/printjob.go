package storetest

import (
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// newPrintJob returns a running job of free lines.
func newPrintJob(id, terminalID string, created time.Time, lines ...string) *instore.PrintJob {
	return &instore.PrintJob{ID: id, MerchantID: "mer_1", TerminalID: terminalID, Lines: lines, CreatedAt: created}
}

// printJobs are the print jobs, by id.
var printJobs = kind[instore.PrintJob]{"PrintJob", instore.Store.CreatePrintJob, instore.Store.PrintJob,
	func(p *instore.PrintJob) string { return p.ID }}

var printJobTests = []test{
	{"RoundTrip", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		tx := mustCreateTransaction(t, s, newTransaction("txn_1", "mer_1", terminalID, "SN-1", instore.StatusApproved, at(1)))
		for _, p := range []*instore.PrintJob{
			newPrintJob("prt_lines", terminalID, at(2), "ACME RETAIL", "", "Köp 12,50 SEK", "\"quoted\" \\ <tag> & 😀", "  indented  "),
			{ID: "prt_receipt", MerchantID: "mer_1", TerminalID: terminalID, TransactionID: tx.ID, Copy: instore.CopyMerchant, CreatedAt: at(3)},
			{ID: "prt_receipt_lines", MerchantID: "mer_1", TerminalID: terminalID, TransactionID: tx.ID, Copy: instore.CopyCustomer,
				Lines: []string{"ACME RETAIL", "Auth A1B2C3"}, CreatedAt: at(4)},
			// Stored done: a status of 0 is a status, not a running job.
			func() *instore.PrintJob {
				p := newPrintJob("prt_done", terminalID, at(5), "one line")
				p.StatusID, p.CompletedAt = ptr(instore.PrintSuccess), ptr(at(6))
				return p
			}(),
		} {
			printJobs.mustCreate(t, s, p)
			got := printJobs.mustGet(t, s, p.ID)
			if d := diff(asStored(p), got); d != "" {
				t.Errorf("PrintJob(%q) mismatch (-want +got):\n%s", p.ID, d)
			}
			if (got.StatusID == nil) != (p.StatusID == nil) {
				t.Errorf("PrintJob(%q).StatusID = %v, want %v", p.ID, got.StatusID, p.StatusID)
			}
		}
	}},
	{"NotFound", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		printJobs.mustCreate(t, s, newPrintJob("prt_1", terminalID, at(1), "x"))
		checkMissing(t, "PrintJob(missing)", s.PrintJob, "prt_missing_81aa", "prt_missing_81aa")
		err := s.CompletePrintJob(t.Context(), "prt_missing_81aa", instore.PrintSuccess, at(2))
		checkNotFound(t, "CompletePrintJob(missing)", err, "prt_missing_81aa")
		if got := printJobs.mustGet(t, s, "prt_1"); got.StatusID != nil {
			t.Errorf("CompletePrintJob(missing) completed another job: %+v", got)
		}
	}},
	{"CreateConflict", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		first := printJobs.mustCreate(t, s, newPrintJob("prt_1", terminalID, at(1), "first"))
		for _, tc := range []struct {
			name string
			p    *instore.PrintJob
		}{
			{"duplicate id", newPrintJob("prt_1", terminalID, at(2), "second")},
			{"missing terminal ID", newPrintJob("prt_2", "99999998", at(2), "x")},
			{"missing merchant", &instore.PrintJob{ID: "prt_3", MerchantID: "mer_missing", TerminalID: terminalID, Lines: []string{"x"}, CreatedAt: at(2)}},
			{"missing transaction", &instore.PrintJob{ID: "prt_4", MerchantID: "mer_1", TerminalID: terminalID, TransactionID: "txn_missing", Copy: instore.CopyCustomer, CreatedAt: at(2)}},
		} {
			checkConflict(t, "CreatePrintJob("+tc.name+")", s.CreatePrintJob(t.Context(), tc.p))
		}
		if d := diff(asStored(first), printJobs.mustGet(t, s, "prt_1")); d != "" {
			t.Errorf("PrintJob(prt_1) after refused creates mismatch (-want +got):\n%s", d)
		}
		for _, id := range []string{"prt_2", "prt_3", "prt_4"} {
			checkMissing(t, "PrintJob(refused)", s.PrintJob, id, "")
		}
	}},
	{"Complete", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		for _, status := range []instore.PrintStatus{instore.PrintSuccess, instore.PrintOutOfPaper} {
			p := printJobs.mustCreate(t, s, newPrintJob("prt_"+string(rune('a'+status)), terminalID, at(1), "line"))
			other := printJobs.mustCreate(t, s, newPrintJob(p.ID+"_other", terminalID, at(1), "line"))
			if err := s.CompletePrintJob(t.Context(), p.ID, status, at(3)); err != nil {
				t.Fatalf("CompletePrintJob(%q, %d) = %v", p.ID, status, err)
			}
			want := asStored(p)
			want.StatusID, want.CompletedAt = ptr(status), ptr(stored(at(3)))
			if d := diff(want, printJobs.mustGet(t, s, p.ID)); d != "" {
				t.Errorf("PrintJob(%q) after CompletePrintJob mismatch (-want +got):\n%s", p.ID, d)
			}
			// The status is set once.
			checkConflict(t, "CompletePrintJob(completed)", s.CompletePrintJob(t.Context(), p.ID, instore.PrintError, at(4)))
			if d := diff(want, printJobs.mustGet(t, s, p.ID)); d != "" {
				t.Errorf("PrintJob(%q) after a refused CompletePrintJob mismatch (-want +got):\n%s", p.ID, d)
			}
			if d := diff(asStored(other), printJobs.mustGet(t, s, other.ID)); d != "" {
				t.Errorf("CompletePrintJob(%q) changed %q (-want +got):\n%s", p.ID, other.ID, d)
			}
		}
	}},
	{"ConcurrentComplete", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		p := printJobs.mustCreate(t, s, newPrintJob("prt_1", terminalID, at(1), "line"))
		statuses := []instore.PrintStatus{
			instore.PrintSuccess, instore.PrintBusy, instore.PrintOutOfPaper, instore.PrintLowBattery,
			instore.PrintError, instore.PrintCancelled, instore.PrintTimeout, instore.PrintSuccess,
		}
		errs := atOnce(len(statuses), func(i int) error {
			return s.CompletePrintJob(t.Context(), p.ID, statuses[i], at(10+i))
		})
		w := exactlyOne(t, "concurrent CompletePrintJob(same job)", errs)
		if w < 0 {
			return
		}
		want := asStored(p)
		want.StatusID, want.CompletedAt = ptr(statuses[w]), ptr(stored(at(10+w)))
		if d := diff(want, printJobs.mustGet(t, s, p.ID)); d != "" {
			t.Errorf("PrintJob() is not the winner's (-want +got):\n%s", d)
		}
	}},
}
