package loadtest

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// fleetLog is a slog.Handler that counts the virtual terminals' session
// ends and refusals by message and error, so that a fleet that does not
// come online says why (startFleet) without a log line per terminal.
type fleetLog struct {
	mu     sync.Mutex
	counts map[string]int
}

func newFleetLog() *fleetLog { return &fleetLog{counts: map[string]int{}} }

// addrs matches the loopback addresses and ports in an error's text, which
// would otherwise make each terminal's error a key of its own.
var addrs = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+|:\d+`)

func (f *fleetLog) Enabled(context.Context, slog.Level) bool { return true }

func (f *fleetLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "sim: connected" || r.Message == "sim: linked" {
		return nil
	}
	key := r.Message
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "err", "status":
			key += " " + a.Key + "=" + addrs.ReplaceAllString(a.Value.String(), ":N")
		}
		return true
	})
	f.mu.Lock()
	f.counts[key]++
	f.mu.Unlock()
	return nil
}

func (f *fleetLog) WithAttrs([]slog.Attr) slog.Handler { return f }
func (f *fleetLog) WithGroup(string) slog.Handler      { return f }

// top returns the n most frequent lines with their counts, most first.
func (f *fleetLog) top(n int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]string, 0, len(f.counts))
	for k := range f.counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return f.counts[keys[i]] > f.counts[keys[j]] })
	var b strings.Builder
	for i, k := range keys {
		if i == n {
			break
		}
		fmt.Fprintf(&b, "\n  %7d  %s", f.counts[k], k)
	}
	return b.String()
}
