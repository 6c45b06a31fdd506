package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/testlog"
)

// TestDemoInteractiveBanner: `demo --interactive` says in its banner which
// terminal waits for a click, and where; without it, no terminal is marked.
func TestDemoInteractiveBanner(t *testing.T) {
	for _, interactive := range []bool{true, false} {
		args := []string{"demo", "--listen-online", "127.0.0.1:0", "--listen-access", "127.0.0.1:0",
			"--listen-terminal", "127.0.0.1:0", "--listen-ops", "127.0.0.1:0", "--log-format", "json", "--sim-delay", "0"}
		if interactive {
			args = append(args, "--interactive")
		}
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		code := make(chan int, 1)
		stderr := &testlog.Buffer{}
		go func() {
			code <- run(ctx, args, pw, stderr)
			pw.Close()
		}()
		var banner strings.Builder
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			banner.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Press Ctrl-C") {
				break
			}
		}
		go io.Copy(io.Discard, pr)
		cancel()
		select {
		case c := <-code:
			if c != 0 {
				t.Errorf("demo exited %d: %s", c, stderr.String())
			}
		case <-time.After(20 * time.Second):
			t.Fatal("demo did not stop")
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
