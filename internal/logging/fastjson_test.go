package logging

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
	_ "time/tzdata" // zones with daylight saving time, wherever the test runs
)

// TestFastJSONMatchesSlog: every record, on the fast path or not, is
// written byte for byte as slog.JSONHandler writes it.
func TestFastJSONMatchesSlog(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	cases := []struct {
		name  string
		with  []slog.Attr
		group string
		msg   string
		attrs []slog.Attr
	}{
		{name: "access line", with: []slog.Attr{slog.String("surface", "online")}, msg: "request",
			attrs: []slog.Attr{slog.String("method", "GET"), slog.String("route", "GET /in-store/api/v1/transaction/{onlineAPIRefId}"),
				slog.Int("status", 200), slog.Int64("durationUs", 1234), slog.String("requestId", "req_0123456789ab_1")}},
		{name: "ints bools", msg: "x", attrs: []slog.Attr{slog.Int64("n", -5), slog.Uint64("u", 7), slog.Bool("b", true), slog.Bool("f", false)}},
		{name: "empty attr left out", msg: "x", attrs: []slog.Attr{{}, slog.String("a", "b")}},
		{name: "empty message", msg: "", attrs: nil},
		{name: "escapes", msg: "a \"quoted\" line\n", attrs: []slog.Attr{slog.String("k", "tab\there")}},
		{name: "non-ASCII", msg: "ok", attrs: []slog.Attr{slog.String("k", "växel")}},
		{name: "html chars", msg: "<b>&", attrs: []slog.Attr{slog.String("k", "a<b")}},
		{name: "float", msg: "x", attrs: []slog.Attr{slog.Float64("f", 1.5)}},
		{name: "duration time any", msg: "x", attrs: []slog.Attr{slog.Duration("d", time.Second), slog.Time("t", at), slog.Any("e", errors.New("boom"))}},
		{name: "group attr", msg: "x", attrs: []slog.Attr{slog.Group("g", slog.String("a", "b"))}},
		{name: "with non-plain attr", with: []slog.Attr{slog.String("k", "a\"b")}, msg: "x", attrs: []slog.Attr{slog.Int("n", 1)}},
		{name: "with group", group: "g", msg: "x", attrs: []slog.Attr{slog.Int("n", 1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var want, got bytes.Buffer
			opts := &slog.HandlerOptions{Level: slog.LevelDebug}
			var hs [2]slog.Handler
			hs[0], hs[1] = slog.NewJSONHandler(&want, opts), newFastJSON(&got, opts)
			for i, h := range hs {
				if tc.with != nil {
					h = h.WithAttrs(tc.with)
				}
				if tc.group != "" {
					h = h.WithGroup(tc.group)
				}
				for _, tm := range []time.Time{at, {}} {
					r := slog.NewRecord(tm, slog.LevelWarn, tc.msg, 0)
					r.AddAttrs(tc.attrs...)
					if err := h.Handle(context.Background(), r); err != nil {
						t.Fatalf("handler %d: %v", i, err)
					}
				}
			}
			if want.String() != got.String() {
				t.Errorf("fast handler wrote\n%s\nslog wrote\n%s", got.String(), want.String())
			}
		})
	}
	if !newFastJSON(new(bytes.Buffer), &slog.HandlerOptions{Level: slog.LevelWarn}).Enabled(context.Background(), slog.LevelWarn) ||
		newFastJSON(new(bytes.Buffer), &slog.HandlerOptions{Level: slog.LevelWarn}).Enabled(context.Background(), slog.LevelInfo) {
		t.Error("Enabled does not follow the level")
	}
}

// TestFastJSONEveryByteMatchesSlog: each byte, in a message, a key and a
// value, is written as slog writes it (the fast path takes only the bytes
// slog leaves unescaped).
func TestFastJSONEveryByteMatchesSlog(t *testing.T) {
	var want, got bytes.Buffer
	opts := &slog.HandlerOptions{}
	hs := []slog.Handler{slog.NewJSONHandler(&want, opts), newFastJSON(&got, opts)}
	for c := 0; c < 256; c++ {
		s := "a" + string([]byte{byte(c)}) + "b"
		for _, h := range hs {
			for _, attrs := range [][]slog.Attr{nil, {slog.String(s, "v")}, {slog.String("k", s)}} {
				r := slog.NewRecord(time.Time{}, slog.LevelInfo, "m", 0)
				if attrs == nil {
					r.Message = s
				}
				r.AddAttrs(attrs...)
				if err := h.Handle(context.Background(), r); err != nil {
					t.Fatal(err)
				}
			}
		}
		if want.String() != got.String() {
			t.Errorf("byte %#x: fast handler wrote\n%s\nslog wrote\n%s", c, got.String(), want.String())
		}
		want.Reset()
		got.Reset()
	}
}

// TestFastJSONTimesMatchSlog: the time of the fast path, formatted from
// the cached second, is slog's across fractions, second, minute, day and
// year boundaries, zones and daylight saving transitions, going back in
// time and switching locations between records.
func TestFastJSONTimesMatchSlog(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	kolkata := time.FixedZone("IST", 5*3600+30*60)
	zones := []*time.Location{time.UTC, time.Local, ny, kolkata,
		time.FixedZone("UTC", 0),                // another location with the same offset
		time.FixedZone("west", -30*60),          // negative, under an hour
		time.FixedZone("LMT", 3600+2*60+3),      // seconds in the offset
		time.FixedZone("far", 99*3600+59*60),    // the widest the cache holds
		time.FixedZone("farther", -100*3600-60)} // wider: slog's path
	base := time.Date(2026, 11, 22, 23, 59, 58, 0, time.UTC)
	var times []time.Time
	for _, loc := range zones {
		for _, d := range []time.Duration{0, 1, 10, 120 * time.Millisecond, 999999999, time.Second, time.Second + 1, 2 * time.Second, 2*time.Second + 500*time.Microsecond, 1} {
			times = append(times, base.Add(d).In(loc))
		}
	}
	times = append(times,
		// Daylight saving time ends in New York: 01:59:59 EDT, then 01:00:00 EST.
		time.Date(2026, 11, 1, 5, 59, 59, 900000000, time.UTC).In(ny),
		time.Date(2026, 11, 1, 6, 0, 0, 100, time.UTC).In(ny),
		time.Date(2026, 11, 1, 5, 59, 59, 999999999, time.UTC).In(ny),
		// and starts: 01:59:59 EST, then 03:00:00 EDT.
		time.Date(2026, 3, 8, 6, 59, 59, 5, time.UTC).In(ny),
		time.Date(2026, 3, 8, 7, 0, 0, 5, time.UTC).In(ny),
		// Year boundaries, and years slog writes with an error.
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(0, 1, 1, 0, 30, 0, 0, kolkata).In(time.FixedZone("west", -3600)), // year -1 there
		// Before 1970, with a fraction; the epoch.
		time.Date(1969, 12, 31, 23, 59, 59, 250000000, time.UTC),
		time.Unix(0, 0).UTC(),
		// The clock, with its monotonic reading, twice in a row.
		time.Now(), time.Now(),
	)
	for _, with := range [][]slog.Attr{nil, {slog.String("surface", "online")}} {
		var want, got bytes.Buffer
		opts := &slog.HandlerOptions{}
		var sh, fh slog.Handler = slog.NewJSONHandler(&want, opts), newFastJSON(&got, opts)
		if with != nil {
			sh, fh = sh.WithAttrs(with), fh.WithAttrs(with)
		}
		for _, tm := range times {
			for _, h := range []slog.Handler{sh, fh} {
				r := slog.NewRecord(tm, slog.LevelInfo, "request", 0)
				r.AddAttrs(slog.Int("status", 200))
				if err := h.Handle(context.Background(), r); err != nil {
					t.Fatal(err)
				}
			}
		}
		wl, gl := bytes.Split(want.Bytes(), []byte("\n")), bytes.Split(got.Bytes(), []byte("\n"))
		if len(wl) != len(gl) {
			t.Fatalf("fast handler wrote %d lines, slog %d", len(gl), len(wl))
		}
		for i := range wl {
			if !bytes.Equal(wl[i], gl[i]) {
				t.Errorf("time %v: fast handler wrote\n%s\nslog wrote\n%s", times[i], gl[i], wl[i])
			}
		}
	}
}

// TestFastJSONAccessLineDoesNotAllocate: the access line's path allocates
// nothing per record (the buffer is pooled).
func TestFastJSONAccessLineDoesNotAllocate(t *testing.T) {
	h := newFastJSON(discard{}, &slog.HandlerOptions{}).WithAttrs([]slog.Attr{slog.String("surface", "online")})
	at := time.Now()
	allocs := testing.AllocsPerRun(1000, func() {
		r := slog.NewRecord(at, slog.LevelInfo, "request", 0)
		r.AddAttrs(slog.String("method", "GET"), slog.String("route", "GET /in-store/api/v1/metadata"), slog.Int("status", 200),
			slog.Int64("durationUs", 120), slog.String("requestId", "req_0123456789ab_1"))
		h.Handle(context.Background(), r)
	})
	if allocs > 0 {
		t.Errorf("an access line allocates %.1f times, want 0", allocs)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkFastJSONAccessLine is the cost of formatting an access line
// (the time included) and writing it to a discarding writer.
func BenchmarkFastJSONAccessLine(b *testing.B) {
	h := newFastJSON(discard{}, &slog.HandlerOptions{}).WithAttrs([]slog.Attr{slog.String("surface", "online")})
	at := time.Now()
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := slog.NewRecord(at.Add(time.Duration(i)*time.Microsecond), slog.LevelInfo, "request", 0)
		r.AddAttrs(slog.String("method", "GET"), slog.String("route", "GET /in-store/api/v1/metadata"), slog.Int("status", 200),
			slog.Int64("durationUs", 120), slog.String("requestId", "req_0123456789ab_1"))
		h.Handle(ctx, r)
	}
}
