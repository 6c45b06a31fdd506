package simulation

import (
	"regexp"
	"strings"
)

var refInLine = regexp.MustCompile(`\b(txn|prt)_\d{8}\b`)

// Shorten keeps the lines of a failed history that matter: those naming
// a transaction or print job of the failure, the crashes, the sessions
// of the devices involved, and the last lines before the failure.
func Shorten(r *Result) []string {
	if r.Failure == nil || len(r.Trace) == 0 {
		return r.Trace
	}
	last := r.Trace[len(r.Trace)-1]
	refs := map[string]bool{}
	for _, m := range refInLine.FindAllString(last, -1) {
		refs[m] = true
	}
	devices := map[string]bool{}
	for _, l := range r.Trace {
		for _, m := range refInLine.FindAllString(l, -1) {
			if refs[m] {
				for _, f := range strings.Fields(l) {
					if strings.HasPrefix(f, "SIM-") {
						devices[f] = true
					}
				}
			}
		}
	}
	var out []string
	for i, l := range r.Trace {
		keep := i == 0 || i >= len(r.Trace)-12 || strings.Contains(l, " crash ") || strings.Contains(l, " calm")
		for _, m := range refInLine.FindAllString(l, -1) {
			keep = keep || refs[m]
		}
		for d := range devices {
			keep = keep || strings.Contains(l, "connect "+d) || strings.Contains(l, "cut "+d)
		}
		if keep {
			out = append(out, l)
		}
	}
	return out
}
