package simulation

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/instore-dev/instore"
)

// The scheduler: one goroutine, the simulator's, decides everything that
// happens, in an order drawn from the seed. What the service runs (an
// ECR's request, a terminal's report, a timer, a sweep) runs as a task: a
// goroutine that holds the baton while it runs and gives it back at every
// store call (store.go) and when it ends, so that exactly one goroutine
// runs at any moment and the interleaving of tasks is chosen by the seed,
// store call by store call. Time is the world's (clock below): it stands
// still while tasks run and jumps to the next scheduled event when none
// can run.

// task is one goroutine of the service under the baton.
type task struct {
	id     int
	name   string
	node   *node
	fn     func()
	resume chan struct{}
	began  bool
}

// event is something scheduled at a time of the world: a timer of a node,
// a message arriving, an actor's next move.
type event struct {
	at   time.Time
	seq  uint64
	name string
	fn   func()
	dead bool // stopped (a timer's Stop)
}

type events []*event

func (h events) Len() int { return len(h) }
func (h events) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h events) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *events) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// sched holds the world's time, its events and its tasks.
type sched struct {
	rng     *rand.Rand
	now     time.Time
	seq     uint64
	queue   events
	ready   []*task // tasks waiting for the baton, by id
	cur     *task   // the task holding the baton (nil: the simulator)
	tasks   int
	yielded chan struct{}
	// stepHook is called for every step taken (the trace).
	stepHook func(kind, name string)
}

// epoch is the world's time zero.
var epoch = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

func newSched(seed uint64) *sched {
	return &sched{
		rng:     rand.New(rand.NewChaCha8(seedBytes(seed, "sched"))),
		now:     epoch,
		yielded: make(chan struct{}),
	}
}

// at schedules fn at t (not before now).
func (s *sched) at(t time.Time, name string, fn func()) *event {
	if t.Before(s.now) {
		t = s.now
	}
	s.seq++
	e := &event{at: t, seq: s.seq, name: name, fn: fn}
	heap.Push(&s.queue, e)
	return e
}

// after schedules fn d from now.
func (s *sched) after(d time.Duration, name string, fn func()) *event {
	return s.at(s.now.Add(d), name, fn)
}

// spawn makes fn a task of node n, ready to run.
func (s *sched) spawn(n *node, name string, fn func()) {
	s.tasks++
	s.ready = append(s.ready, &task{id: s.tasks, name: name, node: n, fn: fn, resume: make(chan struct{})})
}

// yield gives the baton back from the running task and waits for it
// again. Called by the simulator itself (no task runs), it does nothing.
func (s *sched) yield() {
	t := s.cur
	if t == nil {
		return
	}
	s.ready = append(s.ready, t)
	s.yielded <- struct{}{}
	<-t.resume
}

// run gives the baton to t until it yields or ends.
func (s *sched) run(t *task) {
	s.cur = t
	if !t.began {
		t.began = true
		go func() {
			<-t.resume
			defer func() { s.yielded <- struct{}{} }()
			t.fn()
		}()
	}
	t.resume <- struct{}{}
	select {
	case <-s.yielded:
	case <-time.After(5 * time.Minute):
		panic(fmt.Sprintf("simulation: task %d %q neither yielded nor ended within five minutes of real time (blocked outside the store)", t.id, t.name))
	}
	s.cur = nil
}

// step takes one step: a ready task or an event due now, drawn from the
// seed; when there is neither, time jumps to the next event. It reports
// false when nothing is left at all.
func (s *sched) step() bool {
	for len(s.queue) > 0 && s.queue[0].dead {
		heap.Pop(&s.queue)
	}
	due := 0
	for _, e := range s.queue {
		if !e.dead && !e.at.After(s.now) {
			due++
		}
	}
	if len(s.ready) == 0 && due == 0 {
		if len(s.queue) == 0 {
			return false
		}
		s.now = s.queue[0].at
		return true
	}
	if i := s.rng.IntN(len(s.ready) + due); i < len(s.ready) {
		slices.SortFunc(s.ready, func(a, b *task) int { return a.id - b.id })
		t := s.ready[i]
		s.ready = slices.Delete(s.ready, i, i+1)
		if s.stepHook != nil && !t.began {
			s.stepHook("task", t.name)
		}
		s.run(t)
		return true
	}
	// The earliest due event first: events due at one time keep their order.
	e := heap.Pop(&s.queue).(*event)
	if e.dead {
		return true
	}
	if s.stepHook != nil {
		s.stepHook("event", e.name)
	}
	e.fn()
	return true
}

// clock is a node's instore.Clock on the world's time: its timers are
// events that run their function as a task of the node, and die with it.
type clock struct {
	s *sched
	n *node
}

func (c clock) Now() time.Time { return c.s.now }

func (c clock) AfterFunc(d time.Duration, f func()) instore.Timer {
	e := c.s.after(max(d, 0), "timer "+c.n.name, nil)
	e.fn = func() {
		if c.n.up {
			c.s.spawn(c.n, "timer", f)
		}
	}
	return timer{e}
}

type timer struct{ e *event }

func (t timer) Stop() bool {
	was := !t.e.dead
	t.e.dead = true
	return was
}
