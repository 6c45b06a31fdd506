package sim

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore/internal/protocol"
)

// recorder records, in order, the connection attempts the test's nodes
// see and the waits the terminal asks for. Its sleep hands every wait to
// the test over an unbuffered channel instead of sleeping: the terminal
// goes on only once the test has taken the wait, so the test sets the
// pace and nothing depends on the clock.
type recorder struct {
	mu     sync.Mutex
	events []string
	nwaits int
	waits  chan time.Duration
	// onWait, if set before the terminal starts, runs in the terminal's
	// goroutine at its nth wait (from 1), before the test takes the wait:
	// no connection attempt runs meanwhile.
	onWait func(n int)
}

func newRecorder() *recorder { return &recorder{waits: make(chan time.Duration)} }

func (r *recorder) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *recorder) sleep(ctx context.Context, d time.Duration) bool {
	r.add("wait")
	r.mu.Lock()
	r.nwaits++
	n := r.nwaits
	r.mu.Unlock()
	if r.onWait != nil {
		r.onWait(n)
	}
	select {
	case r.waits <- d:
		return true
	case <-ctx.Done():
		return false
	}
}

// hook installs the recorder's sleep in a terminal (startTerminalWith).
func (r *recorder) hook(term *Terminal) { term.sleep = r.sleep }

// wait returns the next wait the terminal asks for.
func (r *recorder) wait(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-r.waits:
		return d
	case <-time.After(waitTimeout):
		t.Fatalf("the terminal asked for no wait; attempts %v", r.list())
		return 0
	}
}

// node is a gateway node that records every connection attempt under its
// name and, while down, refuses it with 503 as a draining node does.
type node struct {
	*gateway
	name string
	down atomic.Bool
}

func newNode(t *testing.T, name string, rec *recorder) *node {
	t.Helper()
	n := &node{name: name, gateway: &gateway{devices: map[string]string{testSerial: testSecret}, conns: make(chan *gwConn, 16)}}
	serve := n.gateway.serve(t)
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.add(name)
		if n.down.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		serve(w, r)
	}))
	t.Cleanup(n.srv.Close)
	return n
}

// deadURL returns a gateway URL on which nothing listens any more.
func deadURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + protocol.Path
	srv.Close()
	return u
}

// acceptNoWait waits for n's next session and fails if the terminal asks
// for a wait first.
func acceptNoWait(t *testing.T, n *node, rec *recorder) *gwConn {
	t.Helper()
	select {
	case c := <-n.conns:
		c.t = t
		return c
	case d := <-rec.waits:
		t.Fatalf("the terminal waited %s before connecting to %s; attempts %v", d, n.name, rec.list())
	case <-time.After(waitTimeout):
		t.Fatalf("no session on %s; attempts %v", n.name, rec.list())
	}
	return nil
}

// urls makes a mod for startTerminalWith that sets the gateway URLs.
func urls(us ...string) func(*Config) {
	return func(c *Config) { c.GatewayURL, c.GatewayURLs = "", us }
}

func closeWith(t *testing.T, c *gwConn, code int) {
	t.Helper()
	if err := c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, "bye"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
}

// A dead node and a draining one are skipped at once: the terminal is on
// the third URL without a wait, having tried them in order.
func TestFailoverSkipsDeadNodesAtOnce(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	draining, live := newNode(t, "draining", rec), newNode(t, "live", rec)
	draining.down.Store(true)
	startTerminalWith(t, nil, func(c *Config) {
		urls(deadURL(t), draining.url(), live.url())(c)
		c.BackoffMin, c.BackoffMax = time.Hour, time.Hour // a wait would show
	}, rec.hook)
	acceptNoWait(t, live, rec)
	if got, want := rec.list(), []string{"draining", "live"}; !slices.Equal(got, want) {
		t.Errorf("attempts %v, want %v", got, want)
	}
}

// A node that closes with 1012 (restart) or 1001 (going away) sends the
// terminal to the next URL at once, and the result it had not seen
// confirmed goes there with it. An ordinary drop of a session that got
// as far as hello is no failure either: on to the next URL at once.
func TestFailoverOnRestart(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	n1, n2 := newNode(t, "n1", rec), newNode(t, "n2", rec)
	startTerminalWith(t, nil, func(c *Config) {
		urls(n1.url(), n2.url())(c)
		c.BackoffMin, c.BackoffMax = time.Hour, time.Hour
	}, rec.hook)

	c1 := acceptNoWait(t, n1, rec)
	c1.link("10000001")
	c1.expectAck(c1.purchase("ref-1", payment(1000)), "ref-1")
	first, _, _ := c1.result("ref-1") // not confirmed
	closeWith(t, c1, websocket.CloseServiceRestart)

	c2 := acceptNoWait(t, n2, rec)
	if again := c2.expect(protocol.TypeResult); again.ID != first.ID {
		t.Errorf("result resent on n2 with id %q, want %q", again.ID, first.ID)
	}
	closeWith(t, c2, websocket.CloseGoingAway)

	c3 := acceptNoWait(t, n1, rec) // after the last URL, the first
	c3.ws.Close()                  // a network drop after hello
	acceptNoWait(t, n2, rec)
	if got, want := rec.list(), []string{"n1", "n2", "n1", "n2"}; !slices.Equal(got, want) {
		t.Errorf("attempts %v, want %v", got, want)
	}
}

// With every node down the terminal waits only after a full round, the
// step doubling up to BackoffMax, each wait drawn between half the step
// and the step; a session that got as far as hello starts it over.
func TestFailoverBackoffAfterFullRound(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	a, b := newNode(t, "a", rec), newNode(t, "b", rec)
	a.down.Store(true)
	b.down.Store(true)
	const minStep, maxStep = time.Second, 8 * time.Second
	steps := []time.Duration{1, 2, 4, 8, 8, 8, 8, 8}
	rec.onWait = func(n int) {
		if n == len(steps) {
			b.down.Store(false) // b is up for the round after the last wait
		}
	}
	startTerminalWith(t, nil, func(c *Config) {
		urls(a.url(), b.url())(c)
		c.BackoffMin, c.BackoffMax = minStep, maxStep
	}, rec.hook)

	var waits []time.Duration
	for i, step := range steps {
		step *= time.Second
		d := rec.wait(t)
		if d < step/2 || d > step {
			t.Errorf("wait %d = %s, want between %s and %s", i+1, d, step/2, step)
		}
		waits = append(waits, d)
	}
	capped := waits[3:]
	if slices.Min(capped) == slices.Max(capped) {
		t.Errorf("the capped waits %v are all the same, want jitter", capped)
	}

	// b is up: after a (down) the terminal is on b, then b drops it.
	c := acceptNoWait(t, b, rec)
	b.down.Store(true)
	c.ws.Close()
	if d := rec.wait(t); d < minStep/2 || d > minStep {
		t.Errorf("wait after a session = %s, want the first step again (%s to %s)", d, minStep/2, minStep)
	}
	var want []string
	for range steps {
		want = append(want, "a", "b", "wait")
	}
	want = append(want, "a", "b", "a", "b", "wait")
	if got := rec.list(); !slices.Equal(got, want) {
		t.Errorf("attempts and waits\n%v\nwant\n%v", got, want)
	}
}

// How each close code of a session that got as far as hello is followed,
// with one URL: at once, or after a wait (4409, and faults that
// reconnecting at once could repeat).
func TestReconnectByCloseCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code int // 0: the connection drops without a close frame
		wait bool
	}{
		{websocket.CloseServiceRestart, false},
		{websocket.CloseGoingAway, false},
		{websocket.CloseNormalClosure, false},
		{0, false},
		{protocol.CloseReplaced, true},
		{websocket.CloseInternalServerErr, true},
		{protocol.CloseMalformed, true},
		{protocol.CloseTimeout, true},
	} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			t.Parallel()
			rec := newRecorder()
			n := newNode(t, "n", rec)
			r := startTerminalWith(t, nil, urls(n.url()), rec.hook)
			c := acceptNoWait(t, n, rec)
			waitState(t, r.Terminal, "online", func(s State) bool { return s.Online })
			if tc.code == 0 {
				c.ws.Close()
			} else {
				closeWith(t, c, tc.code)
			}
			if tc.wait {
				if d := rec.wait(t); d <= 0 {
					t.Errorf("wait %s, want a backoff step", d)
				}
				n.accept(t)
			} else {
				acceptNoWait(t, n, rec)
			}
			if got, want := rec.list(), map[bool][]string{false: {"n", "n"}, true: {"n", "wait", "n"}}[tc.wait]; !slices.Equal(got, want) {
				t.Errorf("attempts %v, want %v", got, want)
			}
		})
	}
}
