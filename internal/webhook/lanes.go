package webhook

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/instore-dev/instore"
)

// Sending a run: one delivery after another, or in lanes per terminal
// (an endpoint's Concurrency above 1).

// sendRun sends a run of an endpoint's deliveries and records them in one
// transaction. With the endpoint's Concurrency at 1 they go one after the
// other, in order (its connection kept alive between them); above 1, in
// lanes (lanes): the deliveries of one terminal one after the other, in
// order, up to Concurrency lanes at once. The run stops starting attempts
// at a delivery to be retried later (the next wait for it: the endpoint's
// head) or, after its first attempt, when an attempt begun now could
// outlast the lease (leaseUntil less leaseMargin); attempts in flight
// then finish, and the deliveries not attempted are given back. A
// delivery given up lets the next of its lane go, as it does alone.
// Recording the run once sends nothing twice unless the node dies before
// (the lease ends and another node sends the run again: at least once).
func (d *Dispatcher) sendRun(ctx context.Context, run []*instore.DueDelivery, leaseUntil time.Time) {
	recs := make([]instore.AttemptRecord, len(run))
	for i, dd := range run {
		recs[i].Delivery = dd
	}
	var mu sync.Mutex
	started, stop := 0, false
	// next tells whether the lane may attempt its next delivery now, and
	// counts the attempt.
	next := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if !stop && started > 0 && d.cfg.Clock.Now().Add(d.cfg.Timeout+leaseMargin).After(leaseUntil) {
			stop = true
		}
		if !stop {
			started++
		}
		return !stop
	}
	// try attempts delivery i and tells whether its lane goes on.
	try := func(i int) bool {
		o := d.attempt(ctx, run[i])
		recs[i].Outcome = &o
		if o.Succeeded || o.GiveUp {
			return true
		}
		mu.Lock()
		stop = true
		mu.Unlock()
		return false
	}
	inFlight := run[0].Webhook.InFlight()
	rest := run
	if inFlight > 1 && run[0].Attempts > 0 {
		// The head failed before: it is sent alone first, and the lanes
		// open only if it succeeds, so a failing endpoint is sent one
		// request per retry, not one per lane.
		if !next() || !try(0) {
			rest = nil
		} else {
			rest = run[1:]
		}
	}
	ls := lanes(rest, inFlight)
	for _, l := range ls {
		for j := range l {
			l[j] += len(run) - len(rest) // indexes of run
		}
	}
	if d.cfg.Synchronous {
		// One attempt at a time, the lanes in flight taken in turns, a
		// turn being what a concurrent run would have in flight at once: a
		// failure ends the run after its turn. The order a concurrent run
		// may take, made deterministic for the simulation.
		active := [][]int{}
		for len(ls) > 0 || len(active) > 0 {
			for len(active) < inFlight && len(ls) > 0 {
				active, ls = append(active, ls[0]), ls[1:]
			}
			// The turn starts its attempts before any ends.
			var turn, kept [][]int
			for _, l := range active {
				if !next() {
					break
				}
				turn = append(turn, l)
			}
			for _, l := range turn {
				if try(l[0]) && len(l) > 1 {
					kept = append(kept, l[1:])
				}
			}
			active = kept
			mu.Lock()
			if stop {
				ls, active = nil, nil
			}
			mu.Unlock()
		}
	} else {
		slots := make(chan struct{}, inFlight)
		var lanesDone sync.WaitGroup
		for _, l := range ls {
			slots <- struct{}{}
			lanesDone.Go(func() {
				defer func() { <-slots }()
				for _, i := range l {
					if !next() || !try(i) {
						return
					}
				}
			})
		}
		lanesDone.Wait()
	}
	alignRetries(recs)
	// The record takes them in the order the attempts began (the
	// endpoint's failing time follows the attempts), the unsent last: with
	// lanes, a run's order is not time's.
	slices.SortStableFunc(recs, func(a, b instore.AttemptRecord) int {
		switch {
		case a.Outcome == nil && b.Outcome == nil:
			return 0
		case a.Outcome == nil:
			return 1
		case b.Outcome == nil:
			return -1
		}
		return a.Outcome.Attempt.At.Compare(b.Outcome.Attempt.At)
	})
	if err := d.cfg.Store.RecordAttempts(ctx, recs); err != nil {
		// The lease runs out and the deliveries are sent again: at least once.
		d.cfg.Logger.Warn("webhook: record attempts", "webhookId", run[0].Webhook.ID, "error", err)
	}
}

// alignRetries gives the deliveries of a run to be retried the earliest
// of their retry times: with several in flight, a failure may leave
// several deliveries to be retried, each with its own time (its attempts,
// its jitter); the endpoint's next run starts at its head when that is
// due and sends it alone first (sendRun), and once it succeeds the others
// are due with it, instead of each holding the endpoint's queue until its
// own time (hours apart at the schedule's later steps).
func alignRetries(recs []instore.AttemptRecord) {
	var first time.Time
	for _, r := range recs {
		if o := r.Outcome; o != nil && !o.Succeeded && !o.GiveUp && (first.IsZero() || o.NextAt.Before(first)) {
			first = o.NextAt
		}
	}
	for _, r := range recs {
		if o := r.Outcome; o != nil && !o.Succeeded && !o.GiveUp {
			o.NextAt = first
		}
	}
}

// lanes splits a run into the indexes of its lanes, each in the run's
// order, the lanes in the order of their first delivery: one lane if one
// delivery may be in flight at once (in order per endpoint), else a lane
// per instore.DeliveryOrderKey (in order per terminal).
func lanes(run []*instore.DueDelivery, inFlight int) [][]int {
	var out [][]int
	at := map[string]int{}
	for i, dd := range run {
		key := ""
		if inFlight > 1 {
			key = instore.DeliveryOrderKey(&dd.Event)
		}
		n, ok := at[key]
		if !ok {
			n = len(out)
			at[key] = n
			out = append(out, nil)
		}
		out[n] = append(out[n], i)
	}
	return out
}
