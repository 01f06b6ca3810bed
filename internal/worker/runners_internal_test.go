package worker

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Runners run every function, reuse idle goroutines instead of starting
// one per function, keep at most maxIdle idle, and end when stopped. Not
// parallel: it counts the process's goroutines.
func TestRunners(t *testing.T) {
	r := newRunners(4)
	before := runtime.NumGoroutine()
	done := make(chan struct{})
	for range 1000 { // one at a time: a few runners serve them all
		r.Go(func() { done <- struct{}{} })
		<-done
	}
	var wg sync.WaitGroup
	for range 64 { // at once: as many runners as needed
		wg.Add(1)
		r.Go(wg.Done)
	}
	wg.Wait()
	// goroutines polls (with a deadline) until at most want goroutines
	// more than before remain.
	goroutines := func(want int) int {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine() - before
			if n <= want || time.Now().After(deadline) {
				return n
			}
			time.Sleep(time.Millisecond) // polling with a deadline
		}
	}
	require.LessOrEqual(t, goroutines(4), 4, "at most maxIdle runners stay")
	require.LessOrEqual(t, len(r.idle), 4)
	r.Stop()
	r.Stop() // idempotent
	require.LessOrEqual(t, goroutines(0), 0, "every runner ends")
}
