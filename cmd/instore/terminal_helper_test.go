package main

import (
	"bufio"
	"context"
	"regexp"
	"testing"
)

// linkCodeLine is how `instore terminal` shows its link code.
var linkCodeLine = regexp.MustCompile(`Link code ([0-9]{6})`)

// runTerminal runs `instore terminal` with args and the device secret
// secret until it shows a link code, and returns that code and stop, which
// ends the terminal and returns its exit code.
func runTerminal(t *testing.T, ctx context.Context, secret string, args ...string) (linkCode string, stop func() int) {
	t.Helper()
	t.Setenv("INSTORE_DEVICE_SECRET", secret)
	p := startRun(ctx, append([]string{"terminal"}, args...)...)
	stop = func() int { return p.stop(t) }
	lines := bufio.NewScanner(p.out)
	for lines.Scan() {
		if m := linkCodeLine.FindStringSubmatch(lines.Text()); m != nil {
			linkCode = m[1]
			break
		}
	}
	if linkCode == "" {
		stop()
		t.Fatal("instore terminal never showed a link code")
	}
	p.discardRest()
	return linkCode, stop
}
