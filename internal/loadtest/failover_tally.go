package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// answerTally counts the answers to the failover's purchase tries by kind
// (201, HTTP status and errorCode of a problem, time-out, refused), with
// the mean time each kind took, so that a slow failover says what its
// ECRs were told meanwhile.
type answerTally struct {
	mu    sync.Mutex
	kinds map[string]*answerKind
}

type answerKind struct {
	n   int
	sum time.Duration
}

func newAnswerTally() *answerTally { return &answerTally{kinds: map[string]*answerKind{}} }

func (a *answerTally) add(err error, took time.Duration) {
	kind := "201"
	var ne net.Error
	var se *statusError
	switch {
	case err == nil:
	case errors.As(err, &ne) && ne.Timeout():
		kind = "time-out"
	case strings.Contains(err.Error(), "connection refused"):
		kind = "refused"
	case errors.As(err, &se):
		kind = strconv.Itoa(se.status)
		var p struct {
			ErrorCode string `json:"errorCode"`
		}
		if json.Unmarshal(se.body, &p) == nil && p.ErrorCode != "" {
			kind += " " + p.ErrorCode
		}
	default:
		kind = "other"
	}
	a.mu.Lock()
	k := a.kinds[kind]
	if k == nil {
		k = &answerKind{}
		a.kinds[kind] = k
	}
	k.n++
	k.sum += took
	a.mu.Unlock()
}

// String is the tally, most frequent first: "tries: 201 x3334 (mean
// 120ms), 409 WP24 x812 (mean 9ms), ...".
func (a *answerTally) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	names := make([]string, 0, len(a.kinds))
	for k := range a.kinds {
		names = append(names, k)
	}
	slices.SortFunc(names, func(x, y string) int { return a.kinds[y].n - a.kinds[x].n })
	parts := make([]string, len(names))
	for i, k := range names {
		v := a.kinds[k]
		parts[i] = fmt.Sprintf("%s x%d (mean %s)", k, v.n, (v.sum / time.Duration(v.n)).Round(time.Millisecond))
	}
	return "tries: " + strings.Join(parts, ", ")
}

// watchReconnects samples the victims' virtual terminals every 20 ms from
// the kill until each has been seen offline and then online and linked
// again (or failoverBound passed), and returns a function, called once the
// purchases are done, that stops it and says the reconnect times.
func (e *env) watchReconnects(ctx context.Context, victims []int, killed time.Time) func() string {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var h hist
	unseen := 0
	go func() {
		defer close(done)
		wasOff := make([]bool, len(victims))
		back := make([]bool, len(victims))
		left := len(victims)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for left > 0 && time.Since(killed) < failoverBound {
			for j, i := range victims {
				if back[j] {
					continue
				}
				st := e.fleet[i].State()
				switch {
				case !st.Online:
					wasOff[j] = true
				case wasOff[j] && st.TerminalID != "":
					back[j] = true
					left--
					h.record(time.Since(killed))
				}
			}
			select {
			case <-ctx.Done():
				unseen = left
				return
			case <-tick.C:
			}
		}
		unseen = left
	}()
	return func() string {
		cancel()
		<-done
		return fmt.Sprintf("victims online and linked again on another node: %d, kill to reconnected p50 %s, p99 %s, max %s; not seen back (or back within one 20 ms sample): %d",
			h.n, h.quantile(0.5).Round(time.Millisecond), h.quantile(0.99).Round(time.Millisecond), h.max.Round(time.Millisecond), unseen)
	}
}
