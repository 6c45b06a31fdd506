package sandbox_test

import (
	"fmt"
	"testing"
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
