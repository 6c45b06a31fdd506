//go:build race

package gateway

// raceEnabled reports a build with the race detector, whose
// instrumentation changes stack and heap sizes.
const raceEnabled = true
