package client

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEventStreamReader reads streams through the exported reader: every
// message as it came (a repeated one too), an id-only block as a cursor
// move, the retry advice, and the end of the stream.
func TestEventStreamReader(t *testing.T) {
	read := errors.New("connection reset")
	cases := []struct {
		name      string
		stream    io.Reader
		want      []EventStreamMessage
		wantRetry time.Duration
		wantErr   error
	}{
		{
			name:      "the service's messages, a ping and its retry advice",
			stream:    strings.NewReader("retry: 2000\n\n: ping\n\nid: evt_1\nevent: transaction.created\ndata: {\"a\":1}\n\n"),
			want:      []EventStreamMessage{{ID: "evt_1", Event: "transaction.created", Data: `{"a":1}`, HasData: true}},
			wantRetry: 2 * time.Second,
			wantErr:   io.EOF,
		},
		{
			name:   "a repeated message is returned twice",
			stream: strings.NewReader("id: evt_1\ndata: x\n\nid: evt_1\ndata: x\n\n"),
			want: []EventStreamMessage{
				{ID: "evt_1", Event: "message", Data: "x", HasData: true},
				{ID: "evt_1", Event: "message", Data: "x", HasData: true},
			},
			wantErr: io.EOF,
		},
		{
			name:   "an id-only block moves the cursor, several data lines join",
			stream: strings.NewReader("id: evt_2\n\ndata: a\ndata: b\n\n"),
			want: []EventStreamMessage{
				{ID: "evt_2"},
				{ID: "evt_2", Event: "message", Data: "a\nb", HasData: true},
			},
			wantErr: io.EOF,
		},
		{
			name:    "a message cut by the end is dropped",
			stream:  strings.NewReader("id: evt_3\ndata: cut"),
			wantErr: io.EOF,
		},
		{
			name:    "a read error is returned as it is",
			stream:  io.MultiReader(strings.NewReader("data: whole\n\n"), iotest.ErrReader(read)),
			want:    []EventStreamMessage{{Event: "message", Data: "whole", HasData: true}},
			wantErr: read,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewEventStreamReader(tc.stream)
			var got []EventStreamMessage
			var err error
			for {
				var m EventStreamMessage
				if m, err = r.Next(); err != nil {
					break
				}
				got = append(got, m)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("end: %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if r.Retry() != tc.wantRetry {
				t.Errorf("Retry() = %v, want %v", r.Retry(), tc.wantRetry)
			}
		})
	}
}

// TestSSEParser reads event streams as the HTML standard defines them.
func TestSSEParser(t *testing.T) {
	cases := []struct {
		name      string
		stream    string
		want      []sseMessage
		wantRetry time.Duration
	}{
		{
			name:      "the service's messages, a comment and retry",
			stream:    "retry: 2000\n\n: ping\n\nid: evt_0000000000000001\nevent: transaction.created\ndata: {\"a\":1}\n\n",
			want:      []sseMessage{{id: "evt_0000000000000001", event: "transaction.created", data: `{"a":1}`, hasData: true}},
			wantRetry: 2 * time.Second,
		},
		{
			name:   "data lines joined by LF; no event field is message",
			stream: "data: one\ndata:two\ndata:  three\ndata\n\n",
			want:   []sseMessage{{event: "message", data: "one\ntwo\n three\n", hasData: true}},
		},
		{
			name:   "CRLF and lone CR line ends, a byte order mark",
			stream: "\ufeffid: 1\r\ndata: a\r\n\r\nid: 2\rdata: b\r\r",
			want: []sseMessage{
				{id: "1", event: "message", data: "a", hasData: true},
				{id: "2", event: "message", data: "b", hasData: true},
			},
		},
		{
			name:   "an id without data sets the cursor only; the id is kept for later messages",
			stream: "id: evt_0000000000000007\n\ndata: x\n\n",
			want: []sseMessage{
				{id: "evt_0000000000000007"},
				{id: "evt_0000000000000007", event: "message", data: "x", hasData: true},
			},
		},
		{
			name:   "unknown fields, a bad retry and an id with NUL are ignored",
			stream: "foo: bar\nretry: 1s\nid: a\x00b\nevent: e\ndata: d\n\n",
			want:   []sseMessage{{event: "e", data: "d", hasData: true}},
		},
		{
			name:   "the event type does not carry over to the next message",
			stream: "event: e\ndata: 1\n\ndata: 2\n\n",
			want: []sseMessage{
				{event: "e", data: "1", hasData: true},
				{event: "message", data: "2", hasData: true},
			},
		},
		{
			name:   "a message the stream cut is dropped",
			stream: "data: whole\n\nid: 9\ndata: cut",
			want:   []sseMessage{{event: "message", data: "whole", hasData: true}},
		},
	}
	for _, tc := range cases {
		for _, oneByte := range []bool{false, true} {
			var r io.Reader = strings.NewReader(tc.stream)
			if oneByte {
				r = iotest.OneByteReader(r) // a CR at the end of a read
			}
			p := newSSEParser(r)
			var got []sseMessage
			for {
				m, err := p.next(nil)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s: next: %v", tc.name, err)
				}
				got = append(got, m)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(sseMessage{})); diff != "" {
				t.Errorf("%s (one byte a read %t): messages (-want +got):\n%s", tc.name, oneByte, diff)
			}
			if p.retry != tc.wantRetry {
				t.Errorf("%s: retry = %v, want %v", tc.name, p.retry, tc.wantRetry)
			}
		}
	}
}
