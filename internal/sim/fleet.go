package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// ErrFleetStopped is returned by Fleet.Add after Stop.
var ErrFleetStopped = errors.New("sim: fleet stopped")

// Fleet holds the virtual terminals of a process (the demo's, the
// sandbox's) by serial number and runs each in its own goroutine.
type Fleet struct {
	mu        sync.Mutex
	terminals map[string]*Terminal
	ctx       context.Context // set by Start
	cancel    context.CancelFunc
	stopped   bool
	wg        sync.WaitGroup
	watchers  []func(*Terminal)
}

// OnChange registers f to be called with a terminal after every change of
// its State, for the fleet's terminals now and those added later (see
// Terminal.OnChange for the rules f must follow).
func (f *Fleet) OnChange(fn func(*Terminal)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watchers = append(f.watchers, fn)
	for _, t := range f.terminals {
		t.OnChange(func() { fn(t) })
	}
}

// NewFleet returns an empty fleet.
func NewFleet() *Fleet {
	return &Fleet{terminals: map[string]*Terminal{}}
}

// Add creates a terminal; once the fleet is started, it starts at once.
func (f *Fleet) Add(cfg Config) (*Terminal, error) {
	t, err := New(cfg)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return nil, ErrFleetStopped
	}
	if _, dup := f.terminals[cfg.SerialNumber]; dup {
		return nil, fmt.Errorf("sim: the fleet already has a terminal with that serial number")
	}
	f.terminals[cfg.SerialNumber] = t
	for _, fn := range f.watchers {
		t.OnChange(func() { fn(t) })
	}
	if f.ctx != nil {
		f.runLocked(t)
	}
	return t, nil
}

// Start runs every terminal, and every terminal added later, until ctx
// ends or Stop. Calling it again does nothing.
func (f *Fleet) Start(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx != nil || f.stopped {
		return
	}
	f.ctx, f.cancel = context.WithCancel(ctx)
	for _, t := range f.terminals {
		f.runLocked(t)
	}
}

func (f *Fleet) runLocked(t *Terminal) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := t.Run(f.ctx); err != nil {
			t.log.Error("sim: terminal stopped", "err", err)
		}
	}()
}

// Get returns the terminal with that serial number.
func (f *Fleet) Get(serial string) (*Terminal, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.terminals[serial]
	return t, ok
}

// States returns every terminal's state, ordered by serial number.
func (f *Fleet) States() []State {
	f.mu.Lock()
	ts := make([]*Terminal, 0, len(f.terminals))
	for _, t := range f.terminals {
		ts = append(ts, t)
	}
	f.mu.Unlock()
	slices.SortFunc(ts, func(a, b *Terminal) int { return strings.Compare(a.cfg.SerialNumber, b.cfg.SerialNumber) })
	out := make([]State, len(ts))
	for i, t := range ts {
		out[i] = t.State()
	}
	return out
}

// Stop stops every terminal and waits until they have closed their
// sessions. The fleet cannot be started again.
func (f *Fleet) Stop() {
	f.mu.Lock()
	f.stopped = true
	if f.cancel != nil {
		f.cancel()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
