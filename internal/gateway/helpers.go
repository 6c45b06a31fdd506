package gateway

import (
	"sync/atomic"
	"time"
)

// helpers run the handling of the sessions' frames (session.offload) on
// goroutines that outlive one frame. A frame's handling (the store's work,
// the strict JSON decoder) needs a stack of tens of KiB; a goroutine starts
// with a few and doubles its stack by copies as it goes, and that growth
// of a fresh goroutine per frame was 7 % of a node's CPU under purchase
// load (docs/benchmarks.md, "Frame helpers"). A helper that has handled a
// frame waits for the next one for helperIdle, then ends: a fleet that
// falls idle holds no helper, and its sessions' read loops stay at the
// minimum stack (the reason for offload). At most maxIdleHelpers wait at
// once; a frame that finds none waiting starts a new helper, so a frame
// never waits for another session's.
type helpers struct {
	work chan func() // unbuffered: a send succeeds when a helper waits
	idle atomic.Int32
}

const (
	// helperIdle is how long a helper waits for another frame.
	helperIdle = 2 * time.Second
	// maxIdleHelpers bounds the helpers waiting (and the stacks they keep).
	maxIdleHelpers = 64
)

func newHelpers() *helpers { return &helpers{work: make(chan func())} }

// run runs fn on a waiting helper, or on a new one.
func (h *helpers) run(fn func()) {
	select {
	case h.work <- fn:
	default:
		go h.loop(fn)
	}
}

// loop runs fn, then the frames handed to it while it waits.
func (h *helpers) loop(fn func()) {
	fn()
	t := time.NewTimer(helperIdle)
	defer t.Stop()
	for {
		if h.idle.Add(1) > maxIdleHelpers {
			h.idle.Add(-1)
			return
		}
		select {
		case fn = <-h.work:
			h.idle.Add(-1)
			fn()
			t.Reset(helperIdle)
		case <-t.C:
			h.idle.Add(-1)
			return
		}
	}
}
