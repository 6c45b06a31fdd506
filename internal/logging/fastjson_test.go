package logging

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
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
