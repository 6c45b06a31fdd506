package sim

import (
	"context"
	"encoding/json"
	"errors"
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

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/testwait"
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

// upToWait returns the events up to the nth wait, that one included (all
// of them if there were fewer waits).
func (r *recorder) upToWait(n int) []string {
	got := r.list()
	for i, e := range got {
		if e == "wait" {
			if n--; n == 0 {
				return got[:i+1]
			}
		}
	}
	return got
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
	// Up to the last wait taken: the terminal goes on to its next round
	// (a, b, a wait nobody takes) meanwhile.
	if got := rec.upToWait(len(steps) + 1); !slices.Equal(got, want) {
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

func TestHelloAndLinkCode(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	r := startTerminal(t, g, func(c *Config) {
		c.Model = instore.ModelMobile
		c.SoftwareVersion = "2.3.4"
	})
	c := g.accept(t)
	want := protocol.Hello{Protocol: 1, Model: "mobile", SoftwareVersion: "2.3.4"}
	if c.hello != want {
		t.Errorf("hello = %+v, want %+v", c.hello, want)
	}

	c.send(protocol.TypeLinkCode, "", "", protocol.LinkCode{Code: "123456"})
	st := waitState(t, r.Terminal, "showing the link code", func(s State) bool { return s.Screen == "Link code 123456" })
	if st.LinkCode != "123456" || st.TerminalID != "" || !st.Online || st.SerialNumber != testSerial || st.Model != "mobile" {
		t.Errorf("State() = %+v, want link code 123456, no terminal ID, online", st)
	}

	c.link("10000001")
	st = waitState(t, r.Terminal, "linked", func(s State) bool { return s.TerminalID == "10000001" })
	if st.Screen != "Idle" || st.LinkCode != "" {
		t.Errorf("State() = %+v, want screen Idle and no link code", st)
	}
}

func TestDefaultsAndWrongSecretRetries(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	startTerminal(t, g, func(c *Config) { c.Secret = "wrong" })
	testwait.For(t, "3 refused attempts: the terminal keeps retrying", func() bool { return g.refused.Load() >= 3 })

	g2 := newGateway(t)
	startTerminal(t, g2, func(c *Config) { c.Model = "" })
	c := g2.accept(t)
	want := protocol.Hello{Protocol: protocol.Version, Model: instore.ModelCountertop, SoftwareVersion: DefaultSoftwareVersion}
	if c.hello != want {
		t.Errorf("hello = %+v, want %+v", c.hello, want)
	}
}

func TestUnknownMessagesIgnored(t *testing.T) {
	_, _, c := linked(t, nil)
	c.send("firmware-party", "", "x", map[string]int{"n": 1})
	c.send(protocol.TypeConfirm, "no-such-id", "", nil)
	c.send(protocol.TypeCancel, "", "no-such-ref", protocol.Cancel{Reason: instore.CancelByECR})
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte("not json")); err != nil {
		t.Fatal(err)
	}
	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
}

func TestCloseCodesStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code int
		want error
	}{
		{protocol.CloseRevoked, ErrRevoked},
		{protocol.CloseUnsupported, ErrUnsupported},
	} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			t.Parallel()
			g := newGateway(t)
			r := startTerminal(t, g, nil)
			c := g.accept(t)
			if err := c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(tc.code, "bye"), time.Now().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			if err := r.waitExit(t); !errors.Is(err, tc.want) {
				t.Errorf("Run = %v, want %v", err, tc.want)
			}
			if st := r.State(); st.Online || st.Screen != "Offline" {
				t.Errorf("State() = %+v, want offline", st)
			}
		})
	}
}

func TestRunTwice(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	r := startTerminal(t, g, nil)
	g.accept(t)
	if err := r.Run(t.Context()); !errors.Is(err, ErrRunning) {
		t.Errorf("second Run = %v, want ErrRunning", err)
	}
}

func TestLogsKeepSecretsOut(t *testing.T) {
	g, r, c := linked(t, nil)
	c.send(protocol.TypeLinkCode, "", "", protocol.LinkCode{Code: "123456"})
	c.link("10000001")
	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
	c.result("ref-1")
	c.ws.Close()
	g.accept(t) // the terminal logged the end of the session and came back

	lines := strings.Split(strings.TrimSpace(r.log.String()), "\n")
	sawSerial, sawTerminal := false, false
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["serialNumber"] == testSerial {
			sawSerial = true
		}
		if m["terminalId"] == "10000001" {
			sawTerminal = true
		}
		// Identifiers only under their keys, which the service's handler
		// fingerprints; the secret nowhere.
		delete(m, "serialNumber")
		delete(m, "terminalId")
		delete(m, "linkCode")
		rest, _ := json.Marshal(m)
		for _, s := range []string{testSecret, testSerial, "10000001", "123456"} {
			if strings.Contains(string(rest), s) {
				t.Errorf("log line carries %q outside its key: %s", s, line)
			}
		}
	}
	if !sawSerial || !sawTerminal {
		t.Errorf("serialNumber logged %v, terminalId logged %v; want both under their keys", sawSerial, sawTerminal)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	good := Config{GatewayURL: "ws://127.0.0.1:8082/terminal/v1/connect", SerialNumber: "S1", Secret: "x"}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"unknown model", func(c *Config) { c.Model = "toaster" }},
		{"no serial", func(c *Config) { c.SerialNumber = "" }},
		{"colon in serial", func(c *Config) { c.SerialNumber = "a:b" }},
		{"space in serial", func(c *Config) { c.SerialNumber = "a b" }},
		{"no secret", func(c *Config) { c.Secret = "" }},
		{"no URL", func(c *Config) { c.GatewayURL = "" }},
		{"ftp URL", func(c *Config) { c.GatewayURL = "ftp://host/x" }},
		{"credentials in URL", func(c *Config) { c.GatewayURL = "ws://u:p@host/x" }},
		{"GatewayURL and GatewayURLs", func(c *Config) { c.GatewayURLs = []string{"ws://other/x"} }},
		{"empty URL list", func(c *Config) { c.GatewayURL, c.GatewayURLs = "", []string{} }},
		{"second URL invalid", func(c *Config) { c.GatewayURL, c.GatewayURLs = "", []string{"ws://a/x", "ftp://b/x"} }},
		{"second URL with credentials", func(c *Config) { c.GatewayURL, c.GatewayURLs = "", []string{"ws://a/x", "ws://u:p@b/x"} }},
		{"URL twice", func(c *Config) { c.GatewayURL, c.GatewayURLs = "", []string{"ws://a/x", "http://a/x"} }},
		{"negative delay", func(c *Config) { c.Delay = -time.Second }},
		{"max below min", func(c *Config) { c.BackoffMin, c.BackoffMax = time.Second, time.Millisecond }},
	} {
		cfg := good
		tc.mod(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New = nil error, want one", tc.name)
		}
	}
	term, err := New(good)
	if err != nil {
		t.Fatalf("New(%+v) = %v", good, err)
	}
	if st := term.State(); st.Model != instore.ModelCountertop || st.Online || st.Screen != "Offline" {
		t.Errorf("new terminal State() = %+v, want countertop, offline", st)
	}
	cfg := good
	cfg.GatewayURL = "https://gw.example.com/terminal/v1/connect"
	term, err = New(cfg)
	if err != nil || !slices.Equal(term.GatewayURLs(), []string{"wss://gw.example.com/terminal/v1/connect"}) {
		t.Fatalf("https URL: %v, URLs %q; want wss", err, term.GatewayURLs())
	}
	cfg = good
	cfg.GatewayURL = ""
	cfg.GatewayURLs = []string{"ws://a.example/terminal/v1/connect", "http://b.example/terminal/v1/connect"}
	term, err = New(cfg)
	if err != nil || !slices.Equal(term.GatewayURLs(), []string{"ws://a.example/terminal/v1/connect", "ws://b.example/terminal/v1/connect"}) {
		t.Errorf("two URLs: %v, URLs %q; want both as ws, in order", err, term.GatewayURLs())
	}
}

// TestConfirmsOwedMessages: the terminal confirms what the gateway sends
// again after every reconnect until confirmed (docs/terminal-protocol.md,
// section 7): a cancel, whether it knows the ref or not, a reversal of a
// late approval, a print; and a print sent again is not printed twice.
func TestConfirmsOwedMessages(t *testing.T) {
	g, r, c := linked(t, cardWaits)

	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
	c.expectConfirm(c.cancel("ref-1", instore.CancelDeadline), "ref-1")
	if _, res, _ := c.result("ref-1"); res.StatusID != instore.StatusTechnicalError {
		t.Errorf("after cancel DEADLINE: statusId %d, want %d", res.StatusID, instore.StatusTechnicalError)
	}
	c.expectConfirm(c.cancel("ref-unknown", instore.CancelAckTimeout), "ref-unknown")

	r.SetNextPrint(instore.PrintOutOfPaper)
	print := func(c *gwConn, printID string) instore.PrintStatus {
		t.Helper()
		id := c.send(protocol.TypePrint, "", printID, protocol.Print{Lines: []string{"Thank you"}})
		c.expectConfirm(id, printID)
		env := c.expect(protocol.TypePrintResult)
		var pr protocol.PrintResult
		if err := protocol.DecodeData(&env, &pr); err != nil || env.Ref != printID {
			t.Fatalf("print-result %+v: %v, want one for %s", env, err, printID)
		}
		return pr.StatusID
	}
	if got := print(c, "prt-1"); got != instore.PrintOutOfPaper {
		t.Errorf("print prt-1 = %d, want the outcome set, %d", got, instore.PrintOutOfPaper)
	}
	// The gateway sends it again after a reconnect: the same status, not a
	// second print (which would take the next outcome, SUCCESS).
	c.ws.Close()
	c2 := g.accept(t)
	c2.link("10000001")
	c2.expect(protocol.TypeResult) // the result of ref-1, never confirmed
	if got := print(c2, "prt-1"); got != instore.PrintOutOfPaper {
		t.Errorf("print prt-1 again = %d, want %d as the first time", got, instore.PrintOutOfPaper)
	}
	if got := print(c2, "prt-2"); got != instore.PrintSuccess {
		t.Errorf("print prt-2 = %d, want %d", got, instore.PrintSuccess)
	}
}

func TestResendUntilConfirmed(t *testing.T) {
	g, _, c := linked(t, nil)
	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
	first, res1, _ := c.result("ref-1")

	c.ws.Close() // the gateway drops the session before confirming
	c2 := g.accept(t)
	again := c2.expect(protocol.TypeResult)
	if again.ID != first.ID || again.Ref != "ref-1" || decodeResult(t, again).AuthorizationCode != res1.AuthorizationCode {
		t.Fatalf("after reconnecting: %+v, want the same result with id %q", again, first.ID)
	}
	c2.confirm(again.ID)
	// Make sure the confirm was read before closing: the terminal answers
	// in order.
	c2.expectAck(c2.purchase("ref-2", payment(1000)), "ref-2")
	env2, _, _ := c2.result("ref-2")
	c2.confirm(env2.ID)
	c2.expectConfirm(c2.send(protocol.TypeReversal, "", "ref-none", protocol.Reversal{Reason: instore.ReversalLateApproval}), "ref-none")

	if err := c2.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "restart"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	c2.waitClosed()
	c3 := g.accept(t)
	id := c3.purchase("ref-3", payment(1000))
	if env := c3.next(); env.Type != protocol.TypeAck || env.Re != id {
		t.Errorf("first message after a confirmed result: %+v, want the ack of ref-3 (nothing resent)", env)
	}
}
