package loadtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// op is a kind of request: workers goroutines call fn in a loop.
type op struct {
	name, unit string
	workers    int
	// fn does one request (or one purchase life) as worker w.
	fn func(ctx context.Context, w int) error
}

// errSkip from an op's fn means it did nothing this time: neither a
// request nor an error.
var errSkip = errors.New("skip")

// window runs ops together: a warm-up, then a measured window of the given
// length (shortened once max requests completed, when max > 0). A request
// counts, with its whole latency, when it completes inside the window (it
// may have started in the warm-up): the rate is completions per second.
// Every failure counts as an error, warm-up included. stats reads the
// server's process (nil: no server figures).
type window struct {
	warmup, duration time.Duration
	max              int64
	stats            func() (procStats, error)
	// dbCPU reads the database server's CPU time (nil: not measured).
	dbCPU func() (cpuSnapshot, error)
	// onStart runs when the measured window starts (a profile, say).
	onStart func(ctx context.Context, d time.Duration)
}

type worker struct {
	h     hist
	count int64
}

func (wd window) run(ctx context.Context, ops []op) []Side {
	t0 := time.Now()
	ws := t0.Add(wd.warmup)
	we := ws.Add(wd.duration)
	var total atomic.Int64
	early := make(chan struct{})
	var earlyOnce sync.Once
	var earlyAt atomic.Int64
	// In-flight requests at the end get a bounded time to finish.
	ctx, cancel := context.WithDeadline(ctx, we.Add(90*time.Second))
	defer cancel()

	type opState struct {
		workers  []*worker
		errors   atomic.Int64
		firstErr atomic.Pointer[string]
	}
	states := make([]*opState, len(ops))
	var wg sync.WaitGroup
	for i, o := range ops {
		st := &opState{workers: make([]*worker, o.workers)}
		states[i] = st
		for w := range o.workers {
			wk := &worker{}
			st.workers[w] = wk
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					start := time.Now()
					if !start.Before(we) || ctx.Err() != nil {
						return
					}
					select {
					case <-early:
						return
					default:
					}
					err := o.fn(ctx, w)
					end := time.Now()
					if errors.Is(err, errSkip) {
						continue
					}
					if err != nil {
						if ctx.Err() != nil {
							return
						}
						st.errors.Add(1)
						msg := err.Error()
						st.firstErr.CompareAndSwap(nil, &msg)
						// Do not spin on a failing server.
						time.Sleep(10 * time.Millisecond)
						continue
					}
					if end.Before(ws) || end.After(we) {
						continue
					}
					if e := earlyAt.Load(); e != 0 && end.UnixNano() > e {
						continue
					}
					wk.h.record(end.Sub(start))
					wk.count++
					if wd.max > 0 && total.Add(1) >= wd.max {
						earlyOnce.Do(func() {
							earlyAt.Store(end.UnixNano())
							close(early)
						})
					}
				}
			}()
		}
	}

	// Sample the server and this process at both ends of the window.
	var s0, s1, c0, c1 procStats
	var haveServer, haveDB bool
	var d0, d1 cpuSnapshot
	end := we
	sleepUntil(ctx, ws, nil)
	if wd.stats != nil {
		var err error
		s0, err = wd.stats()
		haveServer = err == nil
	}
	c0, _ = readProc(0)
	if wd.dbCPU != nil {
		var err error
		d0, err = wd.dbCPU()
		haveDB = err == nil
	}
	var profiling sync.WaitGroup
	if wd.onStart != nil {
		profiling.Add(1)
		go func() { defer profiling.Done(); wd.onStart(ctx, wd.duration) }()
	}
	if sleepUntil(ctx, we, early) {
		end = time.Unix(0, earlyAt.Load())
	}
	if haveServer {
		var err error
		s1, err = wd.stats()
		haveServer = err == nil
	}
	c1, _ = readProc(0)
	if haveDB {
		var err error
		d1, err = wd.dbCPU()
		haveDB = err == nil
	}
	wg.Wait()
	profiling.Wait()

	secs := end.Sub(ws).Seconds()
	out := make([]Side, len(ops))
	for i, o := range ops {
		var h hist
		var n int64
		for _, wk := range states[i].workers {
			h.merge(&wk.h)
			n += wk.count
		}
		s := Side{
			Name: o.name, Unit: o.unit, Count: n, Seconds: secs,
			P50Ms: ms(h.quantile(0.50)), P90Ms: ms(h.quantile(0.90)), P99Ms: ms(h.quantile(0.99)), P999Ms: ms(h.quantile(0.999)),
			MeanMs: ms(h.mean()), MaxMs: ms(h.max), Errors: states[i].errors.Load(),
		}
		if secs > 0 {
			s.Rate = float64(n) / secs
			s.ClientCPU = 100 * (c1.CPU - c0.CPU).Seconds() / secs
			if haveServer {
				s.ServerCPU = 100 * (s1.CPU - s0.CPU).Seconds() / secs
			}
			if haveDB {
				s.DBCPU = 100 * d1.since(d0).Seconds() / secs
			}
		}
		if haveServer {
			s.ServerRSSBytes = s1.RSS
		}
		if p := states[i].firstErr.Load(); p != nil {
			s.FirstError = *p
		}
		out[i] = s
	}
	return out
}

// sleepUntil waits until t; it reports true if early closed first.
func sleepUntil(ctx context.Context, t time.Time, early <-chan struct{}) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	case <-early:
		return true
	}
	return false
}
