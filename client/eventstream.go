package client

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"
	"time"
)

// EventStreamMessage is one message of a server-sent event stream as
// EventStreamReader reads it.
type EventStreamMessage struct {
	// ID is the stream's last event id when the message was dispatched
	// (set by this message's id field or an earlier one's).
	ID string
	// Event is the event field ("message" when the message has none).
	Event string
	// Data is the message's data lines joined by "\n".
	Data string
	// HasData is false for a block that only set the last event id: ID
	// changed, Event and Data are empty.
	HasData bool
}

// EventStreamReader reads a server-sent event stream (text/event-stream,
// as GET /in-store/api/v1/events/stream sends it) with the parser
// FollowEvents uses, but without connecting, resuming or skipping
// anything: every message is returned as it came, a repeated one too.
// It is for a program that opens the stream with its own HTTP client and
// resumes it itself with the Last-Event-ID header, or that checks what
// the service sends; FollowEvents does all of that for the others.
type EventStreamReader struct {
	p *sseParser
}

// NewEventStreamReader reads the event stream r (a response body). A line
// may be 8 MiB long at the most.
func NewEventStreamReader(r io.Reader) *EventStreamReader {
	return &EventStreamReader{p: newSSEParser(r)}
}

// Next returns the next message of the stream: one ended by a blank line
// that has data, or a block that changed the last event id (HasData
// false). Comments (": ping") and the retry field are not messages. At
// the stream's end it returns io.EOF (a message not ended by a blank line
// is dropped, as the standard says), else the read's error.
func (r *EventStreamReader) Next() (EventStreamMessage, error) {
	m, err := r.p.next(nil)
	if err != nil {
		return EventStreamMessage{}, err
	}
	return EventStreamMessage{ID: m.id, Event: m.event, Data: m.data, HasData: m.hasData}, nil
}

// Retry is the reconnection delay the stream's last retry field advised
// (0: none yet).
func (r *EventStreamReader) Retry() time.Duration { return r.p.retry }

// sseMessage is one dispatched message of an event stream.
type sseMessage struct {
	id, event, data string
	// hasData is false for a block that only set the last event id.
	hasData bool
}

// sseParser reads an event stream (the text/event-stream format of the
// HTML standard, server-sent events): lines ending in CRLF, LF or CR;
// "field: value" lines (one space after the colon dropped) of the fields
// id, event, data and retry, others ignored; lines starting with a colon
// are comments; a blank line dispatches the message, its data lines
// joined by "\n". A block without data is no message, but its id still
// sets the last event id (next returns it with hasData false).
type sseParser struct {
	sc *bufio.Scanner
	// lastID is the last event id set by an id field; retry the last
	// retry field (0: none).
	lastID string
	retry  time.Duration
	first  bool
	// sentID is the last event id next returned.
	sentID string
}

func newSSEParser(r io.Reader) *sseParser {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxBody)
	sc.Split(scanSSELines)
	return &sseParser{sc: sc, first: true}
}

// next returns the next message; line, when not nil, is called after each
// line read (a ping too). io.EOF when the stream ends (a message not
// ended by a blank line is dropped, as the standard says).
func (p *sseParser) next(line func()) (sseMessage, error) {
	var data strings.Builder
	event, hasData := "", false
	for p.sc.Scan() {
		if line != nil {
			line()
		}
		l := p.sc.Text()
		if p.first {
			l = strings.TrimPrefix(l, "\ufeff")
			p.first = false
		}
		if l == "" {
			if !hasData {
				event = ""
				if p.lastID != p.sentID {
					p.sentID = p.lastID
					return sseMessage{id: p.lastID}, nil
				}
				continue
			}
			p.sentID = p.lastID
			if event == "" {
				event = "message"
			}
			return sseMessage{id: p.lastID, event: event, data: data.String(), hasData: true}, nil
		}
		if l[0] == ':' {
			continue // a comment: ": ping"
		}
		field, value, found := strings.Cut(l, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		case "event":
			event = value
		case "id":
			if !strings.ContainsRune(value, 0) {
				p.lastID = value
			}
		case "retry":
			if n, err := strconv.ParseUint(value, 10, 32); err == nil && strings.Trim(value, "0123456789") == "" {
				p.retry = time.Duration(n) * time.Millisecond
			}
		}
	}
	if err := p.sc.Err(); err != nil {
		return sseMessage{}, err
	}
	return sseMessage{}, io.EOF
}

// scanSSELines splits an event stream into lines ending in CRLF, LF or a
// lone CR.
func scanSSELines(data []byte, atEOF bool) (int, []byte, error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		// CR: a CRLF needs the next byte to be seen.
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
		if atEOF {
			return i + 1, data[:i], nil
		}
		return 0, nil, nil
	}
	if atEOF {
		// A last line without its end: the standard drops an incomplete
		// message, so hand it over and let next drop it.
		return len(data), data, nil
	}
	return 0, nil, nil
}
