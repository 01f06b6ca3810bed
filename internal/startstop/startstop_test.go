package startstop_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/startstop"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

// recorder notes the order services start and stop in.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

func (r *recorder) service(name string, startErr error) startstop.Named {
	return startstop.Named{Name: name, Service: &startstop.Funcs{
		StartFunc: func(context.Context) error {
			if startErr != nil {
				return startErr
			}
			r.add("start " + name)
			return nil
		},
		StopFunc: func() <-chan struct{} {
			r.add("stop " + name)
			return startstop.Closed
		},
	}}
}

func TestGroupStartsInOrderAndStopsInReverse(t *testing.T) {
	t.Parallel()
	var r recorder
	g := startstop.NewGroup(r.service("a", nil), r.service("b", nil), r.service("c", nil))
	require.NoError(t, g.Start(t.Context()))
	require.NoError(t, g.Start(t.Context()), "Start is idempotent")
	require.NoError(t, g.Stop(t.Context()))
	require.NoError(t, g.Stop(t.Context()), "Stop is idempotent")
	require.Equal(t, []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}, r.events)
	require.ErrorIs(t, g.Start(t.Context()), startstop.ErrStopped)
}

func TestGroupFailedStartStopsWhatStarted(t *testing.T) {
	t.Parallel()
	var r recorder
	boom := errors.New("boom")
	g := startstop.NewGroup(r.service("a", nil), r.service("b", nil), r.service("c", boom), r.service("d", nil))
	err := g.Start(t.Context())
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "start c")
	require.Equal(t, []string{"start a", "start b", "stop b", "stop a"}, r.events)
	require.ErrorIs(t, g.Start(t.Context()), startstop.ErrStopped)
}

func TestStopBeforeStartStopsNothing(t *testing.T) {
	t.Parallel()
	var r recorder
	g := startstop.NewGroup(r.service("a", nil))
	require.NoError(t, g.Stop(t.Context()))
	require.ErrorIs(t, g.Start(t.Context()), startstop.ErrStopped)
	require.Empty(t, r.events)
}

func TestLoopRunsUntilStopped(t *testing.T) {
	t.Parallel()
	running := make(chan struct{})
	var ended bool
	l := startstop.NewLoop(func(ctx context.Context) {
		close(running)
		<-ctx.Done()
		ended = true
	})
	ctx, cancel := context.WithCancel(t.Context())
	require.NoError(t, l.Start(ctx))
	cancel() // Start's context bounds starting only
	<-running
	require.NoError(t, l.Stop(t.Context()))
	require.True(t, ended, "Stop waits for the goroutine")
	require.NoError(t, l.Stop(t.Context()))
}

func TestStopReturnsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s := &startstop.Funcs{StopFunc: func() <-chan struct{} { return release }}
	require.NoError(t, s.Start(t.Context()))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, s.Stop(ctx), context.Canceled)
	close(release)
	require.NoError(t, s.Stop(t.Context()), "a later Stop waits again")
}

func TestTogetherStopsAllAtOnce(t *testing.T) {
	t.Parallel()
	// Each stop waits for the other to have begun: a sequential stop
	// would never return.
	aStopping, bStopping := make(chan struct{}), make(chan struct{})
	overlap := func(mine, other chan struct{}) startstop.Service {
		return &startstop.Funcs{StopFunc: func() <-chan struct{} {
			close(mine)
			done := make(chan struct{})
			go func() {
				defer close(done)
				<-other
			}()
			return done
		}}
	}
	s := startstop.Together(
		startstop.Named{Name: "a", Service: overlap(aStopping, bStopping)},
		startstop.Named{Name: "b", Service: overlap(bStopping, aStopping)})
	require.NoError(t, s.Start(t.Context()))
	require.NoError(t, s.Stop(t.Context()))
	require.ErrorIs(t, s.Start(t.Context()), startstop.ErrStopped)
}

func TestOwnBudgetIsNotCutShortByTheCallersContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	stopped := make(chan struct{})
	s := startstop.OwnBudget(&startstop.Funcs{StopFunc: func() <-chan struct{} {
		go func() {
			<-release
			close(stopped)
		}()
		return stopped
	}}, time.Hour)
	require.NoError(t, s.Start(t.Context()))
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // a hurried stop
	errc := make(chan error, 1)
	go func() { errc <- s.Stop(ctx) }()
	select {
	case err := <-errc:
		t.Fatalf("Stop returned (%v) before the service stopped", err)
	default:
	}
	close(release)
	require.NoError(t, <-errc)
}

func TestStopDuringStartDoesNotWaitForIt(t *testing.T) {
	t.Parallel()
	var r recorder
	starting, release := make(chan struct{}), make(chan struct{})
	slow := startstop.Named{Name: "slow", Service: &startstop.Funcs{
		StartFunc: func(context.Context) error {
			close(starting)
			<-release
			r.add("start slow")
			return nil
		},
		StopFunc: func() <-chan struct{} {
			r.add("stop slow")
			return startstop.Closed
		},
	}}
	g := startstop.NewGroup(r.service("a", nil), slow, r.service("c", nil))
	started := make(chan error, 1)
	go func() { started <- g.Start(t.Context()) }()
	<-starting
	stopped := make(chan error, 1)
	go func() { stopped <- g.Stop(t.Context()) }()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(time.Minute): // generous: Stop waits for nothing here
		close(release)
		t.Fatal("Stop waited for the service that was starting")
	}
	close(release)
	require.ErrorIs(t, <-started, startstop.ErrStopped)
	require.Equal(t, []string{"start a", "stop a", "start slow", "stop slow"}, r.events,
		"what started before Stop is stopped by it; what was starting, by Start once it returned; nothing after it starts")
}

func TestEveryRunsUntilStopped(t *testing.T) {
	t.Parallel()
	ran := make(chan struct{}, 1)
	l := startstop.Every(time.Millisecond, func(context.Context) {
		select {
		case ran <- struct{}{}:
		default:
		}
	})
	require.NoError(t, l.Start(t.Context()))
	<-ran
	<-ran // it goes on
	require.NoError(t, l.Stop(t.Context()))
}
