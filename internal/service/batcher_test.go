package service

import (
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
		var b batcher[string]
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
			wg.Go(func() { got[i], errs[i] = b.do(key, 4, run) })
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
		if v, err := b.do("x", 4, run); v != "vx" || err != nil || len(batches) != 5 {
			t.Fatalf("a lone call after: %q, %v, %d batches", v, err, len(batches))
		}
	})
}

// TestBatcherPanic: a run that panics panics the call that ran it, gives
// the other calls of its batch an error, hands on to the calls queued
// behind, and leaves the batcher usable.
func TestBatcherPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b batcher[int]
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
				v, err = b.do(key, 2, run)
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
		if v, err := b.do("eee", 2, run); v != 3 || err != nil {
			t.Fatalf("after: %d, %v", v, err)
		}
	})
}
