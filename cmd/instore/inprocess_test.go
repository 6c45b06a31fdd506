package main

import (
	"context"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/testlog"
)

// inProcess is the binary running in-process (run) with args: what it
// prints comes out of out, what it logs is kept in stderr.
type inProcess struct {
	args   []string
	out    *io.PipeReader
	stderr *testlog.Buffer
	cancel context.CancelFunc
	code   chan int

	stopOnce sync.Once
	exit     int
}

// startRun starts run with args until ctx ends or the command is stopped.
func startRun(ctx context.Context, args ...string) *inProcess {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	p := &inProcess{args: args, out: pr, stderr: &testlog.Buffer{}, cancel: cancel, code: make(chan int, 1)}
	go func() {
		p.code <- run(ctx, args, pw, p.stderr)
		pw.Close()
	}()
	return p
}

// onFreePorts are the flags of serve and demo that put every surface on a
// free port.
var onFreePorts = []string{"--listen-online", "127.0.0.1:0", "--listen-access", "127.0.0.1:0",
	"--listen-terminal", "127.0.0.1:0", "--listen-ops", "127.0.0.1:0"}

// demoArgs are the arguments of `instore demo` on free ports, then extra.
func demoArgs(extra ...string) []string {
	return slices.Concat([]string{"demo"}, onFreePorts, extra)
}

// discardRest reads what the command prints from now on and drops it, so
// that it never blocks on writing.
func (p *inProcess) discardRest() { go io.Copy(io.Discard, p.out) }

// wait returns the exit code once the command has ended on its own (or
// by p.cancel).
func (p *inProcess) wait() int {
	p.stopOnce.Do(func() {
		p.exit = <-p.code
		p.cancel()
	})
	return p.exit
}

// stop interrupts the command as Ctrl-C does and returns its exit code;
// -1, an error of t, when it does not end within 20 s. Only the first call
// (of stop or wait) waits; later ones return the same code.
func (p *inProcess) stop(t *testing.T) int {
	p.stopOnce.Do(func() {
		p.cancel()
		select {
		case p.exit = <-p.code:
		case <-time.After(20 * time.Second):
			t.Errorf("instore %v did not end within 20 s of its cancellation", p.args)
			p.exit = -1
		}
	})
	return p.exit
}
