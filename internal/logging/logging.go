// Package logging sets up the service's structured logger once, so that no
// log line ever carries a token, key, secret, or a merchant, customer, client,
// device or terminal identifier in clear.
//
// Every logger made by [New] writes through [NewRedactingHandler], which
// replaces such values by a short keyed fingerprint ([Fingerprint]): the same
// terminal gets the same fingerprint on every line of a process, so its lines
// can still be followed, but the identifier itself cannot be read back.
package logging

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/instore-dev/instore/internal/keysetting"
)

// Log formats accepted by [Options] and [ParseFormat].
const (
	// FormatJSON writes one JSON object per line, for machines.
	FormatJSON = "json"
	// FormatText writes key=value lines, for people at a terminal.
	FormatText = "text"
	// FormatAuto picks FormatText when the output is a terminal and
	// FormatJSON otherwise.
	FormatAuto = "auto"
)

// ErrUnknownFormat is returned by [ParseFormat] so that flag parsing can tell a
// bad --log-format value apart from other configuration errors.
var ErrUnknownFormat = errors.New("unknown log format")

// Options configures [New]. The zero value logs JSON (or text on a terminal)
// at slog.LevelInfo with a per-process fingerprint key.
type Options struct {
	// Format is "json", "text" or "auto"; empty means "auto".
	Format string
	// Level is the minimum level logged; nil means slog.LevelInfo.
	Level slog.Leveler
	// FingerprintKey keys the fingerprints of redacted values. Give the same
	// key to several processes to correlate their lines; nil means 32 random
	// bytes drawn once per process.
	FingerprintKey []byte
}

// ParseFormat validates a log format name given on the command line or in
// the environment, so that a typo is reported before the service starts
// rather than silently changing the output. It accepts any letter case and
// maps the empty string to FormatAuto.
func ParseFormat(s string) (string, error) {
	switch f := strings.ToLower(strings.TrimSpace(s)); f {
	case "":
		return FormatAuto, nil
	case FormatJSON, FormatText, FormatAuto:
		return f, nil
	default:
		return "", fmt.Errorf("%w %q (want json, text or auto)", ErrUnknownFormat, s)
	}
}

// New returns the service logger writing to w. All records pass through
// [NewRedactingHandler] before they are formatted.
//
// An invalid opts.Format falls back to JSON and logs a warning saying so;
// validate flags with [ParseFormat] to reject it earlier.
func New(w io.Writer, opts Options) *slog.Logger {
	format, err := ParseFormat(opts.Format)
	if err != nil {
		format = FormatJSON
	}
	if format == FormatAuto {
		format = FormatJSON
		if isTerminal(w) {
			format = FormatText
		}
	}

	ho := &slog.HandlerOptions{Level: opts.Level}
	var next slog.Handler
	if format == FormatText {
		next = slog.NewTextHandler(w, ho)
	} else {
		next = newFastJSON(w, ho)
	}

	logger := slog.New(NewRedactingHandler(next, opts.FingerprintKey))
	if err != nil {
		logger.Warn("logging: using json", "err", err)
	}
	return logger
}

// FormatFor returns the format New would use for format on w: FormatAuto
// becomes FormatText on a terminal and FormatJSON otherwise. A logger
// writing through a wrapper of w (as [Buffered]'s) gets w's format this way.
func FormatFor(format string, w io.Writer) string {
	f, err := ParseFormat(format)
	if err != nil || f != FormatAuto {
		return format
	}
	if isTerminal(w) {
		return FormatText
	}
	return FormatJSON
}

// isTerminal reports whether w is a terminal, where people rather than log
// collectors read the output.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// MaxFlushInterval bounds [Buffered]'s interval.
const MaxFlushInterval = 10 * time.Second

// bufferSize is how much Buffered gathers at most before it writes.
const bufferSize = 256 << 10

// Buffered returns a writer that gathers what is written to w in memory
// and writes it to w at most interval after the first line pending (and
// whenever 256 KiB have gathered), so that a busy access log costs one
// write(2) per batch instead of one per line. A line is never split
// across two writes of w (one larger than the buffer goes out whole). It
// is safe for concurrent use. stop writes out what is pending and ends the
// buffering (what is written after stop goes straight to w); call it at
// shutdown. A crash loses at most the last interval of lines. interval
// <= 0 returns w unbuffered.
func Buffered(w io.Writer, interval time.Duration) (out io.Writer, stop func() error) {
	if interval <= 0 {
		return w, func() error { return nil }
	}
	b := &bufferedWriter{out: w, buf: bufio.NewWriterSize(w, bufferSize), interval: interval}
	return b, b.stop
}

// bufferedWriter is Buffered's writer. The flush is a timer armed by the
// first write into an empty buffer, not a ticker: an idle log costs
// nothing.
type bufferedWriter struct {
	out      io.Writer
	interval time.Duration

	mu      sync.Mutex
	buf     *bufio.Writer
	timer   *time.Timer // armed while something is pending
	stopped bool
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return b.out.Write(p)
	}
	// Out first with what is pending when p does not fit, so that p is not
	// split (bufio writes p itself, whole, when the buffer is empty).
	if len(p) > b.buf.Available() && b.buf.Buffered() > 0 {
		if err := b.buf.Flush(); err != nil {
			return 0, err
		}
	}
	n, err := b.buf.Write(p)
	if b.buf.Buffered() > 0 && b.timer == nil {
		b.timer = time.AfterFunc(b.interval, b.flushDue)
	}
	return n, err
}

// flushDue writes out what is pending when the interval is over. An error
// stays in the bufio.Writer: the next Write and stop return it.
func (b *bufferedWriter) flushDue() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timer = nil
	_ = b.buf.Flush()
}

func (b *bufferedWriter) stop() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return nil
	}
	b.stopped = true
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	return b.buf.Flush()
}

// FingerprintKeySetting is the store setting that keeps the fingerprint
// key generated at first start, beside the token signing key.
const FingerprintKeySetting = "log_fingerprint_key"

// SettingStore is the part of the store that keeps the fingerprint key
// (instore.Store has it).
type SettingStore = keysetting.Store

// LoadFingerprintKey returns configured if it is set, and otherwise the
// fingerprint key kept in the store, generated at first start (the first
// node to start wins). With the key kept, fingerprints stay the same
// across restarts and nodes, and `instore admin fingerprint VALUE` can
// compute a terminal's or merchant's to find its lines.
func LoadFingerprintKey(ctx context.Context, st SettingStore, configured []byte) ([]byte, error) {
	if len(configured) > 0 {
		return configured, nil
	}
	return keysetting.Key{
		Setting: FingerprintKeySetting, Name: "log fingerprint key", MinBytes: 16,
		Invalid: "log fingerprint key in the store is invalid",
		Random:  keysetting.CryptoRandom, // never fails since Go 1.24
	}.Init(ctx, st)
}
