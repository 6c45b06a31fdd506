package loadtest

import (
	"math/bits"
	"time"
)

// hist is a latency histogram with a relative error under 1.6% (HDR-like:
// 64 linear sub-buckets per power of two) and a fixed size, so a run of any
// length records every request in bounded memory. One per worker; merge
// them at the end. Not safe for concurrent use.
type hist struct {
	counts [histBuckets]uint64
	n      uint64
	sum    time.Duration
	max    time.Duration
}

const (
	histSubBits = 7 // values under 1<<histSubBits ns are exact
	histHalf    = 1 << (histSubBits - 1)
	// histBuckets covers up to 2^(64-1) ns.
	histBuckets = (1 << histSubBits) + (64-histSubBits)*histHalf
)

func histIndex(v int64) int {
	if v < 0 {
		v = 0
	}
	u := uint64(v)
	if u < 1<<histSubBits {
		return int(u)
	}
	shift := bits.Len64(u) - histSubBits // >= 1
	mant := u >> uint(shift)             // in [64, 127]
	return (1 << histSubBits) + (shift-1)*histHalf + int(mant-histHalf)
}

// histValue is the middle of bucket i, in nanoseconds.
func histValue(i int) int64 {
	if i < 1<<histSubBits {
		return int64(i)
	}
	i -= 1 << histSubBits
	shift := i/histHalf + 1
	mant := uint64(i%histHalf + histHalf)
	lo := mant << uint(shift)
	return int64(lo + (uint64(1)<<uint(shift))/2)
}

func (h *hist) record(d time.Duration) {
	h.counts[histIndex(int64(d))]++
	h.n++
	h.sum += d
	if d > h.max {
		h.max = d
	}
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	if o.max > h.max {
		h.max = o.max
	}
}

// quantile returns the q-quantile (0 < q <= 1), or 0 for an empty
// histogram.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	if rank < 1 {
		rank = 1
	}
	if rank > h.n {
		rank = h.n
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := time.Duration(histValue(i))
			if v > h.max {
				v = h.max
			}
			return v
		}
	}
	return h.max
}

func (h *hist) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
