package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEcrBooks(t *testing.T) {
	_, ecr := ecrDemo(t)
	from := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	sale := lastTx(t, first(ecr(0, "purchase", "12.50", "--reference", "=1+2", "--wait", "--json")))
	lastTx(t, first(ecr(exitNotApproved, "purchase", "10.11", "--reference", "ORDER-2", "--wait", "--json")))
	other := lastTx(t, first(ecr(0, "purchase", "20", "--wait", "--json")))

	out, _ := ecr(0, "totals", "--from", from)
	if got := fieldLines(out); !strings.Contains(got, "\nSEK PURCHASE APPROVED 2 32.50\nSEK PURCHASE TRANSACTION_DECLINED 1 10.11\n") {
		t.Errorf("totals:\n%s", out)
	}
	var tot struct {
		Totals []struct{ Count, Amount int64 } `json:"totals"`
	}
	must(t, json.Unmarshal([]byte(first(ecr(0, "totals", "--from", from, "--json"))), &tot))
	if len(tot.Totals) != 2 || tot.Totals[0].Amount != 3250 {
		t.Errorf("totals --json = %+v", tot)
	}

	// list --csv: the service's CSV, the formula defused; with --limit the
	// cursor goes to stderr, with --all every page under one header.
	out, errs := ecr(0, "list", "--csv", "--from", from, "--limit", "2")
	if rows := readCSV(t, out); len(rows) != 3 || !strings.Contains(errs, "more: --cursor ") {
		t.Errorf("list --csv --limit 2 = %d rows, stderr %q", len(rows), errs)
	}
	all, _ := ecr(0, "list", "--csv", "--all", "--from", from, "--limit", "2")
	rows := readCSV(t, all)
	if len(rows) != 4 || rows[0][0] != "onlineAPIRefId" || rows[3][0] != sale.OnlineAPIRefID || rows[3][10] != "'=1+2" {
		t.Fatalf("list --csv --all = %q", rows)
	}

	// The service's own export reconciles with itself.
	dir := t.TempDir()
	self := filepath.Join(dir, "export.csv")
	must(t, os.WriteFile(self, []byte(all), 0o600))
	if out, _ := ecr(0, "reconcile", self, "--from", from); !strings.HasPrefix(out, "the books agree: 3 lines") {
		t.Errorf("reconcile of the export:\n%s", out)
	}
	// Books with a wrong amount, a sale left out and a cash sale.
	books := "onlineAPIRefId,ecrReference,type,amount,currency,status\n" +
		sale.OnlineAPIRefID + ",,PURCHASE,1200,SEK,APPROVED\n" +
		",CASH-1,PURCHASE,500,SEK,APPROVED\n"
	file := filepath.Join(dir, "books.csv")
	must(t, os.WriteFile(file, []byte(books), 0o600))
	out, _ = ecr(exitBooksDiffer, "reconcile", file, "--from", from)
	for _, want := range []string{"the books differ: 2 lines, 3 transactions in the service; 0 matched, 1 mismatched, 1 missing in the service, 1 missing in the ECR",
		sale.OnlineAPIRefID + " 0 amount 1200 1250", "- 1 CASH-1 PURCHASE 5.00 SEK APPROVED", other.OnlineAPIRefID} {
		if !strings.Contains(fieldLines(out), want) {
			t.Errorf("reconcile:\n%s\nlacks %q", out, want)
		}
	}
	var res struct {
		Matched bool `json:"matched"`
	}
	must(t, json.Unmarshal([]byte(first(ecr(exitBooksDiffer, "reconcile", file, "--from", from, "--json"))), &res))
	if res.Matched {
		t.Errorf("reconcile --json of differing books: matched")
	}

	// Usage: no --from, no file, a bad amount, a header without the columns.
	ecr(2, "reconcile", file)
	ecr(2, "reconcile", filepath.Join(dir, "none.csv"), "--from", from)
	bad := filepath.Join(dir, "bad.csv")
	must(t, os.WriteFile(bad, []byte("onlineAPIRefId,ecrReference,type,amount,currency,status\n,A,PURCHASE,12.50,SEK,APPROVED\n"), 0o600))
	if _, errs := ecr(2, "reconcile", bad, "--from", from); !strings.Contains(errs, "line 2: amount \"12.50\" is not an integer in minor units") {
		t.Errorf("a decimal amount: %q", errs)
	}
	must(t, os.WriteFile(bad, []byte("ref,amount\n"), 0o600))
	ecr(2, "reconcile", bad, "--from", from)
	// The service's refusals fail the command (exit 1): a line without a
	// reference.
	must(t, os.WriteFile(bad, []byte("onlineAPIRefId,ecrReference,type,amount,currency,status\n,,PURCHASE,1,SEK,APPROVED\n"), 0o600))
	if _, errs := ecr(exitFailed, "reconcile", bad, "--from", from); !strings.Contains(errs, "/transactions/0") {
		t.Errorf("a line without reference: %q", errs)
	}
}

func readCSV(t *testing.T, s string) [][]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(s)).ReadAll()
	if err != nil {
		t.Fatalf("CSV %q: %v", s, err)
	}
	return rows
}

// fieldLines is s with the runs of spaces of its tables made one.
func fieldLines(s string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(s, "\n") {
		b.WriteString(strings.Join(strings.Fields(line), " ") + "\n")
	}
	return b.String()
}
