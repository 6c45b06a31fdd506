package simulation

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// faults are the world's misfortunes, their probabilities drawn per seed:
// a storm level from 0 (calm) to 1 picks how often nodes crash between
// store writes, answers and wake-ups are lost, messages come twice,
// sessions break, how long messages take, and how often cardholders keep
// a terminal waiting. Most seeds are fairly calm (the level is a square),
// some are storms.
type faults struct {
	rng                    *rand.Rand
	level                  float64
	nodes                  int
	pCrash, pLose, pDup    float64
	pNoAck, pSilent, pLate float64
	pHook500, pHookTimeout float64       // a webhook delivery answered 500, or not in time
	cutEvery               time.Duration // mean time between a device's session breaks (0: never)
	maxDelay               time.Duration
	calmed                 bool
	// The terminals' card networks (offline.go), drawn from a stream of
	// their own: a seed without outages runs as it did before them.
	netRng                 *rand.Rand
	netEvery               time.Duration // mean time between a terminal's outages (0: never)
	floorLimit             int64         // the highest total approved offline
	queueSize              int           // how many approvals the offline queue holds
	pFwdDecline, pFwdTwice float64       // a forwarded approval declined; its report sent twice
}

func newFaults(seed uint64) *faults {
	rng := rand.New(rand.NewChaCha8(seedBytes(seed, "faults")))
	u := rng.Float64()
	f := &faults{rng: rng, level: u * u, nodes: 1 + rng.IntN(3)}
	f.pCrash = f.level * 0.01
	f.pLose = f.level * 0.2
	f.pDup = f.level * 0.1
	f.pNoAck = 0.02 + f.level*0.05
	f.pSilent = 0.02 + f.level*0.05
	f.pLate = 0.02 + f.level*0.1
	f.pHook500 = 0.05 + f.level*0.3
	f.pHookTimeout = 0.02 + f.level*0.2
	if f.level > 0.05 {
		f.cutEvery = time.Duration(float64(30*time.Second) / f.level)
	}
	f.maxDelay = 20*time.Millisecond + time.Duration(f.level*float64(3*time.Second))
	f.netRng = rand.New(rand.NewChaCha8(seedBytes(seed, "cardnet")))
	if f.netRng.IntN(10) < 7 {
		f.netEvery = time.Duration(3+f.netRng.IntN(20)) * time.Second
	}
	f.floorLimit = int64(3000 + f.netRng.IntN(7001))
	f.queueSize = 1 + f.netRng.IntN(4)
	f.pFwdDecline = 0.1 + 0.4*f.netRng.Float64()
	f.pFwdTwice = 0.05 + 0.25*f.netRng.Float64()
	return f
}

func (f *faults) String() string {
	return fmt.Sprintf("level=%.3f crash=%.4f lose=%.3f dup=%.3f noack=%.3f silent=%.3f late=%.3f hook500=%.3f hooktimeout=%.3f cut=%v delay<%v"+
		" outage=%v floor=%d queue=%d fwddecline=%.2f fwdtwice=%.2f",
		f.level, f.pCrash, f.pLose, f.pDup, f.pNoAck, f.pSilent, f.pLate, f.pHook500, f.pHookTimeout, f.cutEvery, f.maxDelay,
		f.netEvery, f.floorLimit, f.queueSize, f.pFwdDecline, f.pFwdTwice)
}

func (f *faults) chance(p float64) bool { return !f.calmed && f.rng.Float64() < p }

func (f *faults) crashBeforeWrite() bool { return f.chance(f.pCrash / 2) }
func (f *faults) crashAfterWrite() bool  { return f.chance(f.pCrash / 2) }

// lose: an answer to an ECR, or a wake-up of another node, is lost.
func (f *faults) lose() bool { return f.chance(f.pLose) }

// duplicate: a message arrives twice.
func (f *faults) duplicate() bool { return f.chance(f.pDup) }

// hookAnswer is how the webhook receiver answers a delivery: a 2xx, a
// 500, or no answer in time (timedOut); always a 2xx once calm.
func (f *faults) hookAnswer() (code int, timedOut bool) {
	switch x := f.rng.Float64(); {
	case f.calmed:
	case x < f.pHook500:
		return 500, false
	case x < f.pHook500+f.pHookTimeout:
		return 0, true
	}
	return []int{200, 202, 204}[f.rng.IntN(3)], false
}

// delay is how long a message takes.
func (f *faults) delay() time.Duration {
	return time.Millisecond + time.Duration(f.rng.Int64N(int64(f.maxDelay)))
}

// downtime is how long a crashed node stays down.
func (f *faults) downtime() time.Duration {
	return time.Second + time.Duration(f.rng.Int64N(int64(maxDowntime-time.Second)))
}

// reconnect is how long a device takes to connect again.
func (f *faults) reconnect() time.Duration {
	return 500*time.Millisecond + time.Duration(f.rng.Int64N(int64(5*time.Second)))
}

// nextCut is when the session just opened breaks, if it does.
func (f *faults) nextCut() (time.Duration, bool) {
	if f.calmed || f.cutEvery == 0 {
		return 0, false
	}
	return time.Duration(f.rng.ExpFloat64() * float64(f.cutEvery)), true
}

// nextOutage is when a terminal's card network goes down next, if it does.
func (f *faults) nextOutage() (time.Duration, bool) {
	if f.calmed || f.netEvery == 0 {
		return 0, false
	}
	return time.Duration(f.netRng.ExpFloat64() * float64(f.netEvery)), true
}

// outage is how long a card network stays down.
func (f *faults) outage() time.Duration {
	return time.Duration(20+f.netRng.IntN(40)) * time.Second
}

// calm stops the faults.
func (f *faults) calm() { f.calmed = true }
