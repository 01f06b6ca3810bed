package dispatch

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/maintenance"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/startstop"
)

// A stopper tells one thing Start started to end, without blocking, and
// returns a channel that is closed once it has ended: the shape of the
// parts that are not startstop.Services yet (the results consumer, the
// rechecks), which started adapts.
type stopper func() <-chan struct{}

// Start starts what the dispatcher runs besides its callers' requests, in
// the order services lists them: the watch of the sessions bucket that
// keeps admission's session view current (internal/sessionview), the results consumer, the reaper, the
// retry mover, the dead-letter retry service (internal/maintenance), the
// service of the workers' registry announcements (internal/registry), the
// after-hook service (internal/hooks), the queue of admission records, the
// load view, the rechecks of waiters, the orphan sweeper
// (internal/maintenance), the listing of the pool consumers that
// admission checks calls against (internal/poolview), the approval flow
// (internal/approvalflow), limits, and, with an archive store, the
// archiver (internal/archive) and the reading of its lag (archivelag.go),
// which admission refuses on.
// (Pool consumers are created by workers before they register their tools,
// and admission refuses a call no pool consumer filters, so no call is
// admitted before a consumer for it exists.)
// When Start fails it stops what it had started, as Stop does (within
// ctx), and the dispatcher is stopped.
func (d *Dispatcher) Start(ctx context.Context) error {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return ErrStopped // a stopped dispatcher does not start again
	}
	if d.group == nil {
		d.group = startstop.NewGroup(d.services()...)
	}
	g := d.group
	d.mu.Unlock()
	err := g.Start(ctx)
	if errors.Is(err, startstop.ErrStopped) {
		return ErrStopped // Stop came first
	}
	if err == nil {
		err = flush(ctx, d.bus.NC)
	}
	if err != nil {
		return errors.Join(err, d.Stop(ctx))
	}
	return nil
}

// services lists what Start starts, in order; Stop stops them in reverse
// (startstop.Group). One line per service.
func (d *Dispatcher) services() []startstop.Named {
	m := maintenance.Config{Bus: d.bus, Name: d.cfg.Name, Logger: d.log, RetryCheck: d.CheckRetry}
	recheck := d.recheck
	return []startstop.Named{
		{Name: "signing key", Service: started(d.enrolKey)},
		{Name: "session view", Service: d.sessions},
		{Name: "republisher of unconfirmed calls", Service: d.unconfirmed},
		{Name: "results consumer", Service: started(func(ctx context.Context) (stopper, error) { return d.startResults(ctx, recheck) })},
		{Name: "reaper", Service: maintenance.NewReaper(m)},
		{Name: "retry mover", Service: maintenance.NewMover(m)},
		{Name: "dead-letter retries", Service: maintenance.NewDLQRetries(m)},
		{Name: "push consumers sweeper", Service: maintenance.NewPushConsumers(m)},
		{Name: "registry announcements", Service: registry.NewService(d.bus, d.log, d.cfg.WorkerKeys, d.cfg.Name)},
		{Name: "after-hook service", Service: d.hooks},
		{Name: "admission records", Service: d.delayedRecords},
		{Name: "load view", Service: d.load},
		{Name: "capacity sampler", Service: d.capacity},
		{Name: "rechecks of waiters", Service: started(func(ctx context.Context) (stopper, error) { return d.startRechecks(ctx, recheck), nil })},
		{Name: "orphan sweeper", Service: maintenance.NewSweeper(maintenance.SweeperConfig{Config: m, Every: d.cfg.OrphanSweep, Grace: d.cfg.OrphanGrace})},
		{Name: "overdue sweeper", Service: maintenance.NewOverdueSweeper(maintenance.OverdueConfig{Config: m, OverdueSettings: d.cfg.Overdue})},
		{Name: "pool listing", Service: d.pools},
		// The approval flow: the grants in force (loaded before Start
		// returns, so admission decides with them), the tracker of the
		// records the sweep acts on, and the sweep (internal/approvalflow).
		{Name: "approval flow", Service: d.approvals},
		{Name: "limits", Service: d.limitGate},
		{Name: "archiver", Service: d.archiver()},
		{Name: "archive lag", Service: d.archiveLagService()},
	}
}

// archiver is the archiving service (internal/archive) when the
// dispatcher has an archive store; a service that does nothing without.
func (d *Dispatcher) archiver() startstop.Service {
	if d.cfg.Archive == nil {
		return &startstop.Funcs{}
	}
	return archive.New(archive.Config{Bus: d.bus, Store: d.cfg.Archive, Name: d.cfg.Name, Segment: d.cfg.ArchiveSegment,
		Settle: d.cfg.ArchiveSettle, Every: d.cfg.ArchiveEvery, Logger: d.log})
}

// archiveLagService reads how far behind the archive is (archivelag.go)
// when the dispatcher has an archive store; a service that does nothing
// without.
func (d *Dispatcher) archiveLagService() startstop.Service {
	if d.lag == nil {
		return &startstop.Funcs{}
	}
	return d.lag.service()
}

// started adapts a part that starts with a function returning its
// stopper to a Service.
func started(start func(ctx context.Context) (stopper, error)) startstop.Service {
	f := &startstop.Funcs{}
	f.StartFunc = func(ctx context.Context) error {
		stop, err := start(ctx)
		if err != nil {
			return err
		}
		f.StopFunc = stop // under f's lock, which Stop reads it under
		return nil
	}
	return f
}

// startResults follows this replica's stored results (results.go),
// signalling the consumer's failures on recheck.
func (d *Dispatcher) startResults(ctx context.Context, recheck chan<- struct{}) (stopper, error) {
	cons, results, err := d.followResults(ctx, recheck)
	if err != nil {
		return nil, err
	}
	return func() <-chan struct{} {
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
	}, nil
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

// Stop stops accepting calls, releases every waiting caller (each gets
// ErrStopped and can fetch the result later by call id from any
// replica), and stops everything Start started, newest first, each in
// turn (the reverse of services): it waits until each has ended (the last
// callback of each consumer returned, the results consumer deleted on the
// server). When ctx ends first it returns ctx's error; what was told to
// end still ends, and a later Stop waits for it again. Stop is idempotent
// and safe for concurrent use, also before Start and after a failed
// Start. Watches are not Stop's: each ends with its request's context.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.mu.Lock()
	if !d.stopped {
		d.stopped = true
		for id, w := range d.waiters {
			close(w.ch)
			delete(d.waiters, id)
		}
	}
	g := d.group
	d.mu.Unlock()
	if g == nil {
		return nil // never started
	}
	return g.Stop(ctx)
}

// enrolKey records the dispatcher's signing key in the registry
// (internal/signing): what it signs is believed from then on.
func (d *Dispatcher) enrolKey(ctx context.Context) (stopper, error) {
	pub := d.bus.Signer.Public()
	if err := registry.EnrolDispatcher(ctx, d.bus.Registry, pub, d.cfg.Name); err != nil {
		return nil, err
	}
	d.bus.Keys.Learn(signing.DispatcherKey(pub))
	d.log.Info("signing key enrolled", "key", pub)
	return func() <-chan struct{} {
		done := make(chan struct{})
		close(done)
		return done
	}, nil
}
