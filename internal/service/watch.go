package service

import (
	"sync"

	"github.com/instore-dev/instore"
)

// running keeps the latest state this node committed of each of its
// transactions that is not final yet (bounded by the terminals busy at
// once), so that a terminal's ack, progress and result start from it, and a
// status request of a running transaction is answered from it, instead of
// reading the store. Every change of a transaction is made by the node that
// runs it (one node: see the README's limitations), which puts the new
// state here right after its commit, before it answers or wakes anyone. For
// the changes it is only ever a first guess: each is a compare-and-set on
// the stored version, which re-reads the store when the guess was stale.
type running struct {
	mu sync.Mutex
	// m holds the latest state put of each running transaction, and of
	// each one that ended lately only the version, as a marker, so that a
	// late put of an older state (a change committed before the final one,
	// put after it) is refused. The markers are swept when m is full: they
	// are needed for the moment between a commit and its put.
	m map[string]runningEntry
}

type runningEntry struct {
	t       *instore.Transaction // nil once final
	version int64
}

// maxRunning bounds running: past it, the final markers are swept.
const maxRunning = 10_000

// put records t, a committed state not changed afterwards, unless a newer
// one was put.
func (r *running) put(t *instore.Transaction) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]runningEntry{}
	}
	if old, ok := r.m[t.ID]; ok && old.version >= t.Version {
		return
	}
	if len(r.m) >= maxRunning {
		for id, old := range r.m {
			if old.t == nil {
				delete(r.m, id)
			}
		}
		if len(r.m) >= maxRunning {
			clear(r.m) // that many running: the store has them all
		}
	}
	e := runningEntry{version: t.Version}
	if !t.Final() {
		e.t = t
	}
	r.m[t.ID] = e
}

// forget drops what r holds of ref: another process changed it.
func (r *running) forget(ref string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[ref]; ok && e.t != nil {
		r.m[ref] = runningEntry{version: e.version}
	}
}

// get returns a copy of the state of ref if it is running, or nil.
func (r *running) get(ref string) *instore.Transaction {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[ref]
	if e.t == nil {
		return nil
	}
	cp := *e.t
	return &cp
}

// runningState is the state this node last committed of the running
// transaction ref, or nil: always nil when other processes change the
// store too (Service.Shared), whose changes running does not see.
func (s *Service) runningState(ref string) *instore.Transaction {
	if s.Shared {
		return nil
	}
	return s.running.get(ref)
}

// changes wakes whoever waits on a transaction when it changes: an entry
// per watched transaction, kept while someone watches, whose channel
// publish closes (and replaces). publish also leaves the committed state it
// knows in the entry, so that a woken waiter needs no read of its own.
type changes struct {
	mu        sync.Mutex
	m         map[string]*watch
	observers []func(id string)
	// committed are told of the changes this process committed, not of
	// those published for another process (Publish).
	committed []func(id string)
}

type watch struct {
	ch   chan struct{}
	refs int
	// gen counts the publishes since the entry was made; t is the newest
	// committed state published (nil when the last publish carried none).
	gen uint64
	t   *instore.Transaction
}

// watch returns a channel closed at the next change of ref, and a release
// function to call when done waiting.
func (c *changes) watch(ref string) (<-chan struct{}, func()) {
	w, _, release := c.subscribe(ref)
	c.mu.Lock()
	defer c.mu.Unlock()
	return w.ch, release
}

// subscribe holds the entry of ref until release is called, and returns
// its generation: a change published from now on moves it.
func (c *changes) subscribe(ref string) (*watch, uint64, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*watch{}
	}
	w := c.m[ref]
	if w == nil {
		w = &watch{ch: make(chan struct{})}
		c.m[ref] = w
	}
	w.refs++
	return w, w.gen, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		w.refs--
		if w.refs == 0 && c.m[ref] == w {
			delete(c.m, ref)
		}
	}
}

// since returns, if ref was published after generation gen, the newest
// generation and the state published (nil: read the store); and the
// channel closed at the next publish.
func (c *changes) since(w *watch, gen uint64) (newGen uint64, t *instore.Transaction, changed bool, ch <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return w.gen, w.t, w.gen != gen, w.ch
}

// publish wakes every watcher of ref and tells the observers, after this
// process committed a change of it.
func (c *changes) publish(ref string) { c.publishState(ref, nil) }

// publishState is publish with the transaction's committed state, which
// the waiters take instead of reading it again. It must be called after
// the commit, and t not changed afterwards.
func (c *changes) publishState(ref string, t *instore.Transaction) { c.publishFrom(ref, t, true) }

// publishFrom wakes the watchers of ref and tells the observers; local
// says this process committed the change (the committed hooks are told
// too), as opposed to another process that shares the store.
func (c *changes) publishFrom(ref string, t *instore.Transaction, local bool) {
	c.mu.Lock()
	if w := c.m[ref]; w != nil {
		switch {
		case t == nil:
			w.t = nil
		case w.t == nil || t.Version > w.t.Version:
			w.t = t
		}
		w.gen++
		close(w.ch)
		w.ch = make(chan struct{})
	}
	obs := c.observers
	var com []func(string)
	if local {
		com = c.committed
	}
	c.mu.Unlock()
	for _, f := range com {
		f(ref)
	}
	for _, f := range obs {
		f(ref)
	}
}

// Publish wakes the waiters of a transaction or print job that another
// process sharing the store changed (another node: internal/cluster), and
// tells the observers; they read it from the store. The OnCommit hooks
// are not told: the change is not this process's.
func (s *Service) Publish(ref string) {
	s.running.forget(ref)
	s.changes.publishFrom(ref, nil, false)
}

// RefreshWaits wakes every wait in progress to read its transaction from
// the store again: what a node does when it may have missed another
// node's wake-ups (its notifications' connection broke).
func (s *Service) RefreshWaits() {
	s.changes.mu.Lock()
	refs := make([]string, 0, len(s.changes.m))
	for ref := range s.changes.m {
		refs = append(refs, ref)
	}
	s.changes.mu.Unlock()
	for _, ref := range refs {
		s.Publish(ref)
	}
}

// OnCommit registers f to be called with the id of every transaction or
// print job this process changed, right after the commit (the cluster
// wakes the other nodes with it). f runs on the changing goroutine: it
// must be quick.
func (s *Service) OnCommit(f func(id string)) {
	s.changes.mu.Lock()
	defer s.changes.mu.Unlock()
	s.changes.committed = append(s.changes.committed, f)
}

// Observe registers f to be called with the id (onlineAPIRefId or printId)
// of every transaction or print job this Service changes, after the change
// is committed. f runs on the changing goroutine: it must be quick.
func (s *Service) Observe(f func(id string)) {
	s.changes.mu.Lock()
	defer s.changes.mu.Unlock()
	s.changes.observers = append(s.changes.observers, f)
}
