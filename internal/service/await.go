package service

import (
	"context"
	"time"
)

// awaitEnded waits up to until for the record id (a print job, a close)
// to end, for a request that answers with it: woken by each change of it
// (this node's, or another node's wake-up), it reads it with read, which
// says whether it ended. At until it ends it with expire (its time-out)
// and reads it once more; if the caller went away it reads it once more
// too (the record still ends, by answer or time-out). ch is the watch of
// id taken before the record was stored; *release, the caller's to call
// when it returns, follows each new watch.
func awaitEnded[T any](ctx context.Context, s *Service, id string, until time.Time, ch <-chan struct{}, release *func(),
	read func(context.Context) (T, bool, error), expire func(context.Context)) (T, error) {
	timeout, stop := After(s.clock(), until.Sub(s.Now()))
	defer stop()
	bg := context.WithoutCancel(ctx)
	for {
		select {
		case <-ch:
			(*release)()
			ch, *release = s.changes.watch(id)
			v, ended, err := read(bg)
			if err != nil || ended {
				return v, err
			}
			continue
		case <-timeout:
			expire(bg)
		case <-ctx.Done():
		}
		v, _, err := read(bg)
		return v, err
	}
}
