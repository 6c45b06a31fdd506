package client_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore/client"
)

// TestEventStreamReader reads streams through the exported reader: every
// message as it came (a repeated one too), an id-only block as a cursor
// move, the retry advice, and the end of the stream.
func TestEventStreamReader(t *testing.T) {
	read := errors.New("connection reset")
	cases := []struct {
		name      string
		stream    io.Reader
		want      []client.EventStreamMessage
		wantRetry time.Duration
		wantErr   error
	}{
		{
			name:      "the service's messages, a ping and its retry advice",
			stream:    strings.NewReader("retry: 2000\n\n: ping\n\nid: evt_1\nevent: transaction.created\ndata: {\"a\":1}\n\n"),
			want:      []client.EventStreamMessage{{ID: "evt_1", Event: "transaction.created", Data: `{"a":1}`, HasData: true}},
			wantRetry: 2 * time.Second,
			wantErr:   io.EOF,
		},
		{
			name:   "a repeated message is returned twice",
			stream: strings.NewReader("id: evt_1\ndata: x\n\nid: evt_1\ndata: x\n\n"),
			want: []client.EventStreamMessage{
				{ID: "evt_1", Event: "message", Data: "x", HasData: true},
				{ID: "evt_1", Event: "message", Data: "x", HasData: true},
			},
			wantErr: io.EOF,
		},
		{
			name:   "an id-only block moves the cursor, several data lines join",
			stream: strings.NewReader("id: evt_2\n\ndata: a\ndata: b\n\n"),
			want: []client.EventStreamMessage{
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
			want:    []client.EventStreamMessage{{Event: "message", Data: "whole", HasData: true}},
			wantErr: read,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := client.NewEventStreamReader(tc.stream)
			var got []client.EventStreamMessage
			var err error
			for {
				var m client.EventStreamMessage
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
