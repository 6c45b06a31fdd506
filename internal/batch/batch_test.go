package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
)

// TestBatcherGathersWhatQueuedMeanwhile: a lone call runs its batch at
// once; the calls made while a batch runs are the next batch (up to most,
// the rest the one after), each gets its own key's result and the batch's
// error, and no call returns before its batch ran.
func TestBatcherGathersWhatQueuedMeanwhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b Batcher[string, string]
		var mu sync.Mutex
		var batches [][]string
		release := make(chan struct{})
		run := func(keys []string) (map[string]string, error) {
			mu.Lock()
			batches = append(batches, slices.Clone(keys))
			first := len(batches) == 1
			mu.Unlock()
			if first {
				<-release // the first batch runs until the test lets it end
			}
			out := map[string]string{}
			for _, k := range keys {
				if k != "missing" {
					out[k] = "v" + k
				}
			}
			if slices.Contains(keys, "bad") {
				return out, errors.New("the batch failed")
			}
			return out, nil
		}
		got := make([]string, 12)
		errs := make([]error, 12)
		var wg sync.WaitGroup
		call := func(i int, key string) {
			wg.Go(func() { got[i], errs[i] = b.Do(t.Context(), key, 4, run) })
		}
		call(0, "0")
		synctest.Wait() // the lone call runs its batch, held
		for i := 1; i <= 9; i++ {
			key := fmt.Sprint(i)
			switch i {
			case 5:
				key = "missing"
			case 9:
				key = "bad"
			}
			call(i, key)
			synctest.Wait() // queued in this order behind it
		}
		if got[1] != "" || len(batches) != 1 {
			t.Fatalf("before the first batch ended: results %q, batches %v", got, batches)
		}
		close(release)
		wg.Wait()
		want := [][]string{{"0"}, {"1", "2", "3", "4"}, {"missing", "6", "7", "8"}, {"bad"}}
		if !slices.EqualFunc(batches, want, slices.Equal) {
			t.Fatalf("batches %v, want %v", batches, want)
		}
		for i, key := range []string{"0", "1", "2", "3", "4", "missing", "6", "7", "8"} {
			wantV := "v" + key
			if key == "missing" {
				wantV = ""
			}
			if got[i] != wantV || errs[i] != nil {
				t.Errorf("call %d (%s): %q, %v; want %q", i, key, got[i], errs[i], wantV)
			}
		}
		if errs[9] == nil || got[9] != "vbad" {
			t.Errorf("the failed batch's call: %q, %v; want its result and the error", got[9], errs[9])
		}
		// Idle again: a lone call runs at once.
		if v, err := b.Do(t.Context(), "x", 4, run); v != "vx" || err != nil || len(batches) != 5 {
			t.Fatalf("a lone call after: %q, %v, %d batches", v, err, len(batches))
		}
	})
}

// TestBatcherPanic: a run that panics panics the call that ran it, gives
// the other calls of its batch an error, hands on to the calls queued
// behind, and leaves the batcher usable.
func TestBatcherPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b Batcher[string, int]
		release := make(chan struct{})
		run := func(keys []string) (map[string]int, error) {
			switch {
			case keys[0] == "a":
				<-release // held while b and c queue: their batch is next
			case keys[0] == "b":
				panic("boom")
			}
			out := map[string]int{}
			for _, k := range keys {
				out[k] = len(k)
			}
			return out, nil
		}
		type res struct {
			v   int
			err error
			r   any
		}
		results := map[string]chan res{}
		call := func(key string) {
			ch := make(chan res, 1)
			results[key] = ch
			go func() {
				var v int
				var err error
				defer func() { ch <- res{v, err, recover()} }()
				v, err = b.Do(t.Context(), key, 2, run)
			}()
			synctest.Wait()
		}
		call("a")
		call("b")
		call("c")
		call("dd") // beyond most (2): the batch after b's
		close(release)
		a, bb, c, d := <-results["a"], <-results["b"], <-results["c"], <-results["dd"]
		if a.v != 1 || a.err != nil || a.r != nil {
			t.Errorf("a: %+v", a)
		}
		if bb.r != "boom" {
			t.Errorf("b, whose batch panicked: %+v, want the panic", bb)
		}
		if c.err == nil || c.r != nil {
			t.Errorf("c, in b's batch: %+v, want an error", c)
		}
		if d.v != 2 || d.err != nil || d.r != nil {
			t.Errorf("dd, the next batch: %+v", d)
		}
		if v, err := b.Do(t.Context(), "eee", 2, run); v != 3 || err != nil {
			t.Fatalf("after: %d, %v", v, err)
		}
	})
}

// heldRun is a batcher's run that holds the batches whose first key is
// in hold until the channel given for it is closed, and records the
// batches' keys.
type heldRun struct {
	mu      sync.Mutex
	hold    map[string]chan struct{}
	batches [][]string
}

func (h *heldRun) run(keys []string) (map[string]string, error) {
	h.mu.Lock()
	h.batches = append(h.batches, slices.Clone(keys))
	held := h.hold[keys[0]]
	h.mu.Unlock()
	if held != nil {
		<-held
	}
	out := map[string]string{}
	for _, k := range keys {
		out[k] = "v" + k
	}
	return out, nil
}

// result is what a call of do returned, once it did.
type result struct {
	v   string
	err error
}

// start calls b.Do(ctx, key) on a goroutine of its own and returns where
// its result comes, once every goroutine of the bubble waits.
func start(b *Batcher[string, string], h *heldRun, ctx context.Context, key string) chan result {
	ch := make(chan result, 1)
	go func() {
		v, err := b.Do(ctx, key, 4, h.run)
		ch <- result{v, err}
	}()
	synctest.Wait()
	return ch
}

// TestBatcherQueuedCallCancelled: a queued call whose context ends leaves
// the queue at once with the context's error, and is in no batch; the
// others get their results. A call already taken into a batch when its
// context ends waits for that batch and gets its result.
func TestBatcherQueuedCallCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b Batcher[string, string]
		h := &heldRun{hold: map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}}
		ctxB, cancelB := context.WithCancel(t.Context())
		ctxC, cancelC := context.WithCancel(t.Context())
		ctxD, cancelD := context.WithCancel(t.Context())
		a := start(&b, h, t.Context(), "a") // runs its batch, held
		rb := start(&b, h, ctxB, "b")
		rc := start(&b, h, ctxC, "c")
		rd := start(&b, h, ctxD, "d")
		re := start(&b, h, t.Context(), "e")
		cancelC() // queued: leaves
		synctest.Wait()
		select {
		case r := <-rc:
			if !errors.Is(r.err, context.Canceled) || r.v != "" {
				t.Fatalf("the cancelled queued call: %q, %v; want context.Canceled", r.v, r.err)
			}
		default:
			t.Fatal("the cancelled queued call did not return while the batch before it ran")
		}
		close(h.hold["a"]) // b runs b, d, e, held
		synctest.Wait()
		cancelD() // taken into b's batch: waits for it
		cancelB() // runs the batch: runs it to its end
		synctest.Wait()
		select {
		case r := <-rd:
			t.Fatalf("a call of a running batch returned before it ended: %q, %v", r.v, r.err)
		default:
		}
		close(h.hold["b"])
		for key, ch := range map[string]chan result{"a": a, "b": rb, "d": rd, "e": re} {
			if r := <-ch; r.v != "v"+key || r.err != nil {
				t.Errorf("%s: %q, %v; want its result", key, r.v, r.err)
			}
		}
		if want := [][]string{{"a"}, {"b", "d", "e"}}; !slices.EqualFunc(h.batches, want, slices.Equal) {
			t.Errorf("batches %v, want %v", h.batches, want)
		}
	})
}

// TestBatcherCancelledAfterHandedTheLead: a queued call told to run the
// next batch runs it even if its context ended before it saw that (the
// calls behind it wait for it), and the batcher is idle after.
func TestBatcherCancelledAfterHandedTheLead(t *testing.T) {
	for range 20 { // either case of wait's first select may be taken
		synctest.Test(t, func(t *testing.T) {
			var b Batcher[string, string]
			h := &heldRun{hold: map[string]chan struct{}{"a": make(chan struct{})}}
			a := start(&b, h, t.Context(), "a")
			c, lead := b.join("b")
			rc := start(&b, h, t.Context(), "c")
			if lead {
				t.Fatal("a call queued while a batch runs was told to lead")
			}
			close(h.hold["a"])
			synctest.Wait() // a's batch ran and told b to run the next
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			lead, err := b.wait(ctx, c)
			if !lead || err != nil {
				t.Fatalf("wait after being handed the lead: %v, %v; want to lead", lead, err)
			}
			if v, err := b.lead(c, 4, h.run); v != "vb" || err != nil {
				t.Fatalf("b led: %q, %v", v, err)
			}
			for key, ch := range map[string]chan result{"a": a, "c": rc} {
				if r := <-ch; r.v != "v"+key || r.err != nil {
					t.Errorf("%s: %q, %v; want its result", key, r.v, r.err)
				}
			}
			if want := [][]string{{"a"}, {"b", "c"}}; !slices.EqualFunc(h.batches, want, slices.Equal) {
				t.Errorf("batches %v, want %v", h.batches, want)
			}
			if b.running || len(b.queue) != 0 {
				t.Errorf("after: running %v, %d queued; want idle", b.running, len(b.queue))
			}
		})
	}
}
