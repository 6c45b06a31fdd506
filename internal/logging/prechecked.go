package logging

import (
	"context"
	"log/slog"
)

// Prechecked writes records through a logger made by [New] (or any logger
// whose handler is [NewRedactingHandler]'s) with the redaction walk left
// out for the attributes its caller knows to be safe: values the server
// made itself (a route pattern, a status, a duration, an id it generated)
// or checked against a fixed list (a standard HTTP method), under keys
// that name no secret. The message and every other attribute are checked
// as the redacting handler checks them; if any of them holds something to
// redact, the whole record goes through the redacting handler, as if
// logged with the logger. A caller that marks an attribute safe vouches
// that the redacting handler would leave it as it is; it is meant for the
// access log, which writes a line per request.
type Prechecked struct {
	// redacting is the logger's handler, for every record not known clean.
	redacting slog.Handler
	// next is what redacting passes clean records to; nil when the
	// logger's handler is not a redacting handler, or when its group
	// scope makes every value sensitive: then every record goes through
	// redacting.
	next  slog.Handler
	r     *redactor
	scope scope
}

// NewPrechecked returns a Prechecked writing to l's handler.
func NewPrechecked(l *slog.Logger) *Prechecked {
	p := &Prechecked{redacting: l.Handler()}
	if h, ok := p.redacting.(*redactingHandler); ok && !h.scope.sensitive {
		p.next, p.r, p.scope = h.next, h.r, h.scope
	}
	return p
}

// Enabled reports whether the logger writes records of level.
func (p *Prechecked) Enabled(ctx context.Context, level slog.Level) bool {
	return p.redacting.Enabled(ctx, level)
}

// Handle writes r. Bit i of safe set says that r's i-th attribute (in
// the order of r.Attrs, the first 64) needs no redaction; the message and
// the other attributes are checked.
func (p *Prechecked) Handle(ctx context.Context, r slog.Record, safe uint64) error {
	if p.next == nil || !p.clean(r, safe) {
		return p.redacting.Handle(ctx, r)
	}
	return p.next.Handle(ctx, r)
}

// clean reports whether the redacting handler would pass r on unchanged,
// checking only the message and the attributes not marked safe.
func (p *Prechecked) clean(r slog.Record, safe uint64) bool {
	if _, changed := p.r.text(r.Message); changed {
		return false
	}
	n := r.NumAttrs()
	if n <= 64 && safe|^(uint64(1)<<n-1) == ^uint64(0) {
		return true // every attribute is safe
	}
	clean, i := true, 0
	r.Attrs(func(a slog.Attr) bool {
		if i >= 64 || safe&(1<<i) == 0 {
			if _, changed := p.r.attr(a, p.scope); changed {
				clean = false
				return false
			}
		}
		i++
		return true
	})
	return clean
}
