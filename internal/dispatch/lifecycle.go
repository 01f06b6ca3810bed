package dispatch

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/startstop"
)

// A stopper tells one thing Start started to end, without blocking, and
// returns a channel that is closed once it has ended (its goroutines
// returned, its callbacks finished). Stop calls each once.
type stopper func() <-chan struct{}

// closedChan is the done channel of something that is not running.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Start consumes this replica's stored results and starts the reaper, the
// retry mover, the dead-letter retry service, the after-hook service
// (afterhooks.go), the orphan sweeper, the
// load view, the listing of the pool consumers that admission checks
// calls against (poolcheck.go), and the approval flow's grant index,
// record tracker and sweep (approve.go).
// (Pool consumers are created by workers before they register their tools,
// and admission refuses a call no pool consumer filters, so no call is
// admitted before a consumer for it exists.)
// When Start fails it stops what it had started, as Stop does (within
// ctx), and the dispatcher is stopped.
func (d *Dispatcher) Start(ctx context.Context) error {
	d.mu.Lock()
	stopped := d.stopped
	d.mu.Unlock()
	if stopped {
		return ErrStopped // a stopped dispatcher does not start again
	}
	err := d.start(ctx)
	if err == nil {
		err = flush(ctx, d.bus.NC)
	}
	if err != nil {
		return errors.Join(err, d.Stop(ctx))
	}
	return nil
}

// start starts every part in order, recording how to end each (d.running)
// as soon as it runs, so that Stop ends exactly what started.
func (d *Dispatcher) start(ctx context.Context) error {
	recheck := make(chan struct{}, 1) // the results consumer failed
	cons, results, err := d.followResults(ctx, recheck)
	if err != nil {
		return err
	}
	d.own(func() <-chan struct{} {
		// Stopping an ordered consumer waits for an attempt to make it
		// again (during an outage, up to about 20s): not in Stop's way.
		done := make(chan struct{})
		go func() {
			defer close(done)
			results.Stop()
			<-results.Closed()
			d.deleteResultsConsumer(cons)
		}()
		return done
	})
	reaper, err := d.startReaper(ctx)
	if err != nil {
		return err
	}
	d.own(consumeStopper(reaper))
	mover, err := d.startMover(ctx)
	if err != nil {
		return err
	}
	d.own(consumeStopper(mover))
	retries, err := d.serveDLQRetries(ctx)
	if err != nil {
		return err
	}
	d.own(subscriptionStopper(retries))
	afterHooks, err := d.serveAfterHooks(ctx)
	if err != nil {
		return err
	}
	d.own(afterHooks)
	d.delayedRecords.Start()
	d.own(func() <-chan struct{} {
		d.delayedRecords.Stop() // waits for its goroutine, which only publishes records
		return closedChan
	})
	d.load.start(ctx)
	d.own(d.load.stopRefresh)
	d.own(d.startRechecks(ctx, recheck))
	if sweeper := d.startSweeper(); sweeper != nil {
		d.own(sweeper)
	}
	d.pools.start()
	d.own(d.pools.end)
	// The approval flow: the grants in force (loaded before Start
	// returns, so admission decides with them), the tracker of the records
	// the sweep acts on, and the sweep.
	if err := d.grants.Start(ctx); err != nil {
		return err
	}
	d.own(d.grants.Stop)
	if err := d.tracker.Start(ctx); err != nil {
		return err
	}
	d.own(d.tracker.Stop)
	d.own(d.startApprovalSweep())
	if err := d.limitGate.Start(ctx); err != nil {
		return err
	}
	d.own(serviceStopper(d.limitGate))
	return nil
}

// serviceStopper ends a startstop.Service: its Stop runs on a goroutine
// of its own, and the channel is closed once it has returned.
func serviceStopper(s startstop.Service) stopper {
	return func() <-chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = s.Stop(context.Background()) // blocks until it has ended; fails only with its ctx
		}()
		return done
	}
}

// own records how to end a part Start started; a part started after Stop
// (which Start raced) is ended at once.
func (d *Dispatcher) own(s stopper) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		d.stopDone = append(d.stopDone, s())
		return
	}
	d.running = append(d.running, s)
}

// startRechecks starts the goroutine that looks up the results of waiting
// callers after a reconnect or a failure of the results consumer
// (results.go).
func (d *Dispatcher) startRechecks(ctx context.Context, failed <-chan struct{}) stopper {
	status := d.bus.NC.StatusChanged(nats.CONNECTED)
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go d.recheckOnFailures(rctx, status, failed, done)
	return func() <-chan struct{} {
		d.bus.NC.RemoveStatusListener(status)
		cancel()
		return done
	}
}

// consumeStopper ends a JetStream Consume: done once its last callback
// has returned.
func consumeStopper(cc jetstream.ConsumeContext) stopper {
	return func() <-chan struct{} {
		cc.Stop()
		return cc.Closed()
	}
}

// subscriptionStopper ends an asynchronous core subscription: done once
// its last callback has returned (its closed handler has run).
func subscriptionStopper(sub *nats.Subscription) stopper {
	done := make(chan struct{})
	sub.SetClosedHandler(func(string) { close(done) })
	return func() <-chan struct{} {
		if err := sub.Unsubscribe(); errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrBadSubscription) {
			// Closed with the connection before: its handler ran then, or
			// (closed before the handler was set) never will.
			select {
			case <-done:
			default:
				return closedChan
			}
		}
		return done
	}
}

// Stop stops accepting calls, releases every waiting caller (each gets
// ErrStopped and can fetch the result later by call id from any
// replica), tells everything Start started to end, newest first, and
// waits until all of it has: the results consumer (and its server
// consumer deleted), the reaper, the retry mover, the dead-letter retry
// service, the after-hook service (its hook calls under way), the admission record queue, the load view, the rechecks of
// waiters, the orphan sweeper, the pool listing, the grant index, the
// approval tracker and the approval sweep. When ctx ends first
// it returns ctx's error; what was told to end still ends, and a later
// Stop waits for it again. Stop is idempotent and safe for concurrent
// use, also before Start and after a failed Start. Watches are not
// Stop's: each ends with its request's context.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.mu.Lock()
	if !d.stopped {
		d.stopped = true
		for id, w := range d.waiters {
			close(w.ch)
			delete(d.waiters, id)
		}
		for i := len(d.running) - 1; i >= 0; i-- {
			d.stopDone = append(d.stopDone, d.running[i]())
		}
		d.running = nil
	}
	waits := d.stopDone
	d.mu.Unlock()
	for _, done := range waits {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
