package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

func evtID(n int) string { return instore.EventID(int64(n)) }

// sseEvent is the stream message of event n, as the service writes it.
func sseEvent(n int) string {
	return fmt.Sprintf("id: %s\nevent: transaction.progress\ndata: {\"id\":%q,\"type\":\"transaction.progress\",\"createdAt\":\"2026-01-02T03:04:05.000000Z\",\"data\":{\"onlineAPIRefId\":\"tx_%d\",\"statusId\":14,\"status\":\"PENDING\",\"version\":%d}}\n\n",
		evtID(n), evtID(n), n, n)
}

// streamServer serves one scripted stream a connection (the last one
// repeats) and records each request.
type streamServer struct {
	t     *testing.T
	mu    sync.Mutex
	reqs  []*http.Request
	conns []func(w http.ResponseWriter, r *http.Request)
}

func (s *streamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, r.Clone(context.Background()))
	h := s.conns[min(n, len(s.conns)-1)]
	s.mu.Unlock()
	h(w, r)
}

func (s *streamServer) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

// stream answers an event stream: the text, then, with hold, it stays open
// (a ping now and then) until the client goes.
func stream(text string, hold bool) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, text)
		w.(http.Flusher).Flush()
		if !hold {
			return
		}
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
				fmt.Fprint(w, ": ping\n\n")
				w.(http.Flusher).Flush()
			}
		}
	}
}

func answer(status int, body string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
}

func newStreamClient(t *testing.T, s *streamServer) *client.Client {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := client.New(client.Config{
		OnlineAPIURL: srv.URL, Online: client.Credentials{SubscriptionKey: "isk_test", AccessToken: "tok_test"},
		RetryDelay: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// collect follows events until it has n of them or an error ends the
// iteration.
func collect(t *testing.T, c *client.Client, q client.EventQuery, n int) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ids []string
	for ev, err := range c.FollowEvents(ctx, q) {
		if err != nil {
			return ids, err
		}
		ids = append(ids, ev.ID)
		if len(ids) == n {
			break
		}
	}
	return ids, nil
}

func TestFollowEventsResumes(t *testing.T) {
	s := &streamServer{t: t, conns: []func(http.ResponseWriter, *http.Request){
		// The stream breaks after three events, then in the middle of the
		// fifth; the service replays the third and the fourth, which the
		// client has yielded already.
		stream("retry: 5\n\n"+sseEvent(1)+sseEvent(2)+sseEvent(3), false),
		stream(sseEvent(3)+sseEvent(4)+"id: "+evtID(5)+"\nevent: transaction.progress\ndata: {\"id\":", false),
		stream(sseEvent(4)+sseEvent(5)+sseEvent(6), true),
	}}
	c := newStreamClient(t, s)
	ids, err := collect(t, c, client.EventQuery{Types: []instore.EventType{instore.EventTransactionProgress, instore.EventTransactionFinal}, TerminalID: "10000001"}, 6)
	if err != nil {
		t.Fatalf("FollowEvents: %v", err)
	}
	if want := []string{evtID(1), evtID(2), evtID(3), evtID(4), evtID(5), evtID(6)}; strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("events = %v, want %v: each once, in order", ids, want)
	}
	reqs := s.requests()
	if len(reqs) != 3 {
		t.Fatalf("connections = %d, want 3", len(reqs))
	}
	for i, want := range []string{"", evtID(3), evtID(4)} {
		r := reqs[i]
		if got := r.Header.Get("Last-Event-ID"); got != want {
			t.Errorf("connection %d Last-Event-ID = %q, want %q", i+1, got, want)
		}
		if r.Header.Get("Accept") != "text/event-stream" || r.Header.Get("Authorization") != "Bearer tok_test" || r.Header.Get("Ocp-Apim-Subscription-Key") != "isk_test" {
			t.Errorf("connection %d headers = %v", i+1, r.Header)
		}
		if r.URL.Path != "/in-store/api/v1/events/stream" || r.URL.Query().Get("types") != "transaction.progress,transaction.final" || r.URL.Query().Get("terminalId") != "10000001" || r.URL.Query().Has("after") {
			t.Errorf("connection %d URL = %s", i+1, r.URL)
		}
	}
}

func TestFollowEventsAfter(t *testing.T) {
	s := &streamServer{t: t, conns: []func(http.ResponseWriter, *http.Request){stream(sseEvent(8)+sseEvent(9), true)}}
	c := newStreamClient(t, s)
	// The service is asked to resume after evt_8; were it to send it
	// anyway, the client would drop it.
	ids, err := collect(t, c, client.EventQuery{After: evtID(8)}, 1)
	if err != nil || len(ids) != 1 || ids[0] != evtID(9) {
		t.Fatalf("FollowEvents after %s = %v, %v; want [%s]", evtID(8), ids, err, evtID(9))
	}
	if got := s.requests()[0].Header.Get("Last-Event-ID"); got != evtID(8) {
		t.Errorf("Last-Event-ID = %q, want %q", got, evtID(8))
	}
	if _, err := collect(t, c, client.EventQuery{After: "yesterday"}, 1); err == nil {
		t.Error("FollowEvents with After not an event id: no error")
	}
}

func TestFollowEventsIdleStreamReconnects(t *testing.T) {
	defer client.SetStreamIdle(100 * time.Millisecond)()
	silent := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "retry: 5\n\n"+sseEvent(1))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a half-open connection: nothing more, not even pings
	}
	s := &streamServer{t: t, conns: []func(http.ResponseWriter, *http.Request){silent, stream(sseEvent(2), true)}}
	c := newStreamClient(t, s)
	ids, err := collect(t, c, client.EventQuery{}, 2)
	if err != nil || strings.Join(ids, " ") != evtID(1)+" "+evtID(2) {
		t.Fatalf("FollowEvents = %v, %v", ids, err)
	}
	if got := s.requests()[1].Header.Get("Last-Event-ID"); got != evtID(1) {
		t.Errorf("after a silent stream: Last-Event-ID = %q, want %q", got, evtID(1))
	}
}

func TestFollowEventsIDOnlyMovesTheCursor(t *testing.T) {
	s := &streamServer{t: t, conns: []func(http.ResponseWriter, *http.Request){
		stream("retry: 5\nid: "+evtID(41)+"\n\n", false),
		stream(sseEvent(42), true),
	}}
	c := newStreamClient(t, s)
	if ids, err := collect(t, c, client.EventQuery{}, 1); err != nil || len(ids) != 1 {
		t.Fatalf("FollowEvents = %v, %v", ids, err)
	}
	if got := s.requests()[1].Header.Get("Last-Event-ID"); got != evtID(41) {
		t.Errorf("Last-Event-ID after an id-only block = %q, want %q", got, evtID(41))
	}
}

func TestFollowEventsErrors(t *testing.T) {
	validation := problem(400, "validation", `,"errors":[{"field":"types","message":"must be event types"}]`)
	cases := []struct {
		name      string
		conns     []func(http.ResponseWriter, *http.Request)
		wantConns int
		wantCode  string // of the error that ends it; "" for none
		wantIDs   int
	}{
		{"a validation problem ends it", []func(http.ResponseWriter, *http.Request){answer(400, validation)}, 1, "validation", 0},
		{"forbidden ends it", []func(http.ResponseWriter, *http.Request){answer(403, problem(403, "forbidden", ""))}, 1, "forbidden", 0},
		{"503 and 429 are retried", []func(http.ResponseWriter, *http.Request){
			answer(503, problem(503, "unavailable", "")), answer(429, problem(429, "rate-limited", "")), stream(sseEvent(1), true),
		}, 3, "", 1},
		{"an answer that is not a stream ends it", []func(http.ResponseWriter, *http.Request){func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"events":[],"nextCursor":null}`)
		}}, 1, "", 0},
		{"an event that does not decode ends it", []func(http.ResponseWriter, *http.Request){stream("id: "+evtID(1)+"\ndata: {not json\n\n", true)}, 1, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &streamServer{t: t, conns: tc.conns}
			c := newStreamClient(t, s)
			ids, err := collect(t, c, client.EventQuery{}, 1)
			if len(ids) != tc.wantIDs {
				t.Errorf("events = %v, want %d", ids, tc.wantIDs)
			}
			if tc.wantIDs == 0 && err == nil {
				t.Fatal("no error")
			}
			if tc.wantIDs > 0 && err != nil {
				t.Fatalf("error %v", err)
			}
			if got := client.ErrorCode(err); got != tc.wantCode {
				t.Errorf("ErrorCode(%v) = %q, want %q", err, got, tc.wantCode)
			}
			if got := len(s.requests()); got != tc.wantConns {
				t.Errorf("connections = %d, want %d", got, tc.wantConns)
			}
		})
	}
}

func TestFollowEventsEndsWithItsContext(t *testing.T) {
	s := &streamServer{t: t, conns: []func(http.ResponseWriter, *http.Request){stream(sseEvent(1), true)}}
	c := newStreamClient(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	var ids []string
	var last error
	for ev, err := range c.FollowEvents(ctx, client.EventQuery{}) {
		if err != nil {
			last = err
			continue // the iterator ends by itself after ctx's error
		}
		ids = append(ids, ev.ID)
		cancel()
	}
	if len(ids) != 1 || !errors.Is(last, context.Canceled) {
		t.Errorf("FollowEvents cancelled after one event = %v, %v; want one event and context.Canceled", ids, last)
	}
	// While waiting to reconnect too.
	s = &streamServer{t: t, conns: []func(http.ResponseWriter, *http.Request){answer(503, problem(503, "unavailable", ""))}}
	c = newStreamClient(t, s)
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := collectCtx(ctx, c); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("FollowEvents of an unavailable service = %v, want its context's deadline", err)
	}
}

func collectCtx(ctx context.Context, c *client.Client) ([]string, error) {
	var ids []string
	for ev, err := range c.FollowEvents(ctx, client.EventQuery{}) {
		if err != nil {
			return ids, err
		}
		ids = append(ids, ev.ID)
	}
	return ids, nil
}

func TestFollowEventsRenewsARevokedToken(t *testing.T) {
	var tokens int
	var mu sync.Mutex
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth2/token", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokens++
		n := tokens
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok_%d","token_type":"Bearer","expires_in":3600}`, n)
	})
	mux.HandleFunc("GET /in-store/api/v1/events/stream", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok_2" {
			answer(401, problem(401, "unauthorized", ""))(w, r)
			return
		}
		stream(sseEvent(1), true)(w, r)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := client.New(client.Config{OnlineAPIURL: srv.URL, Online: client.Credentials{SubscriptionKey: "isk", ClientID: "id", ClientSecret: "secret"}, RetryDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := collect(t, c, client.EventQuery{}, 1); err != nil || len(ids) != 1 {
		t.Fatalf("FollowEvents with a revoked token = %v, %v; want a new token and the event", ids, err)
	}
}

func TestEventsPage(t *testing.T) {
	page := `{"events":[{"id":"evt_0000000000000007","type":"transaction.final","createdAt":"2026-01-02T03:04:05.000000Z","data":` + txBody + `},` +
		`{"id":"evt_0000000000000008","type":"terminal.offline","createdAt":"2026-01-02T03:04:06.000000Z","data":{"terminalId":"10000001","online":false}},` +
		`{"id":"evt_0000000000000009","type":"print.final","createdAt":"2026-01-02T03:04:07.000000Z","data":{"printId":"prt_1","terminalId":"10000001","statusId":0,"status":"SUCCESS"}}],` +
		`"nextCursor":"evt_0000000000000009"}`
	c, s := newScripted(t, client.Config{}, reply{200, nil, page}, reply{200, nil, `{"events":[],"nextCursor":null}`})
	p, err := c.Events(context.Background(), client.EventQuery{Types: []instore.EventType{instore.EventTransactionFinal, instore.EventTerminalOffline, instore.EventPrintFinal}, TerminalID: "10000001", After: evtID(6), Limit: 3})
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if q := s.reqs[0].URL.Query(); q.Get("types") != "transaction.final,terminal.offline,print.final" || q.Get("terminalId") != "10000001" || q.Get("after") != evtID(6) || q.Get("limit") != "3" {
		t.Errorf("query = %v", q)
	}
	if s.reqs[0].Header.Get("Accept") != "application/json" {
		t.Errorf("Accept = %q", s.reqs[0].Header.Get("Accept"))
	}
	if len(p.Events) != 3 || p.NextCursor != evtID(9) {
		t.Fatalf("page = %+v", p)
	}
	tx, err := p.Events[0].Transaction()
	if err != nil || tx.OnlineAPIRefID != "tx_1" || string(tx.RawJSON()) != txBody {
		t.Errorf("Transaction() = %+v, %v", tx, err)
	}
	if _, err := p.Events[0].Terminal(); err == nil {
		t.Error("Terminal() of a transaction event: no error")
	}
	term, err := p.Events[1].Terminal()
	if err != nil || term.TerminalID != "10000001" || term.Online {
		t.Errorf("Terminal() = %+v, %v", term, err)
	}
	if _, err := p.Events[1].Transaction(); err == nil {
		t.Error("Transaction() of a terminal event: no error")
	}
	j, err := p.Events[2].PrintJob()
	if err != nil || j.PrintID != "prt_1" || j.Status != "SUCCESS" {
		t.Errorf("PrintJob() = %+v, %v", j, err)
	}
	p, err = c.Events(context.Background(), client.EventQuery{})
	if err != nil || p.Events == nil || len(p.Events) != 0 || p.NextCursor != "" {
		t.Errorf("empty page = %+v, %v; want no events and no cursor", p, err)
	}
	if len(s.reqs[1].URL.Query()) != 0 {
		t.Errorf("query of a zero EventQuery = %v, want none", s.reqs[1].URL.Query())
	}
}
