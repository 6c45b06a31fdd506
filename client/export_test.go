package client

import "time"

// SetStreamIdle sets how long FollowEvents lets a stream stay silent, and
// returns a function that restores it.
func SetStreamIdle(d time.Duration) func() {
	old := streamIdle
	streamIdle = d
	return func() { streamIdle = old }
}
