package testlog_test

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/instore-dev/instore/internal/testlog"
)

// TestBufferConcurrentWrites writes lines from many goroutines while
// reading: every line arrives whole and none is lost.
func TestBufferConcurrentWrites(t *testing.T) {
	var b testlog.Buffer
	var wg sync.WaitGroup
	const writers, lines = 8, 200
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				fmt.Fprintf(&b, "writer %d line %d\n", w, i)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	var want []string
	for w := range writers {
		for i := range lines {
			want = append(want, fmt.Sprintf("writer %d line %d", w, i))
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %d lines, want %d, each whole", len(got), len(want))
	}
}
