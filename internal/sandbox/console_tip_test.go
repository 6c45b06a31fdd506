package sandbox_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/testwait"
)

// TestConsoleTipPrompt: a person answers a terminal's tip prompt in the
// console: a suggestion's button, then the total typed for ENTER_TOTAL;
// the list shows the total charged and the tip.
func TestConsoleTipPrompt(t *testing.T) {
	d := startDemo(t)
	info := d.Info()
	waitOnline(t, d)
	p := openConsole(t, info, 1366)
	counter := info.Terminals[0] // waits for a person
	device := fmt.Sprintf(`[data-serial="%s"]`, counter.SerialNumber)
	p.poll("the first terminal waits for a person", fmt.Sprintf(`document.querySelector('%s .interactive-box').checked`, device))
	for _, tc := range []struct {
		tip    map[string]any
		answer string // JavaScript that answers the prompt
		want   string // the list's amount cell
	}{
		{map[string]any{"mode": "PROMPT", "suggestions": []int{10, 15}},
			fmt.Sprintf(`[...document.querySelectorAll('%s .tip button')].find((b) => b.textContent === "15%% · SEK 3.00").click()`, device),
			"SEK 23.00 (tip SEK 3.00)"},
		{map[string]any{"mode": "ENTER_TOTAL"},
			fmt.Sprintf(`(() => { const box = document.querySelector('%s .tip'); box.querySelector("input").value = "25,00"; [...box.querySelectorAll("button")].find((b) => b.textContent === "OK").click(); })()`, device),
			"SEK 25.00 (tip SEK 5.00)"},
	} {
		ref := purchaseOf(t, info, map[string]any{"terminalId": counter.TerminalID, "amount": 2000, "currency": "SEK", "tip": tc.tip})
		p.poll("the tip prompt shows", fmt.Sprintf(`!document.querySelector('%s .tip').hidden && document.querySelector('%s .screen').textContent.includes("SEK 20.00 - ")`, device, device))
		eval[any](p, tc.answer)
		p.poll("the card prompt follows the tip", fmt.Sprintf(`document.querySelector('%s .screen').textContent.includes("Present card") && document.querySelector('%s .tip').hidden`, device, device))
		p.click(device + ` button[data-action="approve"]`)
		p.poll(tc.want+" in the list", fmt.Sprintf(`(document.querySelector('tr[data-ref="%s"] td.num') || {}).textContent === %q && document.querySelector('tr[data-ref="%s"] .status').textContent === "APPROVED (0)"`, ref, tc.want, ref))
	}
	p.noErrors()
}

// TestConsoleTipAnswersItsPromptOnly: the console's tip answer names the
// prompt it answers (its sale's onlineAPIRefId). A second click, one
// naming another sale and one after the sale ended are refused (409), and
// none becomes the next sale's tip.
func TestConsoleTipAnswersItsPromptOnly(t *testing.T) {
	a, info, ch, counter := startWatched(t)
	prompt := map[string]any{"mode": "PROMPT", "suggestions": []int{10, 15}}
	sale := func() string {
		ref := purchaseOf(t, info, map[string]any{"terminalId": counter.TerminalID, "amount": 2000, "currency": "SEK", "tip": prompt})
		next(t, ch, "device", func(s string) bool { return strings.Contains(s, `"tipPrompt":{"onlineAPIRefId":"`+ref+`"`) })
		return ref
	}
	answer := func(ref string, tip int) int {
		code, _ := consoleAction(t, info, counter.SerialNumber, fmt.Sprintf("tip?onlineAPIRefId=%s&tipAmount=%d", ref, tip))
		return code
	}
	tipOf := func(ref string) int64 {
		var tx instore.TransactionWire
		testwait.For(t, ref+" to end", func() bool {
			a.do("GET", "/in-store/api/v1/transaction/"+ref, nil, 200, &tx)
			return tx.StatusID != instore.StatusPending
		})
		if tx.StatusID != instore.StatusApproved {
			t.Fatalf("%s ended %s", ref, tx.Status)
		}
		return tx.TipAmount
	}
	first := sale()
	for _, tc := range []struct {
		ref  string
		tip  int
		want int
	}{
		{first, -1, 400}, {"", 150, 400}, {"txn_nope", 150, 409}, // not the prompt that waits
		{first, 150, 200}, {first, 300, 409}, // the answer, then a second click
	} {
		if got := answer(tc.ref, tc.tip); got != tc.want {
			t.Errorf("tip %d for %q = %d, want %d", tc.tip, tc.ref, got, tc.want)
		}
	}
	if code, body := consoleAction(t, info, counter.SerialNumber, "approve"); code != 200 {
		t.Fatalf("approve = %d %s", code, body)
	}
	if tip := tipOf(first); tip != 150 {
		t.Errorf("the sale's tip = %d, want the first answer's 150", tip)
	}
	if got := answer(first, 300); got != 409 { // a late click
		t.Errorf("a click after the sale = %d, want 409", got)
	}
	// The next sale asks again: nothing was kept for it.
	second := sale()
	if code, body := consoleAction(t, info, counter.SerialNumber, "approve"); code != 200 { // decided at the tip prompt: no tip
		t.Fatalf("approve = %d %s", code, body)
	}
	if tip := tipOf(second); tip != 0 {
		t.Errorf("the next sale's tip = %d, want none (a refused click kept for it?)", tip)
	}
}
