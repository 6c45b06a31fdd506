package service

import "github.com/instore-dev/instore"

// RunningForTest exposes running to the external tests.
type RunningForTest struct{ r running }

func NewRunningForTest() *RunningForTest                      { return &RunningForTest{} }
func (x *RunningForTest) Put(t *instore.Transaction)          { x.r.put(t) }
func (x *RunningForTest) Get(ref string) *instore.Transaction { return x.r.get(ref) }

// SetFeedSize sets the size of the event feed's window (tests); it returns
// a function restoring it.
func SetFeedSize(n int) func() {
	old := feedSize
	feedSize = n
	return func() { feedSize = old }
}

// QueuedAuthentications is how many device reads of authentications wait
// for the batch being read.
func (s *Service) QueuedAuthentications() int { return s.devices.Queued() }

// QueuedHellos is how many hellos wait for the batch being run.
func (s *Service) QueuedHellos() int { return s.hellos.Queued() }
