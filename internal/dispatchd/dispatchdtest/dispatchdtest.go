package dispatchdtest

import (
	"context"
	"sync"
	"testing"

	"github.com/toolwire/toolwire/internal/dispatchd"
)

// Running is a dispatcher a test started with Start.
type Running struct {
	// Addr is the address its HTTP listener bound (host:port).
	Addr string

	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// Start runs dispatchd.Run with rc (its Ready channel is Start's own)
// until the test ends or Stop is called, and returns once it is ready. It
// fails the test when Run returns before that. rc.HTTPAddr defaults to a
// random loopback port.
func Start(t testing.TB, rc dispatchd.RunConfig) *Running {
	t.Helper()
	if rc.HTTPAddr == "" {
		rc.HTTPAddr = "127.0.0.1:0"
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	rc.Ready = ready
	r := &Running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- dispatchd.Run(ctx, rc) }()
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("dispatchd.Run: %v", err)
		}
	})
	select {
	case r.Addr = <-ready:
		return r
	case err := <-r.done:
		r.once.Do(func() { r.cancel(); r.err = err })
		t.Fatalf("dispatchd.Run stopped before it was ready: %v", err)
		return nil
	}
}

// Stop stops the dispatcher, waits until Run returns and returns its
// error; later calls return the same error.
func (r *Running) Stop() error {
	r.once.Do(func() {
		r.cancel()
		r.err = <-r.done
	})
	return r.err
}
