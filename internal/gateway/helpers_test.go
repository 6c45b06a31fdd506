package gateway

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestHelpersReused: a frame handed over while a helper waits runs on that
// helper (no new goroutine, no new stack to grow), frames at once each get
// one (none waits for another session's), at most maxIdleHelpers wait,
// and every helper ends helperIdle after its last frame (synctest.Test
// fails on a goroutine left blocked).
func TestHelpersReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHelpers()
		var ran atomic.Int32
		h.run(func() { ran.Add(1) })
		synctest.Wait()
		if ran.Load() != 1 || h.idle.Load() != 1 {
			t.Fatalf("after one frame: ran %d, %d helpers waiting; want 1, 1", ran.Load(), h.idle.Load())
		}
		for range 5 {
			h.run(func() { ran.Add(1) })
			synctest.Wait()
		}
		if ran.Load() != 6 || h.idle.Load() != 1 {
			t.Fatalf("after six frames one at a time: ran %d, %d helpers waiting; want 6, 1 (the same helper)", ran.Load(), h.idle.Load())
		}

		// 100 frames at once, each held until all have started: none
		// waits for another.
		const n = 100
		var started sync.WaitGroup
		started.Add(n)
		release := make(chan struct{})
		for range n {
			h.run(func() {
				started.Done()
				<-release
			})
		}
		started.Wait()
		if h.idle.Load() != 0 {
			t.Fatalf("%d helpers waiting while every helper runs a frame", h.idle.Load())
		}
		close(release)
		synctest.Wait()
		if got := h.idle.Load(); got != maxIdleHelpers {
			t.Fatalf("%d helpers waiting after %d frames at once; want at most %d", got, n, maxIdleHelpers)
		}

		time.Sleep(helperIdle - time.Millisecond)
		synctest.Wait()
		if h.idle.Load() != maxIdleHelpers {
			t.Fatalf("%d helpers waiting before helperIdle passed; want %d", h.idle.Load(), maxIdleHelpers)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if h.idle.Load() != 0 {
			t.Fatalf("%d helpers still waiting after helperIdle", h.idle.Load())
		}
	})
}
