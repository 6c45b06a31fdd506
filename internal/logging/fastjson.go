package logging

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// fastJSON is slog's JSON handler with a fast path for the common record:
// a plain message and attributes that are strings of printable ASCII
// without quotes or backslashes, integers or booleans, as the access log's
// line is. Such a record is written byte for byte as slog.JSONHandler
// writes it (TestFastJSONMatchesSlog), with appends instead of slog's
// generic walk over the values, which was most of the access log's cost
// (docs/benchmarks.md, metadata); any other record, and every handler
// after WithGroup, is slog.JSONHandler's.
type fastJSON struct {
	w     io.Writer
	mu    *sync.Mutex
	level slog.Leveler
	// pre is the attributes of WithAttrs, formatted (",\"k\":v" each).
	pre []byte
	// slow is the slog.JSONHandler with the same attributes.
	slow slog.Handler
}

func newFastJSON(w io.Writer, opts *slog.HandlerOptions) slog.Handler {
	if opts.ReplaceAttr != nil || opts.AddSource {
		return slog.NewJSONHandler(w, opts)
	}
	level := opts.Level
	if level == nil {
		level = slog.LevelInfo
	}
	mu := &sync.Mutex{}
	// The slow path writes through the same lock, so lines never mix.
	return &fastJSON{w: w, mu: mu, level: level, slow: slog.NewJSONHandler(lockedWriter{w, mu}, opts)}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (h *fastJSON) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *fastJSON) WithAttrs(attrs []slog.Attr) slog.Handler {
	slow := h.slow.WithAttrs(attrs)
	pre := h.pre
	for _, a := range attrs {
		var ok bool
		if pre, ok = appendAttr(pre, a); !ok {
			return slow
		}
	}
	return &fastJSON{w: h.w, mu: h.mu, level: h.level, pre: pre, slow: slow}
}

func (h *fastJSON) WithGroup(name string) slog.Handler { return h.slow.WithGroup(name) }

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (h *fastJSON) Handle(ctx context.Context, r slog.Record) error {
	if !plain(r.Message) || r.Time.Year() < 0 || r.Time.Year() >= 10000 {
		return h.slow.Handle(ctx, r)
	}
	bp := bufPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 16<<10 {
			bufPool.Put(bp)
		}
	}()
	b := append((*bp)[:0], '{')
	if !r.Time.IsZero() {
		b = append(b, `"time":"`...)
		b = r.Time.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `",`...)
	}
	b = append(b, `"level":"`...)
	b = append(b, r.Level.String()...)
	b = append(b, `","msg":"`...)
	b = append(b, r.Message...)
	b = append(b, '"')
	b = append(b, h.pre...)
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		b, ok = appendAttr(b, a)
		return ok
	})
	if !ok {
		return h.slow.Handle(ctx, r)
	}
	b = append(b, '}', '\n')
	*bp = b
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(b)
	return err
}

// appendAttr appends ,"key":value for an attribute of the fast path, and
// reports whether it is one (an empty attribute, which slog leaves out,
// is one and appends nothing).
func appendAttr(b []byte, a slog.Attr) ([]byte, bool) {
	if a.Equal(slog.Attr{}) {
		return b, true
	}
	if !plain(a.Key) {
		return b, false
	}
	v := a.Value
	switch v.Kind() {
	case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindBool:
	default:
		return b, false
	}
	if v.Kind() == slog.KindString && !plain(v.String()) {
		return b, false
	}
	b = append(b, `,"`...)
	b = append(b, a.Key...)
	b = append(b, `":`...)
	switch v.Kind() {
	case slog.KindString:
		b = append(b, '"')
		b = append(b, v.String()...)
		b = append(b, '"')
	case slog.KindInt64:
		b = strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		b = strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindBool:
		b = strconv.AppendBool(b, v.Bool())
	}
	return b, true
}

// plain reports whether s needs no escaping in JSON or in slog's escaping
// (printable ASCII, no quote, no backslash; slog also escapes <, > and &).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
