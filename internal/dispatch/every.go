package dispatch

import (
	"context"
	"time"
)

// every runs fn every interval on a goroutine of its own until the
// returned stopper ends it (fn's context is cancelled then).
func every(interval time.Duration, fn func(context.Context)) stopper {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			fn(ctx)
		}
	}()
	return func() <-chan struct{} {
		cancel()
		return done
	}
}
