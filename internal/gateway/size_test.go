package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"

	"github.com/gobwas/ws"
	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// largestResult is an APPROVED result with both receipts at their
// longest: MaxReceiptLines lines of MaxReceiptLineLen characters outside
// the Basic Multilingual Plane, each written as an escaped surrogate pair
// (12 bytes a character, as Python's json.dumps writes them), with
// Python's ", " separators. The lines it decodes to are returned with it.
func largestResult(id, ref string) (string, []string) {
	const char = "\U0001F600"
	line := `"` + strings.Repeat(`\ud83d\ude00`, protocol.MaxReceiptLineLen) + `"`
	lines := make([]string, protocol.MaxReceiptLines)
	want := make([]string, protocol.MaxReceiptLines)
	for i := range lines {
		lines[i] = line
		want[i] = strings.Repeat(char, protocol.MaxReceiptLineLen)
	}
	receipt := "[" + strings.Join(lines, ", ") + "]"
	return fmt.Sprintf(`{"type": "result", "id": %q, "ref": %q, "data": {"statusId": 0, "entryMode": "CONTACTLESS", "cardBrand": "VISA", `+
		`"maskedPan": "411111******1111", "authorizationCode": "A1B2C3", "customerReceipt": %s, "merchantReceipt": %s}}`, id, ref, receipt, receipt), want
}

// The largest result a terminal may send, far over the 16 KiB the
// gateway once took, is taken and confirmed, whole or in fragments: a
// result is never refused for its size.
func TestLargestResultAccepted(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.connect("SN-BIG")
	frame, want := largestResult("t-big-1", "txn_big")
	if len(frame) <= 16<<10 || len(frame) > protocol.MaxFrameBytes {
		t.Fatalf("the result is %d bytes; want more than 16 KiB and at most MaxFrameBytes %d", len(frame), protocol.MaxFrameBytes)
	}
	c.send(frame)
	if confirm := c.next(); confirm.Type != protocol.TypeConfirm || confirm.Re != "t-big-1" {
		t.Fatalf("got %+v, want the confirm of t-big-1", confirm)
	}

	// In fragments of 64 KiB, a ping between two of them.
	frame, _ = largestResult("t-big-2", "txn_big2")
	var frames [][]byte
	for i, op := 0, byte(0x1); i < len(frame); i, op = i+64<<10, 0x0 {
		end := min(i+64<<10, len(frame))
		frames = append(frames, rawFrame(end == len(frame), 0, op, true, []byte(frame[i:end])))
		if i == 0 {
			frames = append(frames, rawFrame(true, 0, 0x9, true, []byte("between")))
		}
	}
	c.writeRaw(frames...)
	if confirm := c.next(); confirm.Type != protocol.TypeConfirm || confirm.Re != "t-big-2" {
		t.Fatalf("got %+v, want the confirm of t-big-2", confirm)
	}

	got := h.ev.Results()
	if len(got) != 2 {
		t.Fatalf("results = %d, want 2", len(got))
	}
	for _, r := range got {
		if r.StatusID != instore.StatusApproved || !cmp.Equal(r.Result.Receipt, instore.Receipt{Customer: want, Merchant: want}) {
			t.Errorf("result %s: status %d, receipt of %d and %d lines; want APPROVED with both receipts whole",
				r.MessageID, r.StatusID, len(r.Result.Receipt.Customer), len(r.Result.Receipt.Merchant))
		}
	}
}

// trickleConn is a connection whose peer sent data and then nothing
// more: once data is read, a Read signals blocked and waits for release.
type trickleConn struct {
	net.Conn // not used: only Read is called
	data     []byte
	blocked  chan struct{}
	release  chan struct{}
}

func (c *trickleConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		close(c.blocked)
		<-c.release
		return 0, io.EOF
	}
	n := copy(p, c.data)
	c.data = c.data[n:]
	return n, nil
}

// A frame header announcing a message of the limit does not make the
// session allocate it: the buffer grows with what arrives. A peer that
// announces ~312 KiB and sends 1 KiB costs about one read step.
func TestAnnouncedLengthNotAllocated(t *testing.T) {
	g := New(Config{Events: &recorder{}})
	defer g.Close()
	nc := &trickleConn{data: make([]byte, 1<<10), blocked: make(chan struct{}), release: make(chan struct{})}
	s := newSession(g, nc, "SN-TRICKLE")
	s.registered = true // after hello: the whole limit applies (before it, maxHelloBytes)
	h := ws.Header{Fin: true, OpCode: ws.OpText, Masked: true, Length: protocol.MaxFrameBytes, Mask: [4]byte{1, 2, 3, 4}}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan error, 1)
	go func() {
		_, _, err := s.message(h)
		done <- err
	}()
	<-nc.blocked
	runtime.ReadMemStats(&after)
	close(nc.release)
	if err := <-done; !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("message = %v, want the connection's unexpected EOF", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Errorf("%d bytes allocated for 1 KiB received of an announced %d, want at most %d", n, protocol.MaxFrameBytes, 64<<10)
	}
}
