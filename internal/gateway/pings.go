package gateway

import (
	"container/heap"
	"sync"
	"time"
)

// pingQueue times the pings of all sessions of a Server on one runtime
// timer: a min-heap of sessions by the time of their next ping, and a
// timer for the earliest. A timer per session (time.AfterFunc) cost each
// idle session some 200 bytes of heap (the Timer, the func value, its slot
// in the runtime's timer heap), about twice that in the process's memory
// at GC's pace; here a session costs a slot of the heap's slice and its
// two fields (pingAt, pingIdx). Each session is still pinged at its own
// time, the ping interval after its hello or its previous ping.
type pingQueue struct {
	epoch time.Time // pingAt counts from here, on the monotonic clock

	mu    sync.Mutex
	h     pingHeap
	timer *time.Timer // fires fire; nil until the first session
}

func (q *pingQueue) now() int64 { return int64(time.Since(q.epoch)) }

// add schedules the next ping of s in d, unless s ended or is queued.
func (q *pingQueue) add(s *session, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	// Under the lock, which finish's remove also takes after setting
	// ended: a session that ended stays out.
	if s.ended.Load() || s.pingIdx >= 0 {
		return
	}
	s.pingAt = q.now() + int64(d)
	heap.Push(&q.h, s)
	if s.pingIdx == 0 { // the earliest now
		q.arm(d)
	}
}

// remove takes s out of the queue.
func (q *pingQueue) remove(s *session) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if s.pingIdx >= 0 {
		heap.Remove(&q.h, int(s.pingIdx))
	}
	// The timer may stay set for s: fire then finds nothing due.
}

// arm sets the timer to fire in d; q.mu is held.
func (q *pingQueue) arm(d time.Duration) {
	if q.timer == nil {
		q.timer = time.AfterFunc(d, q.fire)
		return
	}
	q.timer.Reset(d)
}

// fire pings, each on a goroutine of its own as a session's own timer
// did, the sessions whose time has come, and sets the timer for the next.
// A session's next ping is scheduled once this one is written (sendPing).
func (q *pingQueue) fire() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	for len(q.h) > 0 && q.h[0].pingAt <= now {
		s := heap.Pop(&q.h).(*session)
		go s.sendPing()
	}
	if len(q.h) > 0 {
		q.arm(time.Duration(q.h[0].pingAt - now))
	}
}

// stop stops the timer (Close, once every session ended).
func (q *pingQueue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.timer != nil {
		q.timer.Stop()
	}
}

// pingHeap is a container/heap of sessions by pingAt; each session knows
// its index (pingIdx, -1 when not queued).
type pingHeap []*session

func (h pingHeap) Len() int           { return len(h) }
func (h pingHeap) Less(i, j int) bool { return h[i].pingAt < h[j].pingAt }
func (h pingHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pingIdx, h[j].pingIdx = int32(i), int32(j)
}

func (h *pingHeap) Push(x any) {
	s := x.(*session)
	s.pingIdx = int32(len(*h))
	*h = append(*h, s)
}

func (h *pingHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.pingIdx = -1
	return s
}
