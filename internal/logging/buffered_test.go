package logging

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// writes records every Write it is given, whole.
type writes struct {
	mu  sync.Mutex
	got []string
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, string(p))
	return len(p), nil
}

func (w *writes) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got...)
}

// TestBufferedFlushesAfterTheInterval: lines wait in memory until the
// interval after the first of them is over, then go out in one write.
func TestBufferedFlushesAfterTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w writes
		bw, stop := Buffered(&w, 100*time.Millisecond)
		defer stop()
		bw.Write([]byte("a\n"))
		time.Sleep(60 * time.Millisecond) // the bubble's clock
		bw.Write([]byte("b\n"))
		synctest.Wait()
		if got := w.all(); len(got) != 0 {
			t.Fatalf("before the interval: %q written, want nothing", got)
		}
		time.Sleep(40 * time.Millisecond)
		synctest.Wait()
		if got := w.all(); len(got) != 1 || got[0] != "a\nb\n" {
			t.Fatalf("after the interval: writes %q, want one of \"a\\nb\\n\"", got)
		}
		// Nothing pending: no more writes however long it waits.
		time.Sleep(time.Second)
		synctest.Wait()
		bw.Write([]byte("c\n"))
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := w.all(); len(got) != 2 || got[1] != "c\n" {
			t.Fatalf("a later line: writes %q, want a second of \"c\\n\"", got)
		}
	})
}

// TestBufferedStop: stop writes out what is pending; later lines go
// straight through.
func TestBufferedStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w writes
		bw, stop := Buffered(&w, time.Hour)
		bw.Write([]byte("a\n"))
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if got := w.all(); len(got) != 1 || got[0] != "a\n" {
			t.Fatalf("after stop: writes %q, want one of \"a\\n\"", got)
		}
		bw.Write([]byte("b\n"))
		if got := w.all(); len(got) != 2 || got[1] != "b\n" {
			t.Fatalf("a line after stop: writes %q, want \"b\\n\" at once", got)
		}
		if err := stop(); err != nil {
			t.Fatalf("stop again = %v", err)
		}
	})
}

// TestBufferedFullBuffer: 256 KiB gathered go out without waiting for the
// interval, and a line is never split across two writes.
func TestBufferedFullBuffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w writes
		bw, stop := Buffered(&w, time.Hour)
		defer stop()
		line := strings.Repeat("x", 999) + "\n"
		n := bufferSize/len(line) + 1
		for range n {
			bw.Write([]byte(line))
		}
		got := w.all()
		if len(got) != 1 || len(got[0]) != (n-1)*len(line) {
			t.Fatalf("after %d lines of %d bytes: %d writes, want one of the %d lines that fit", n, len(line), len(got), n-1)
		}
		big := strings.Repeat("y", 2*bufferSize) + "\n"
		bw.Write([]byte(big))
		got = w.all()
		if len(got) != 3 || got[1] != line || got[2] != big {
			t.Fatalf("a line larger than the buffer: %d writes, want the pending line then the large one whole", len(got))
		}
	})
}

// TestBufferedConcurrent: lines written from many goroutines all come out
// whole (run with -race).
func TestBufferedConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w writes
		bw, stop := Buffered(&w, 10*time.Millisecond)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 100 {
					bw.Write([]byte(strings.Repeat(string(rune('a'+g)), 10+i) + "\n"))
					if i%10 == 0 {
						time.Sleep(5 * time.Millisecond)
					}
				}
			})
		}
		wg.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		all := strings.Join(w.all(), "")
		lines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
		if len(lines) != 800 {
			t.Fatalf("%d lines out, want 800", len(lines))
		}
		for _, l := range lines {
			if l == "" || strings.Count(l, l[:1]) != len(l) {
				t.Fatalf("line %q mixed with another", l)
			}
		}
	})
}

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestBufferedError: a failed write is returned by stop; interval <= 0 is
// w itself.
func TestBufferedError(t *testing.T) {
	bw, stop := Buffered(failing{}, time.Hour)
	bw.Write([]byte("a\n"))
	if err := stop(); err == nil {
		t.Error("stop after a failed write = nil, want the error")
	}
	var b bytes.Buffer
	if bw, _ := Buffered(&b, 0); bw != &b {
		t.Errorf("Buffered(w, 0) = %T, want w", bw)
	}
}
