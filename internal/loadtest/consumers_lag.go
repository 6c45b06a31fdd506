package loadtest

import (
	"encoding/json"
	"sync"
	"time"
)

// Classes of the receiver's endpoints, whose lags are measured apart.
const (
	lagAll   = iota // every event type
	lagTyped        // the types of --webhook-types
	lagClasses
)

// lags measures how far the webhook deliveries are behind their events,
// per class of endpoints: a delivery's lag runs from its event's createdAt
// (the time of the change, written in the database transaction that
// commits it) to the receiver's 2xx answer, recorded while measuring (the
// windows with consumers); and how far each endpoint is behind when a
// window ends (the window's end less the createdAt of the last event it
// was delivered), which counts what it had yet to be sent.
type lags struct {
	mu        sync.Mutex
	class     []int
	closed    []bool
	lastEvent []time.Time // per endpoint: the createdAt of the last event delivered
	on        bool
	hist      [lagClasses]hist
	count     [lagClasses]int64
	endpoints [lagClasses]int
	behind    [lagClasses]time.Duration // the most an endpoint was behind at a window's end
}

func (l *lags) add(class int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.class = append(l.class, class)
	l.closed = append(l.closed, false)
	l.lastEvent = append(l.lastEvent, time.Time{})
}

// delivered records a delivery of body (an event) to endpoint i answered
// at now; false if the endpoint was closed (not counted).
func (l *lags) delivered(i int, body []byte, now time.Time) bool {
	var ev struct {
		CreatedAt time.Time `json:"createdAt"`
	}
	_ = json.Unmarshal(body, &ev) // verified already; a body without it is not measured
	l.mu.Lock()
	defer l.mu.Unlock()
	if i >= len(l.class) {
		return true
	}
	if l.closed[i] {
		return false
	}
	if !ev.CreatedAt.IsZero() {
		l.lastEvent[i] = ev.CreatedAt
		if l.on {
			c := l.class[i]
			l.hist[c].record(now.Sub(ev.CreatedAt))
			l.count[c]++
		}
	}
	return true
}

// start measures from now (a window with consumers opens).
func (l *lags) start() {
	l.mu.Lock()
	l.on = true
	l.mu.Unlock()
}

// stop ends a window that began at since for endpoints ks at now: each
// one's distance behind is taken, and it is closed (what still arrives for
// it is not counted).
func (l *lags) stop(ks []int, since, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on = false
	for _, k := range ks {
		last := l.lastEvent[k]
		if last.IsZero() || last.Before(since) {
			last = since
		}
		c := l.class[k]
		l.behind[c] = max(l.behind[c], now.Sub(last))
		l.closed[k] = true
		l.endpoints[c] = max(l.endpoints[c], countClass(l.class[k], ks, l.class))
	}
}

// countClass is how many of the endpoints ks are of class c.
func countClass(c int, ks []int, class []int) int {
	n := 0
	for _, k := range ks {
		if class[k] == c {
			n++
		}
	}
	return n
}

// lagFigures are the lags of one class of endpoints.
type lagFigures struct {
	// Types is what the class's endpoints subscribe to ("" every event).
	Types      string  `json:"types"`
	Endpoints  int     `json:"endpoints"`
	Deliveries int64   `json:"deliveries"`
	Rate       float64 `json:"deliveryRate"` // per second of the windows with consumers
	P50Ms      float64 `json:"lagP50Ms"`
	P99Ms      float64 `json:"lagP99Ms"`
	MaxMs      float64 `json:"lagMaxMs"`
	// BehindMaxMs is the most an endpoint of the class was behind at the
	// end of a window (what it had yet to be sent counts).
	BehindMaxMs float64 `json:"behindMaxMs"`
}

// figures returns the lags of each class that had endpoints, over on
// seconds of measuring.
func (l *lags) figures(types string, on time.Duration) []lagFigures {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []lagFigures
	for c := range lagClasses {
		if l.endpoints[c] == 0 {
			continue
		}
		f := lagFigures{Endpoints: l.endpoints[c], Deliveries: l.count[c], P50Ms: ms(l.hist[c].quantile(0.5)),
			P99Ms: ms(l.hist[c].quantile(0.99)), MaxMs: ms(l.hist[c].max), BehindMaxMs: ms(l.behind[c])}
		if c == lagTyped {
			f.Types = types
		}
		if on > 0 {
			f.Rate = float64(f.Deliveries) / on.Seconds()
		}
		out = append(out, f)
	}
	return out
}
