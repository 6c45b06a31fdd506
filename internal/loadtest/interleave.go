package loadtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// interleaveRamp bounds the lead-in of every window of a side after its
// first (which follows the whole warm-up): its clients' connections are
// open and the server is warm, the ramp only refills the pipeline after
// the side was idle.
const interleaveRamp = 100 * time.Millisecond

// interleave measures two sides, a baseline (side 0) and ours (side 1),
// each an op against a server (or a store) of its own, in alternating
// windows, so that a change in the machine's load (other work, stolen
// time) falls on both alike instead of on whichever ran second. Both
// servers run throughout; only one side's clients are active at a time
// (the other's are parked, their connections open), and a side's window
// starts only once the other side's last requests have completed, so the
// servers never take load at the same time.
//
// The schedule (plan) is rounds rounds of one window per side, of
// duration/rounds each, in the order A B, B A, A B, ... so neither side
// always goes first and a load that drifts linearly in time falls on both
// alike over each pair of rounds. Each side's first window follows its
// warm-up, each later one a short ramp (neither counted). A request counts,
// with its whole latency, when it completes inside one of its side's
// windows; every failure counts as an error, lead-ins included.
type interleave struct {
	warmup   time.Duration // lead-in of each side's first window
	ramp     time.Duration // lead-in of each later window
	duration time.Duration // measured time of each side, over its windows
	rounds   int
	// max, when > 0, bounds each side's requests (those of its parts
	// included): each window ends early once it completed its share
	// (max/rounds, at least 1).
	max   int64
	sides [2]ilSide
	// logf receives a line per round (nil: none).
	logf func(format string, args ...any)
	// logPer, when > 0, divides side 0's rate in the ratio of the round
	// lines: how many of its units make one of side 1's (the purchase:
	// commits per life, as far as known during the run), which logPerName
	// names; 0: the rates compare as they are.
	logPer     float64
	logPerName string
}

// ilSide is one side of an interleaved measurement.
type ilSide struct {
	op op
	// parts run beside op in the side's windows and are parked with it,
	// each with figures of its own (mixed: metadata and status reads
	// beside the purchases); the rates per round and the ratios are op's.
	parts []op
	// stats reads the side's server process (nil: no server figures);
	// dbCPU the database's CPU (nil: not measured).
	stats func() (procStats, error)
	dbCPU func() (cpuSnapshot, error)
	// onStart runs, in a goroutine of its own, when the side's first
	// window starts, with the nominal time until its last window ends (a
	// CPU profile, say). The run waits for it to return.
	onStart func(ctx context.Context, d time.Duration)
	// enter, when set, runs before each of the side's windows (before its
	// lead-in), leave after it, once the side is idle: what the side has
	// that the other has not (purchase --webhooks: the consumers of
	// events, started and stopped).
	enter, leave func(ctx context.Context)
}

// ilSlot is one window of the plan: a lead-in, then the measured window.
type ilSlot struct {
	side, round  int
	lead, window time.Duration
}

// ilSpan is a window as it ran.
type ilSpan struct {
	side, round int
	start, end  time.Time
}

// ilResult is an interleaved measurement: each side's totals over its
// windows (with its rate per round), those of its parts, the ratio of side
// 1 to side 0 in each round, and the windows as they ran.
type ilResult struct {
	sides       [2]Side
	parts       [2][]Side
	roundRatios []float64
	spans       []ilSpan
}

// roundOrder is the order of the sides in round r: A B in even rounds,
// B A in odd ones.
func roundOrder(r int) [2]int {
	if r%2 == 1 {
		return [2]int{1, 0}
	}
	return [2]int{0, 1}
}

// plan is the schedule of the windows.
func (il *interleave) plan() []ilSlot {
	n := max(il.rounds, 1)
	w := il.duration / time.Duration(n)
	var out []ilSlot
	var started [2]bool
	for r := range n {
		win := w
		if r == n-1 {
			win = il.duration - w*time.Duration(n-1) // the rounding's remainder
		}
		for _, s := range roundOrder(r) {
			lead := il.ramp
			if !started[s] {
				lead, started[s] = il.warmup, true
			}
			out = append(out, ilSlot{side: s, round: r, lead: lead, window: win})
		}
	}
	return out
}

// quota is how many requests window round r of a side may complete before
// it ends early (0: no limit).
func (il *interleave) quota(r int) int64 {
	if il.max <= 0 {
		return 0
	}
	n := int64(max(il.rounds, 1))
	return max(1, il.max*int64(r+1)/n-il.max*int64(r)/n)
}

// ilWindow is a window handed to a side's workers.
type ilWindow struct {
	round     int
	ws, we    time.Time
	quota     int64
	n         atomic.Int64
	stop      chan struct{} // closed when the window has ended
	early     chan struct{} // closed once quota requests completed
	earlyOnce sync.Once
	earlyAt   atomic.Pointer[time.Time]
	wg        sync.WaitGroup // the side's workers, until they are idle again
}

type ilWorker struct {
	h      hist
	counts []int64 // by round
}

// ilState is an op's workers and errors.
type ilState struct {
	workers  []*ilWorker
	errors   atomic.Int64
	firstErr atomic.Pointer[string]
}

// ilAcc is what the scheduler sums over a side's windows.
type ilAcc struct {
	secs                  time.Duration
	roundSecs             []time.Duration
	server, client, db    time.Duration
	serverOK, dbOK, begun bool
	rss                   int64
}

// ilSnap is what a window reads of the processes at its start and end:
// the side's server, this process (the clients) and the database.
type ilSnap struct {
	server, client procStats
	db             cpuSnapshot
}

// snap reads them; a side's server or database that failed to be read
// once is not read again (its figures are left out).
func (a *ilAcc) snap(sd *ilSide) ilSnap {
	var s ilSnap
	var err error
	if a.serverOK {
		s.server, err = sd.stats()
		a.serverOK = err == nil
	}
	s.client, _ = readProc(0)
	if a.dbOK {
		s.db, err = sd.dbCPU()
		a.dbOK = err == nil
	}
	return s
}

func (il *interleave) run(ctx context.Context) ilResult {
	plan := il.plan()
	rounds := max(il.rounds, 1)
	var nominal time.Duration
	for _, p := range plan {
		nominal += p.lead + p.window
	}
	// In-flight requests get a bounded time to finish.
	ctx, cancel := context.WithDeadline(ctx, time.Now().Add(nominal+90*time.Second))
	defer cancel()

	// A side's ops: its op first, then its parts; each op's state, and
	// the side's workers' channels (of all its ops).
	var ops [2][]op
	var states [2][]*ilState
	var work [2][]chan *ilWindow
	var workers sync.WaitGroup
	for s := range il.sides {
		ops[s] = append([]op{il.sides[s].op}, il.sides[s].parts...)
		for _, o := range ops[s] {
			st := &ilState{}
			states[s] = append(states[s], st)
			for w := range o.workers {
				wk := &ilWorker{counts: make([]int64, rounds)}
				ch := make(chan *ilWindow, 1)
				st.workers = append(st.workers, wk)
				work[s] = append(work[s], ch)
				workers.Add(1)
				go func() {
					defer workers.Done()
					for win := range ch {
						il.work(ctx, o, w, wk, st, win)
						win.wg.Done()
					}
				}()
			}
		}
	}
	defer func() {
		for _, chs := range work {
			for _, ch := range chs {
				close(ch)
			}
		}
		workers.Wait()
	}()

	var acc [2]ilAcc
	for s := range acc {
		acc[s].roundSecs = make([]time.Duration, rounds)
		acc[s].serverOK = il.sides[s].stats != nil
		acc[s].dbOK = il.sides[s].dbCPU != nil
	}
	var res ilResult
	var profiling sync.WaitGroup
	defer profiling.Wait()
	for i, p := range plan {
		if ctx.Err() != nil {
			break
		}
		sd, a := &il.sides[p.side], &acc[p.side]
		if sd.enter != nil {
			sd.enter(ctx)
		}
		now := time.Now()
		win := &ilWindow{round: p.round, ws: now.Add(p.lead), quota: il.quota(p.round),
			stop: make(chan struct{}), early: make(chan struct{})}
		win.we = win.ws.Add(p.window)
		win.wg.Add(len(work[p.side]))
		for _, ch := range work[p.side] {
			ch <- win
		}
		sleepUntil(ctx, win.ws, nil)
		before := a.snap(sd)
		if !a.begun && sd.onStart != nil {
			// Until the end of the side's last window, as planned.
			var d time.Duration
			last := i
			for j := i; j < len(plan); j++ {
				if plan[j].side == p.side {
					last = j
				}
			}
			for j := i; j <= last; j++ {
				if j > i {
					d += plan[j].lead
				}
				d += plan[j].window
			}
			profiling.Add(1)
			go func() { defer profiling.Done(); sd.onStart(ctx, d) }()
		}
		a.begun = true
		end := win.we
		if sleepUntil(ctx, win.we, win.early) {
			end = *win.earlyAt.Load()
		}
		after := a.snap(sd)
		close(win.stop)
		win.wg.Wait() // the side is idle again: the other may start
		if sd.leave != nil {
			sd.leave(ctx)
		}
		if ctx.Err() != nil && end.After(time.Now()) {
			end = time.Now() // interrupted: the result is discarded anyway
		}
		d := end.Sub(win.ws)
		a.secs += d
		a.roundSecs[p.round] += d
		a.server += after.server.CPU - before.server.CPU
		a.client += after.client.CPU - before.client.CPU
		if a.dbOK {
			a.db += after.db.since(before.db)
		}
		a.rss = after.server.RSS
		res.spans = append(res.spans, ilSpan{side: p.side, round: p.round, start: win.ws, end: end})
		if il.logf != nil && i%2 == 1 {
			var rates [2]float64
			for s := range rates {
				var n int64
				for _, wk := range states[s][0].workers {
					n += wk.counts[p.round]
				}
				if secs := acc[s].roundSecs[p.round].Seconds(); secs > 0 {
					rates[s] = float64(n) / secs
				}
			}
			ratio, per := safeRatio(rates[1], rates[0]), ""
			if il.logPer > 0 {
				ratio *= il.logPer
				per = fmt.Sprintf(" (at %.2f %s)", il.logPer, il.logPerName)
			}
			il.logf("round %d/%d (%s first): %s: %s %s, %s: %s %s, ratio %.2f%s", p.round+1, rounds,
				il.sides[plan[i-1].side].op.name, il.sides[0].op.name, commas(rates[0]), il.sides[0].op.unit,
				il.sides[1].op.name, commas(rates[1]), il.sides[1].op.unit, ratio, per)
		}
	}
	profiling.Wait()

	for s := range res.sides {
		for k, o := range ops[s] {
			side := ilSideResult(o, states[s][k], &acc[s], rounds)
			if k == 0 {
				res.sides[s] = side
			} else {
				res.parts[s] = append(res.parts[s], side)
			}
		}
	}
	res.roundRatios = make([]float64, rounds)
	for r := range rounds {
		res.roundRatios[r] = safeRatio(res.sides[1].RoundRates[r], res.sides[0].RoundRates[r])
	}
	return res
}

// ilSideResult is the figures of an op of a side: its requests over the
// side's windows, with the side's server, client and database figures.
func ilSideResult(o op, st *ilState, a *ilAcc, rounds int) Side {
	var h hist
	var n int64
	perRound := make([]int64, rounds)
	for _, wk := range st.workers {
		h.merge(&wk.h)
		for r, c := range wk.counts {
			perRound[r] += c
			n += c
		}
	}
	secs := a.secs.Seconds()
	side := Side{
		Name: o.name, Unit: o.unit, Count: n, Seconds: secs,
		P50Ms: ms(h.quantile(0.50)), P90Ms: ms(h.quantile(0.90)), P99Ms: ms(h.quantile(0.99)), P999Ms: ms(h.quantile(0.999)),
		MeanMs: ms(h.mean()), MaxMs: ms(h.max), Errors: st.errors.Load(),
	}
	if secs > 0 {
		side.Rate = float64(n) / secs
		side.ClientCPU = 100 * a.client.Seconds() / secs
		if a.serverOK {
			side.ServerCPU = 100 * a.server.Seconds() / secs
		}
		if a.dbOK {
			side.DBCPU = 100 * a.db.Seconds() / secs
		}
	}
	if a.serverOK {
		side.ServerRSSBytes = a.rss
	}
	side.RoundRates = make([]float64, rounds)
	for r := range rounds {
		if rs := a.roundSecs[r].Seconds(); rs > 0 {
			side.RoundRates[r] = float64(perRound[r]) / rs
		}
	}
	if p := st.firstErr.Load(); p != nil {
		side.FirstError = *p
	}
	return side
}

// work runs worker w of an op of a side over one window (its lead-in
// included) until the window ends, then returns with no request in flight.
func (il *interleave) work(ctx context.Context, o op, w int, wk *ilWorker, st *ilState, win *ilWindow) {
	for {
		start := time.Now()
		if !start.Before(win.we) || ctx.Err() != nil {
			return
		}
		select {
		case <-win.stop:
			return
		case <-win.early:
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
		if end.Before(win.ws) || end.After(win.we) {
			continue
		}
		if e := win.earlyAt.Load(); e != nil && end.After(*e) {
			continue
		}
		wk.h.record(end.Sub(start))
		wk.counts[win.round]++
		if win.quota > 0 && win.n.Add(1) >= win.quota {
			win.earlyOnce.Do(func() {
				win.earlyAt.Store(&end)
				close(win.early)
			})
		}
	}
}

func safeRatio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// median of v (0 for none).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// formatRatios writes ratios as "0.81 0.79 ..." with their median and range.
func formatRatios(v []float64) string {
	var b strings.Builder
	for i, r := range v {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.2f", r)
	}
	fmt.Fprintf(&b, " (median %.2f, range %.2f-%.2f)", median(v), slices.Min(v), slices.Max(v))
	return b.String()
}
