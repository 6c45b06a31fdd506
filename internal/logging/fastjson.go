package logging

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
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
	// clock is shared by the handlers WithAttrs derives.
	clock *timeCache
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
	return &fastJSON{w: w, mu: mu, level: level, slow: slog.NewJSONHandler(lockedWriter{w, mu}, opts), clock: &timeCache{}}
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
	return &fastJSON{w: h.w, mu: h.mu, level: h.level, pre: pre, slow: slow, clock: h.clock}
}

func (h *fastJSON) WithGroup(name string) slog.Handler { return h.slow.WithGroup(name) }

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (h *fastJSON) Handle(ctx context.Context, r slog.Record) error {
	if !plain(r.Message) {
		return h.slow.Handle(ctx, r)
	}
	var sec *second
	if !r.Time.IsZero() {
		if sec = h.clock.get(r.Time); sec == nil {
			return h.slow.Handle(ctx, r)
		}
	}
	bp := bufPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 16<<10 {
			bufPool.Put(bp)
		}
	}()
	b := append((*bp)[:0], '{')
	if sec != nil {
		// time.RFC3339Nano, as slog writes it: the cached date, time and
		// zone of the second around the fraction.
		b = append(b, `"time":"`...)
		b = append(b, sec.date[:]...)
		b = appendFraction(b, r.Time.Nanosecond())
		b = append(b, sec.zone[:sec.zoneLen]...)
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
	if a.Key == "" && a.Equal(slog.Attr{}) {
		return b, true
	}
	if !plain(a.Key) {
		return b, false
	}
	// Value.Kind is a type switch: read it once.
	switch v := a.Value; v.Kind() {
	case slog.KindString:
		s := v.String()
		if !plain(s) {
			return b, false
		}
		b = appendKey(b, a.Key)
		b = append(b, '"')
		b = append(b, s...)
		b = append(b, '"')
	case slog.KindInt64:
		b = strconv.AppendInt(appendKey(b, a.Key), v.Int64(), 10)
	case slog.KindUint64:
		b = strconv.AppendUint(appendKey(b, a.Key), v.Uint64(), 10)
	case slog.KindBool:
		b = strconv.AppendBool(appendKey(b, a.Key), v.Bool())
	default:
		return b, false
	}
	return b, true
}

// appendKey appends ,"key": for a plain key.
func appendKey(b []byte, key string) []byte {
	b = append(b, `,"`...)
	b = append(b, key...)
	return append(b, `":`...)
}

// plain reports whether s needs no escaping in JSON or in slog's escaping
// (printable ASCII, no quote, no backslash; slog also escapes <, > and &).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			return false
		}
	}
	return true
}

// plainByte marks the bytes plain accepts: one load per byte instead of
// seven comparisons.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// timeCache keeps the formatted second of the last record's time: a busy
// log writes many lines in the same second, and time.Time.AppendFormat was
// the largest part of formatting an access line. Only the fraction is
// formatted per record.
type timeCache struct {
	last atomic.Pointer[second]
}

// second is one second of one location, formatted as time.RFC3339Nano
// formats it. Within a second, of a given location, the date, the time to
// the second and the zone offset cannot change: zone transitions fall on
// whole seconds.
type second struct {
	unix    int64
	loc     *time.Location
	date    [len("2006-01-02T15:04:05")]byte
	zone    [len("-07:00")]byte
	zoneLen uint8
}

// get returns t's second, formatted, or nil for the times left to slog: a
// year outside [0, 9999] (which slog writes with an error) and an
// implausible zone offset.
func (c *timeCache) get(t time.Time) *second {
	unix, loc := t.Unix(), t.Location()
	if s := c.last.Load(); s != nil && s.unix == unix && s.loc == loc {
		return s
	}
	if y := t.Year(); y < 0 || y >= 10000 {
		return nil
	}
	s := &second{unix: unix, loc: loc}
	date := t.AppendFormat(s.date[:0], "2006-01-02T15:04:05")
	zone := t.AppendFormat(s.zone[:0], "Z07:00")
	if len(date) != len(s.date) || len(zone) > len(s.zone) {
		return nil // a zone offset of 100 hours or more (time.FixedZone)
	}
	s.zoneLen = uint8(copy(s.zone[:], zone))
	c.last.Store(s)
	return s
}

// appendFraction appends the fraction of a second as time.RFC3339Nano
// writes it: nothing for a whole second, otherwise a dot and up to nine
// digits without trailing zeros.
func appendFraction(b []byte, nanos int) []byte {
	if nanos == 0 {
		return b
	}
	var d [10]byte
	d[0] = '.'
	for i := 9; i >= 1; i-- {
		d[i] = byte('0' + nanos%10)
		nanos /= 10
	}
	n := 10
	for d[n-1] == '0' {
		n--
	}
	return append(b, d[:n]...)
}
