package startstop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Service is a long-lived component. Start returns once the component
// runs (an error means it does not, and nothing of it is left running);
// Stop tells it to end and blocks until its goroutines have returned, or
// until ctx ends (then it returns ctx's error, what was told to end still
// ends, and a later Stop waits for it again). Both are idempotent and safe
// for concurrent use; Stop may come before Start, and a stopped service
// does not start again (Start returns ErrStopped).
type Service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// ErrStopped is returned by Start after Stop.
var ErrStopped = errors.New("startstop: stopped")

// Named is a Service with the name a Group reports it by.
type Named struct {
	Name string
	Service
}

// Group starts its services in the order given and stops them in reverse:
// the order is written once, where the group is built. A Group is itself a
// Service.
type Group struct {
	services []Named

	starting sync.Mutex // one Start at a time

	mu      sync.Mutex
	started int // how many of services have started
	stopped bool
}

// NewGroup returns a group of the services, started in this order.
func NewGroup(services ...Named) *Group {
	return &Group{services: services}
}

// Start starts each service in order. When one fails, Start stops those it
// had started (newest first, within ctx) and returns the failure naming the
// service; the group is then stopped. A Stop that comes while Start runs
// does not wait for it: it stops what has started, and Start stops the
// service it was starting once that returns, and returns ErrStopped.
func (g *Group) Start(ctx context.Context) error {
	g.starting.Lock()
	defer g.starting.Unlock()
	for {
		g.mu.Lock()
		if g.stopped {
			g.mu.Unlock()
			return ErrStopped
		}
		if g.started == len(g.services) {
			g.mu.Unlock()
			return nil
		}
		s := g.services[g.started]
		g.mu.Unlock()
		if err := s.Start(ctx); err != nil {
			err = fmt.Errorf("start %s: %w", s.Name, err)
			return errors.Join(err, g.Stop(ctx))
		}
		g.mu.Lock()
		if g.stopped { // Stop came while s started: s is Start's to stop
			g.mu.Unlock()
			return errors.Join(ErrStopped, s.Stop(ctx))
		}
		g.started++
		g.mu.Unlock()
	}
}

// Stop stops the started services, newest first, each within ctx, and
// returns their errors joined. A Stop before Start stops nothing; a later
// Start returns ErrStopped.
func (g *Group) Stop(ctx context.Context) error {
	g.mu.Lock()
	g.stopped = true
	started := g.services[:g.started]
	g.mu.Unlock()
	var errs []error
	for _, s := range slices.Backward(started) {
		if err := s.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", s.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Funcs adapts a start and a stop function to a Service, making both
// idempotent: start runs at most once (and not after stop), stop runs once
// Start has succeeded, and its done channel is waited for by every Stop.
// Either function may be nil.
type Funcs struct {
	StartFunc func(ctx context.Context) error
	// StopFunc tells the component to end and returns a channel closed
	// once it has ended.
	StopFunc func() <-chan struct{}

	mu      sync.Mutex
	running bool
	stopped bool
	done    <-chan struct{}
}

// Start runs StartFunc once.
func (f *Funcs) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return ErrStopped
	}
	if f.running {
		return nil
	}
	if f.StartFunc != nil {
		if err := f.StartFunc(ctx); err != nil {
			return err
		}
	}
	f.running = true
	return nil
}

// Stop runs StopFunc once (if Start succeeded) and waits for its channel.
func (f *Funcs) Stop(ctx context.Context) error {
	f.mu.Lock()
	if !f.stopped {
		f.stopped = true
		if f.running && f.StopFunc != nil {
			f.done = f.StopFunc()
		}
	}
	done := f.done
	f.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Closed is a channel that is already closed: the done channel of
// something that has nothing to wait for.
var Closed <-chan struct{} = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Loop runs one goroutine as a Service: Start runs run in a goroutine
// under a context that Stop cancels (detached from Start's context, which
// only bounds starting), and Stop waits for run to return.
type Loop struct {
	run func(ctx context.Context)
	f   Funcs
}

// NewLoop returns a Service running run until stopped.
func NewLoop(run func(ctx context.Context)) *Loop {
	l := &Loop{run: run}
	l.f.StartFunc = func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.run(ctx)
		}()
		l.f.StopFunc = func() <-chan struct{} {
			cancel()
			return done
		}
		return nil
	}
	return l
}

// Start starts the goroutine once.
func (l *Loop) Start(ctx context.Context) error { return l.f.Start(ctx) }

// Stop cancels the goroutine's context and waits for it to return.
func (l *Loop) Stop(ctx context.Context) error { return l.f.Stop(ctx) }

// Together is services that start in order, like a Group, and stop all at
// once: for parts whose stops must overlap (a server's shutdown, which
// waits for requests in flight, and the workers that finish those
// requests). Stop returns once every one has stopped (or ctx has ended),
// with their errors joined.
func Together(services ...Named) Service {
	return &together{Group: NewGroup(services...)}
}

type together struct{ *Group }

func (t *together) Stop(ctx context.Context) error {
	g := t.Group
	g.mu.Lock()
	g.stopped = true
	started := g.services[:g.started]
	g.mu.Unlock()
	errs := make([]error, len(started))
	var wg sync.WaitGroup
	for i, s := range started {
		wg.Go(func() {
			if err := s.Stop(ctx); err != nil {
				errs[i] = fmt.Errorf("stop %s: %w", s.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// OwnBudget is s stopped within a budget of its own, d from when its Stop
// is called, whatever the caller's ctx says: for a part that has nothing
// in flight to hand back, only its own goroutines to wait for, and that a
// hurried stop (a second interrupt) must not leave running.
func OwnBudget(s Service, d time.Duration) Service { return ownBudget{s, d} }

type ownBudget struct {
	Service
	d time.Duration
}

func (o ownBudget) Stop(context.Context) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.d)
	defer cancel()
	return o.Service.Stop(ctx)
}

// Every is a Loop that runs fn every interval (first after one interval)
// until stopped; fn gets the loop's context.
func Every(interval time.Duration, fn func(ctx context.Context)) *Loop {
	return NewLoop(func(ctx context.Context) {
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
	})
}
