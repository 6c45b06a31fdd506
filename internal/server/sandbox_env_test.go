package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/clocktest"
	sandboxapi "github.com/instore-dev/instore/internal/sandbox"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testwait"
)

// The sandbox harness of the server tests: a sandbox server with its
// virtual terminals, and the ECR's requests and their replies.

// Short time-outs so that the WP25, WP36 and sandbox timing rules run in
// seconds.
const (
	testAck      = 1500 * time.Millisecond
	testDeadline = 3 * time.Second
)

func sandboxConfig(c *server.Config) {
	c.Sandbox = true
	c.AckTimeout = testAck
	c.TransactionDeadline = testDeadline
	c.SimDelay = 0
	c.RateLimit = 0
}

// txJSON is a transaction as the Online API shows it: the root's one wire
// type.
type txJSON = instore.TransactionWire

type problem struct {
	Type           string `json:"type"`
	Title          string `json:"title"`
	Status         int    `json:"status"`
	ErrorCode      string `json:"errorCode"`
	OnlineAPIRefID string `json:"onlineAPIRefId"`
	Reason         string `json:"reason"`
	Errors         []struct {
		Field string `json:"field"`
	} `json:"errors"`
}

// sandbox is a running sandbox server with the merchant's three terminal IDs
// linked to the virtual devices (countertop, mobile, PIN pad).
type sandbox struct {
	*env
	terminals []string
}

func startSandbox(t *testing.T, mutate ...func(*server.Config)) *sandbox {
	t.Helper()
	return startSandboxWith(t, nil, mutate...)
}

// startSandboxWith is startSandbox with a function called between New and
// Start.
func startSandboxWith(t *testing.T, beforeStart func(*server.Server), mutate ...func(*server.Config)) *sandbox {
	t.Helper()
	e := startWith(t, func(c *server.Config) {
		sandboxConfig(c)
		for _, m := range mutate {
			m(c)
		}
	}, beforeStart)
	ts, err := e.ad.AllocateTerminals(context.Background(), e.merchantRec.ID, 3)
	must(t, err)
	s := &sandbox{env: e}
	for _, d := range s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool {
		for _, d := range ds {
			if !d.Online || d.LinkCode == nil {
				return false
			}
		}
		return len(ds) == 3
	}) {
		i := len(s.terminals)
		resp, body := s.post(t, "/in-store/api/v1/terminal/link", map[string]any{"terminalId": ts[i].TerminalID, "linkCode": *d.LinkCode}, nil).parts()
		if resp.StatusCode != 200 {
			t.Fatalf("link %s: %d %s", d.Model, resp.StatusCode, body)
		}
		s.terminals = append(s.terminals, ts[i].TerminalID)
	}
	s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool {
		for _, d := range ds {
			if d.TerminalID == nil || !d.Online {
				return false
			}
		}
		return true
	})
	// Online is not yet ready: wait for what a purchase needs.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	must(t, e.srv.WaitSandboxReady(ctx))
	return s
}

// waitDevices polls GET /sandbox/v1/devices until cond holds (bounded).
func (s *sandbox) waitDevices(t *testing.T, cond func([]sandboxapi.DeviceJSON) bool) []sandboxapi.DeviceJSON {
	t.Helper()
	var out struct{ Devices []sandboxapi.DeviceJSON }
	testwait.ForNil(t, "the devices to reach the expected state", func() error {
		resp, body := s.get(t, "/sandbox/v1/devices").parts()
		if resp.StatusCode != 200 {
			t.Fatalf("GET /sandbox/v1/devices = %d %s", resp.StatusCode, body)
		}
		out.Devices = nil
		must(t, json.Unmarshal(body, &out))
		if !cond(out.Devices) {
			return fmt.Errorf("%s", body)
		}
		return nil
	})
	return out.Devices
}

// reply is an HTTP answer with its body read.
type reply struct {
	resp *http.Response
	body []byte
}

func (s *sandbox) get(t *testing.T, path string) reply {
	t.Helper()
	resp, b := s.do(t, "GET", s.online+path, nil, s.auth(s.token, s.key))
	return reply{resp, b}
}

func (s *sandbox) post(t *testing.T, path string, body any, extra map[string]string) reply {
	t.Helper()
	return s.send(t, "POST", path, body, extra)
}

// send sends a request of method to the Online API with the merchant's
// credentials, body (when not nil) as JSON, and the extra headers.
func (s *sandbox) send(t *testing.T, method, path string, body any, extra map[string]string) reply {
	t.Helper()
	return s.sendJSON(t, method, s.online+path, body, s.auth(s.token, s.key), extra)
}

func (s *sandbox) purchase(t *testing.T, terminal string, amount int64) reply {
	t.Helper()
	return s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": terminal, "amount": amount, "currency": "SEK"}, nil)
}

func (r reply) parts() (*http.Response, []byte) { return r.resp, r.body }

// tx decodes a transaction answer with the wanted status.
func (r reply) tx(t *testing.T, want int) txJSON {
	t.Helper()
	if r.resp.StatusCode != want {
		t.Fatalf("status = %d %s, want %d", r.resp.StatusCode, r.body, want)
	}
	var tx txJSON
	must(t, json.Unmarshal(r.body, &tx))
	return tx
}

// problem checks a problem answer: status and code (a WP code or a
// problem name).
func (r reply) problem(t *testing.T, status int, code string) problem {
	t.Helper()
	var p problem
	json.Unmarshal(r.body, &p)
	if r.resp.StatusCode != status || p.ErrorCode != code && p.Type != "urn:instore:problem:"+code {
		t.Fatalf("answer = %d %s, want %d %s", r.resp.StatusCode, r.body, status, code)
	}
	return p
}

// final long-polls a transaction until it is final (bounded by the HTTP
// client's time-out, never by sleeping).
func (s *sandbox) final(t *testing.T, ref string) txJSON {
	t.Helper()
	for range 10 {
		tx := s.get(t, "/in-store/api/v1/transaction/"+ref+"?wait=20").tx(t, 200)
		if tx.StatusID != instore.StatusPending {
			return tx
		}
	}
	t.Fatalf("transaction %s still PENDING", ref)
	return txJSON{}
}

// transaction reads the transaction ref, which must exist.
func (s *sandbox) transaction(t *testing.T, ref string) txJSON {
	t.Helper()
	return s.get(t, "/in-store/api/v1/transaction/"+ref).tx(t, 200)
}

// wantStatus checks a transaction's status and error code ("" for none);
// what names the transaction in the failure.
func wantStatus(t *testing.T, tx txJSON, status instore.TransactionStatus, code, what string) {
	t.Helper()
	if tx.StatusID != status || string(tx.ErrorCode) != code {
		t.Errorf("%s: status %d, error code %q; want %d, %q", what, tx.StatusID, tx.ErrorCode, status, code)
	}
}

// The service's time-outs run on its clock: these tests drive a fake one
// (internal/clocktest) instead of waiting for them in real time.

// newClock returns a fake clock at the current time and the option that
// gives it to a server.
func newClock() (*clocktest.Clock, func(*server.Config)) {
	ck := clocktest.New(time.Now().UTC())
	return ck, func(c *server.Config) { c.Clock = ck }
}

// advance waits until the server armed a time-out due d from now (bounded,
// in real time), then moves the clock by d, running what falls due. Tests
// pick durations the periodic sweeps do not have (30 s, 10 min).
func advance(t *testing.T, ck *clocktest.Clock, d time.Duration) {
	t.Helper()
	if !ck.WaitFor(d) {
		t.Fatalf("no time-out due within %s was armed", d)
	}
	ck.Advance(d)
}

// advanceDuring runs req, a request that waits for a time-out of d, while
// the clock is advanced past it (advance), and returns req's answer.
func advanceDuring(t *testing.T, ck *clocktest.Clock, d time.Duration, req func() reply) reply {
	t.Helper()
	answer := make(chan reply, 1)
	go func() { answer <- req() }()
	advance(t, ck, d)
	return <-answer
}
