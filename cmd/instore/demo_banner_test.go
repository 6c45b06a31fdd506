package main

import (
	"bufio"
	"context"
	"strings"
	"testing"
)

// TestDemoInteractiveBanner: `demo --interactive` says in its banner which
// terminal waits for a click, and where; without it, no terminal is marked.
func TestDemoInteractiveBanner(t *testing.T) {
	for _, interactive := range []bool{true, false} {
		args := demoArgs("--log-format", "json", "--sim-delay", "0")
		if interactive {
			args = append(args, "--interactive")
		}
		p := startRun(context.Background(), args...)
		var banner strings.Builder
		sc := bufio.NewScanner(p.out)
		for sc.Scan() {
			banner.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Press Ctrl-C") {
				break
			}
		}
		p.discardRest()
		if c := p.stop(t); c == -1 {
			t.FailNow()
		} else if c != 0 {
			t.Errorf("demo exited %d: %s", c, p.stderr.String())
		}
		text := banner.String()
		var first string
		for _, l := range strings.Split(text, "\n") {
			if strings.Contains(l, "VT-COUNTERTOP-01") {
				first = l
			}
		}
		marked := strings.Contains(first, "waits for your click")
		if marked != interactive || interactive && !strings.Contains(text, "/console") {
			t.Errorf("interactive %v: banner marks the first terminal %v:\n%s", interactive, marked, text)
		}
	}
}
