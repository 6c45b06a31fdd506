package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/logging"
	"github.com/instore-dev/instore/internal/server"
)

// BenchmarkMetadata compares the authenticated metadata endpoint with a
// baseline handler that writes the same bytes and does nothing else, in the
// same run. "loopback" goes through real TCP connections on 127.0.0.1 (the
// figure that matters to a client); "handler" calls the handlers in-process
// (the regression guard for the middleware's own cost and allocations).
// The instore side logs every request as JSON to /dev/null through the
// redacting handler and records metrics, as in production.
//
//	go test -run=^$ -bench=BenchmarkMetadata -benchtime=3s ./internal/server/
func BenchmarkMetadata(b *testing.B) {
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	e := startBench(b, func(c *server.Config) {
		c.Logger = logging.New(devnull, logging.Options{Format: "json"})
		c.AuthCacheTTL = time.Second
		c.RateLimit = 0
	})
	metaURL := e.online + "/in-store/api/v1/metadata"
	// The bytes the baseline writes: the real response body.
	_, body := e.do(b, "GET", metaURL, nil, e.auth(e.token, e.key))
	baseline := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	bs := httptest.NewServer(baseline)
	defer bs.Close()
	hdr := http.Header{
		"Accept":                    {"application/json"},
		"Authorization":             {"Bearer " + e.token},
		"Ocp-Apim-Subscription-Key": {e.key},
	}

	loop := func(url string) func(b *testing.B) {
		return func(b *testing.B) {
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest("GET", url, nil)
					req.Header = hdr.Clone()
					resp, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Fatalf("status %d", resp.StatusCode)
					}
				}
			})
		}
	}
	b.Run("loopback/baseline", loop(bs.URL+"/in-store/api/v1/metadata"))
	b.Run("loopback/instore", loop(metaURL))

	inproc := func(h http.Handler) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest("GET", "/in-store/api/v1/metadata", nil)
					req.Header = hdr.Clone()
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != 200 {
						b.Fatalf("status %d", w.Code)
					}
				}
			})
		}
	}
	b.Run("handler/baseline", inproc(baseline))
	b.Run("handler/instore", inproc(e.srv.Handler("online")))
}

func startBench(b *testing.B, mutate func(*server.Config)) *env {
	b.Helper()
	return start(b, mutate)
}
