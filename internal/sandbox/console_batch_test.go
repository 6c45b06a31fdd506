package sandbox_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/instore-dev/instore"
)

// batchList is the console's read of the last closes (batch.js,
// loadBatches).
func batchList() string {
	return fromLastMonth("/in-store/api/v1/batches?limit=20")
}

// TestConsoleBatchData: what the console's day closes are made of, over
// the Online API validated against its document: the Close button's call
// (POST /terminal/{terminalId}/close without a body) answers the batch;
// a sale only the terminal knows (batch-extra) shows as a difference of
// the next close; the listing the page reads at load has both, newest
// first, and the event stream carries batch.closed with each.
func TestConsoleBatchData(t *testing.T) {
	d, a := startAPI(t)
	term := d.Info().Terminals[1].TerminalID // answers without a person
	var first, second instore.BatchWire
	a.do("POST", "/in-store/api/v1/terminal/"+term+"/close", nil, 201, &first)
	if first.State != instore.BatchClosed || !first.Matched {
		t.Errorf("close = %+v, want CLOSED and matched", first)
	}
	var extra struct {
		Reference string `json:"reference"`
	}
	a.do("POST", "/sandbox/v1/terminals/"+term+"/batch-extra", map[string]any{"amount": 700}, 200, &extra)
	a.do("POST", "/in-store/api/v1/terminal/"+term+"/close", nil, 201, &second)
	if second.Matched || len(second.Differences) != 1 || second.Differences[0].OnlineAPIRefID != extra.Reference {
		t.Errorf("second close = %+v, want the difference %s", second, extra.Reference)
	}
	var page struct {
		Batches []instore.BatchWire `json:"batches"`
	}
	a.do("GET", batchList(), nil, 200, &page)
	if len(page.Batches) != 2 || page.Batches[0].BatchID != second.BatchID || page.Batches[1].BatchID != first.BatchID {
		t.Errorf("listing = %+v, want the second close, then the first", page.Batches)
	}
	n := 0
	for _, e := range a.eventsAfter("") {
		if e.Type == string(instore.EventBatchClosed) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d batch.closed events, want 2", n)
	}
}

// TestConsoleBatchView: in Chromium, the Close button of a terminal ID
// closes its batch and the day closes view shows it, then a close with a
// sale only the terminal knows shows its difference.
func TestConsoleBatchView(t *testing.T) {
	d, a := startAPI(t)
	info := d.Info()
	term := info.Terminals[1].TerminalID
	p := openConsole(t, info, 1366)
	row := func(sel string) string {
		return fmt.Sprintf(`(document.querySelector('#batches tbody tr:first-child %s') || {}).textContent`, sel)
	}
	// Clicked from the page's script: a terminal event may re-render the
	// table between a mouse click's lookup and its press.
	closeButton := func() {
		eval[bool](p, fmt.Sprintf(`(document.querySelector('#terminals button[data-close="%s"]').click(), true)`, term))
	}
	p.poll("the Close button shows", fmt.Sprintf(`!!document.querySelector('#terminals button[data-close="%s"]')`, term))
	closeButton()
	p.poll("the close shows MATCHED", row("td.outcome")+` === "MATCHED"`)
	// batch.closed may show it before the close's answer re-enables the
	// button (disabled while its close runs).
	p.poll("the Close button is enabled again", fmt.Sprintf(`!document.querySelector('#terminals button[data-close="%s"]').disabled`, term))

	var extra struct {
		Reference string `json:"reference"`
	}
	a.do("POST", "/sandbox/v1/terminals/"+term+"/batch-extra", map[string]any{"amount": 700}, 200, &extra)
	closeButton()
	p.poll("the second close shows its difference", row("td.outcome")+` === "1 difference"`)
	diff := eval[string](p, `document.querySelector('#batches tbody tr:first-child li.diff').textContent`)
	if !strings.Contains(diff, "MISSING_IN_SERVICE") || !strings.Contains(diff, extra.Reference) || !strings.Contains(diff, "terminal: PURCHASE APPROVED SEK 7.00; service: none") {
		t.Errorf("difference shows %q", diff)
	}
	if got := eval[float64](p, `document.querySelectorAll('#batches tbody tr').length`); got != 2 {
		t.Errorf("%v closes shown, want 2", got)
	}
	p.noErrors()
}
