package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testwait"
)

// appendHistory writes n events of merchant, each with about size bytes of
// data, numbers them and wakes the streams, as the sequencer does; it
// returns the id of the last.
func (e *env) appendHistory(t testing.TB, merchant string, n, size int) string {
	t.Helper()
	ctx := context.Background()
	pad := strings.Repeat("x", size)
	for done := 0; done < n; {
		var evs []instore.OutboxEvent
		for i := 0; i < 500 && done < n; i, done = i+1, done+1 {
			evs = append(evs, instore.OutboxEvent{MerchantID: merchant, Type: instore.EventTerminalOnline, TerminalID: "10000001",
				At: time.Now(), Data: fmt.Appendf(nil, `{"terminalId":"10000001","i":%d,"pad":%q}`, done, pad)})
		}
		must(t, e.srv.Store.AppendEvents(ctx, evs))
	}
	for {
		k, err := e.srv.Store.SequenceEvents(ctx, 1000)
		must(t, err)
		if k == 0 {
			break
		}
	}
	e.srv.Service.EventsSequenced()
	last, err := e.srv.Store.LastEventSeq(ctx, merchant)
	must(t, err)
	return instore.EventID(last)
}

// streamRequest is a request for the merchant's stream with token.
func (e *env) streamRequest(ctx context.Context, t testing.TB, token, query, lastEventID string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", e.online+"/in-store/api/v1/events"+query, nil)
	must(t, err)
	for k, v := range e.auth(token, e.key) {
		req.Header.Set(k, v)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	return req
}

// openStream opens a stream with token and returns its answer (the body
// left open: the stream) and what ends it; a stream the server keeps open
// when it should have refused it is ended by the caller's cleanup.
func (e *env) openStream(t *testing.T, token, lastEventID string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	resp, err := http.DefaultClient.Do(e.streamRequest(ctx, t, token, "", lastEventID))
	if err != nil {
		t.Fatalf("open a stream: %v", err)
	}
	return resp, func() {
		cancel()
		resp.Body.Close()
	}
}

// waitMetrics scrapes /metrics until cond holds (bounded).
func (e *env) waitMetrics(t *testing.T, what string, cond func(map[string]*dto.MetricFamily) bool) {
	t.Helper()
	testwait.ForNil(t, what, func() error {
		_, mfs := e.scrape(t)
		if !cond(mfs) {
			open, _ := value(mfs, "instore_event_streams_open", nil)
			total, _ := value(mfs, "instore_event_streams_total", nil)
			return fmt.Errorf("streams open %v, opened %v", open, total)
		}
		return nil
	})
}

func streamsOpen(want float64) func(map[string]*dto.MetricFamily) bool {
	return func(mfs map[string]*dto.MetricFamily) bool {
		v, _ := value(mfs, "instore_event_streams_open", nil)
		return v == want
	}
}

// TestStreamLimits: an API client holds at most --streams-per-client
// streams at once and a node at most --streams-per-node; one more is
// answered 429 rate-limited with Retry-After and a detail that names the
// limit (valid against the OpenAPI document), and a stream that ends gives
// its place back.
func TestStreamLimits(t *testing.T) {
	e := start(t, func(c *server.Config) {
		c.StreamsPerClient, c.StreamsPerNode = 2, 3
	})
	c2, secret2, err := e.ad.CreateClient(context.Background(), instore.SurfaceOnline, e.merchantRec.ID, "back office")
	must(t, err)
	token2 := e.getToken(t, e.online, c2.ID, secret2)

	refused := func(token, want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := http.DefaultClient.Do(e.streamRequest(ctx, t, token, "", ""))
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != 429 {
			t.Fatalf("stream over the limit answered %d, want 429", resp.StatusCode)
		}
		// Again at /events/stream, through the client that checks the
		// answer against the OpenAPI document.
		hdr := e.auth(token, e.key)
		hdr["Accept"] = "text/event-stream"
		r, body := e.do(t, "GET", e.online+"/in-store/api/v1/events/stream", nil, hdr)
		var p struct{ Type, Detail string }
		must(t, json.Unmarshal(body, &p))
		if r.StatusCode != 429 || p.Type != "urn:instore:problem:rate-limited" || !strings.Contains(p.Detail, want) ||
			r.Header.Get("Retry-After") != "5" {
			t.Fatalf("over the limit: %d Retry-After %q %s, want 429 rate-limited saying %q, Retry-After 5",
				r.StatusCode, r.Header.Get("Retry-After"), body, want)
		}
	}
	ok := func(token string) context.CancelFunc {
		t.Helper()
		resp, end := e.openStream(t, token, "")
		if resp.StatusCode != 200 {
			t.Fatalf("stream answered %d, want 200", resp.StatusCode)
		}
		return end
	}
	a1 := ok(e.token)
	ok(e.token)
	refused(e.token, "At most 2 event streams may be open at once per API client")
	ok(token2)
	refused(token2, "This node serves at most 3 event streams at once")
	e.waitMetrics(t, "three streams open", streamsOpen(3))
	a1()
	e.waitMetrics(t, "the ended stream's place given back", streamsOpen(2))
	ok(token2)
	refused(e.token, "This node serves at most 3 event streams")
}

// TestStreamWriteDeadline: a client that opens a stream resumed from the
// start of a long history and never reads (a fixed receive buffer, so
// that the server's writes block once the socket buffers are full) is
// dropped when a write passes --stream-write-timeout: the stream ends
// (instore_event_streams_open back to 0) and the connection is closed
// before the history was all sent.
//
// Not under the race detector: there the 300 ms deadline is a matter of
// the instrumentation's pace (one CI run read the whole history and no
// EOF within a minute); .ci/run runs it in the plain suite.
func TestStreamWriteDeadline(t *testing.T) {
	if raceBuild() {
		t.Skip("a write deadline of 300 ms under the race detector's instrumentation; the plain suite runs it")
	}
	e := start(t, func(c *server.Config) { c.StreamWriteTimeout = 300 * time.Millisecond })
	// More than the loopback socket buffers hold: 12 MB, or three times
	// the sender's largest buffer where it is larger than Linux's default
	// 4 MiB (the receiver's is 256 KiB).
	const size = 2000
	n := 6000
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 3 {
			if max, err := strconv.Atoi(f[2]); err == nil && 3*max/size > n {
				n = 3 * max / size
			}
		}
	}
	if n > 40000 {
		t.Skipf("socket buffers of %d events of %d bytes: too large a history to fill them", n, size)
	}
	e.appendHistory(t, e.merchantRec.ID, n, size)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.online, "http://"))
	must(t, err)
	defer conn.Close()
	// A receive buffer of its own (no autotuning), larger than the
	// loopback's segment, so that what is buffered comes at once when it
	// reads at the end.
	must(t, conn.(*net.TCPConn).SetReadBuffer(256<<10))
	var req bytes.Buffer
	must(t, e.streamRequest(context.Background(), t, e.token, "", instore.EventID(0)).Write(&req))
	_, err = conn.Write(req.Bytes())
	must(t, err)
	e.waitMetrics(t, "the stream opened and then dropped", func(mfs map[string]*dto.MetricFamily) bool {
		total, _ := value(mfs, "instore_event_streams_total", nil)
		open, _ := value(mfs, "instore_event_streams_open", nil)
		return total == 1 && open == 0
	})
	// The server closed the connection: what was buffered, then EOF.
	must(t, conn.SetReadDeadline(time.Now().Add(time.Minute)))
	got, err := io.Copy(io.Discard, conn)
	if err != nil {
		t.Fatalf("reading the dropped stream: %v after %d bytes, want EOF", err, got)
	}
	if got >= int64(n*size) {
		t.Errorf("the dropped stream sent %d bytes: all the history (%d events of %d bytes)", got, n, size)
	}
}

// TestEventCursorBeyondNewest: a cursor (after, Last-Event-ID) beyond the
// newest event of the store is a 400 that names the merchant's newest
// event, for a page and for a stream (which would otherwise wait in
// silence); a cursor at the newest is fine, also when that event was
// numbered in the store without this node hearing of it (another node's).
func TestEventCursorBeyondNewest(t *testing.T) {
	e := start(t, nil)
	mine := e.appendHistory(t, e.merchantRec.ID, 3, 10)
	top := e.appendHistory(t, "mer_other", 2, 10)
	topSeq, _ := instore.ParseEventID(top)
	beyond := instore.EventID(topSeq + 1)
	check := func(r reply, field string) {
		t.Helper()
		var p struct {
			Detail string
			Errors []struct{ Field, Message string }
		}
		must(t, json.Unmarshal(r.body, &p))
		if r.resp.StatusCode != 400 || len(p.Errors) != 1 || p.Errors[0].Field != field ||
			!strings.Contains(p.Errors[0].Message, "your newest is "+mine) || !strings.Contains(p.Detail, beyond) {
			t.Fatalf("cursor beyond the newest: %d %s, want 400 on %s naming %s", r.resp.StatusCode, r.body, field, mine)
		}
	}
	page := func(after string) reply {
		t.Helper()
		resp, body := e.do(t, "GET", e.online+"/in-store/api/v1/events?after="+after, nil, e.auth(e.token, e.key))
		return reply{resp, body}
	}
	check(page(beyond), "after")
	if r := page(top); r.resp.StatusCode != 200 || !strings.Contains(string(r.body), `"nextCursor":"`+top+`"`) {
		t.Fatalf("after the newest: %d %s", r.resp.StatusCode, r.body)
	}
	// The stream: answered at once, not held open.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(e.streamRequest(ctx, t, e.token, "", beyond))
	must(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("stream after %s: %d, then %v (held open)", beyond, resp.StatusCode, err)
	}
	check(reply{resp, body}, "Last-Event-ID")
	hdr := e.auth(e.token, e.key)
	hdr["Accept"], hdr["Last-Event-ID"] = "text/event-stream", beyond
	r, b := e.do(t, "GET", e.online+"/in-store/api/v1/events/stream", nil, hdr) // checked against the document
	check(reply{r, b}, "Last-Event-ID")
	// At the newest: a stream.
	s, end := e.openStream(t, e.token, top)
	end()
	if s.StatusCode != 200 {
		t.Fatalf("stream after the newest: %d", s.StatusCode)
	}
	// /events/stream streams whatever Accept says.
	sctx, scancel := context.WithCancel(context.Background())
	sreq, err := http.NewRequestWithContext(sctx, "GET", e.online+"/in-store/api/v1/events/stream?after="+top, nil)
	must(t, err)
	sreq.Header.Set("Authorization", "Bearer "+e.token)
	sreq.Header.Set("Ocp-Apim-Subscription-Key", e.key)
	sresp, err := http.DefaultClient.Do(sreq)
	must(t, err)
	scancel()
	sresp.Body.Close()
	if sresp.StatusCode != 200 || sresp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /events/stream without Accept: %d %s", sresp.StatusCode, sresp.Header.Get("Content-Type"))
	}
	// An event numbered in the store, as by another node: its id is a
	// cursor at once.
	ctx0 := context.Background()
	must(t, e.srv.Store.AppendEvents(ctx0, []instore.OutboxEvent{{MerchantID: e.merchantRec.ID, Type: instore.EventTerminalOnline,
		At: time.Now(), Data: []byte(`{}`)}}))
	_, err = e.srv.Store.SequenceEvents(ctx0, 10)
	must(t, err)
	if r := page(beyond); r.resp.StatusCode != 200 {
		t.Fatalf("after an event another node numbered: %d %s", r.resp.StatusCode, r.body)
	}
}

// TestIdleStreamsMemory opens streams resumed from the start of a history
// (each catches up through every event, then idles) and measures the heap
// they hold once idle, against the heap before they opened: a stream keeps
// no buffer of its catch-up. INSTORE_STREAM_MEMORY_STREAMS and
// INSTORE_STREAM_MEMORY_EVENTS set the streams and the events (default 30
// and 2000, of about 1 KiB each); docs/benchmarks.md has a run with 1,000.
func TestIdleStreamsMemory(t *testing.T) {
	streams, events := envInt(t, "INSTORE_STREAM_MEMORY_STREAMS", 30), envInt(t, "INSTORE_STREAM_MEMORY_EVENTS", 2000)
	e := start(t, func(c *server.Config) {
		c.StreamsPerClient, c.StreamsPerNode = streams+1, streams+1
		c.RateLimit = 0
	})
	last := e.appendHistory(t, e.merchantRec.ID, events, 1000)
	var req bytes.Buffer
	must(t, e.streamRequest(context.Background(), t, e.token, "", instore.EventID(0)).Write(&req))
	// open connects a client that reads the stream until the last event
	// of the history, then stops reading (and keeps no buffer).
	open := func() (net.Conn, error) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.online, "http://"))
		if err != nil {
			return nil, err
		}
		conn.SetDeadline(time.Now().Add(2 * time.Minute))
		if _, err := conn.Write(req.Bytes()); err != nil {
			conn.Close()
			return nil, err
		}
		br := bufio.NewReader(conn)
		want := "id: " + last + "\n"
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				conn.Close()
				return nil, fmt.Errorf("stream ended before %s: %w", last, err)
			}
			if line == want {
				break
			}
		}
		conn.SetDeadline(time.Time{})
		return conn, nil
	}
	// A first stream warms what every stream shares (the store's cache,
	// the pools), then ends: the baseline.
	c, err := open()
	must(t, err)
	c.Close()
	e.waitMetrics(t, "the warm-up stream ended", streamsOpen(0))
	before, stackBefore, rssBefore := liveHeap(), stack(), rss()

	conns := make([]net.Conn, streams)
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				c, err := open()
				if err != nil {
					errs <- err
					continue
				}
				conns[i] = c
			}
		}()
	}
	for i := range streams {
		next <- i
	}
	close(next)
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e.waitMetrics(t, "every stream open", streamsOpen(float64(streams)))
	after, stackAfter, rssAfter := liveHeap(), stack(), rss()
	per := float64(int64(after)-int64(before)) / float64(streams)
	t.Logf("%d idle streams, each after a catch-up of %d events (%s .. %s): live heap %.1f MiB before, %.1f MiB after: %.1f KiB per stream; "+
		"goroutine stacks %.1f MiB before, %.1f MiB after; RSS %.1f MiB before, %.1f MiB after (the clients' side in this process too)",
		streams, events, instore.EventID(1), last, mib(before), mib(after), per/1024,
		mib(stackBefore), mib(stackAfter), mib(rssBefore), mib(rssAfter))
	// The old stream kept a buffer of its largest batch: 500 events, over
	// 500 KiB here.
	if per > 128<<10 {
		t.Errorf("an idle stream holds %.0f KiB of heap, want at most 128 KiB", per/1024)
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// stack is the memory of goroutine stacks.
func stack() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.StackInuse
}

// rss is the process's resident set (Linux; 0 elsewhere).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseUint(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// raceBuild reports whether the test binary was built with the race
// detector (its build settings record -race).
func raceBuild() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" {
				return s.Value == "true"
			}
		}
	}
	return false
}
