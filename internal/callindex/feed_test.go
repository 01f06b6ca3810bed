package callindex

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/logtest"
	"github.com/toolwire/toolwire/internal/startstop"
)

var _ startstop.Service = (*Feed)(nil)

// The feed is a Service: it feeds the index from Start (the rebuild, then
// live calls) until Stop, which ends the live subscriptions; Start and
// Stop are idempotent, and a stopped feed does not start again. An index
// without streams has no feed to start.
func TestFeedRunsFromStartUntilStop(t *testing.T) {
	t.Parallel()
	require.ErrorIs(t, NewFeed(mustNew(t, Config{})).Start(t.Context()), errNoStreams)

	s := startIndexStack(t, nil)
	before := indexCall(t, s, indexAcme, "echo", `{"text":"before the feed"}`, "")
	x := mustNew(t, Config{Streams: StreamsOf(s.Env.Bus), Specs: s.Registry})
	f := NewFeed(x)
	require.NoError(t, f.Start(t.Context()))
	require.NoError(t, f.Start(t.Context()), "Start is idempotent")
	t.Cleanup(func() { require.NoError(t, f.Stop(context.Background())) })
	select {
	case <-x.Ready():
	case <-time.After(indexWait):
		t.Fatal("never ready")
	}
	_, ok := x.Get(before.CallId)
	require.True(t, ok)
	require.Eventually(t, func() bool { return x.Stats().Live }, indexWait, 5*time.Millisecond, "live past the rebuild")
	ch, cancel, err := x.Subscribe()
	require.NoError(t, err)
	defer cancel()
	live := indexCall(t, s, indexAcme, "echo", `{"text":"while it runs"}`, "")
	nextUpdate(t, ch, live.CallId, audit.OutcomeOK)

	require.NoError(t, f.Stop(t.Context()))
	require.False(t, x.Stats().Live)
	for range ch { // the updates sent, then the end of the subscription
	}
	require.NoError(t, f.Stop(t.Context()), "Stop is idempotent")
	require.ErrorIs(t, f.Start(t.Context()), startstop.ErrStopped)
}

// A run of the feed that fails (here: the results stream is gone) is
// started again after a pause that doubles, and carries on once the
// stream is back; Stop ends the feed during a pause.
func TestFeedStartsAFailedRunAgain(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	cfg := env.Bus.Results.CachedInfo().Config
	require.NoError(t, env.Bus.JS.DeleteStream(t.Context(), cfg.Name))
	var logs logtest.Buffer
	x := mustNew(t, Config{Streams: StreamsOf(env.Bus), Logger: logs.JSONLogger()})
	f := NewFeed(x)
	require.NoError(t, f.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, f.Stop(context.Background())) })
	restarted := func(pause time.Duration) func() bool {
		return func() bool {
			for l := range strings.Lines(logs.String()) {
				if strings.Contains(l, `"msg":"calls index stopped; starting it again"`) && strings.Contains(l, fmt.Sprintf(`"in":%d}`, pause)) {
					return true
				}
			}
			return false
		}
	}
	require.Eventually(t, restarted(time.Second), indexWait, 10*time.Millisecond, "the failed run is started again after 1s")
	require.Eventually(t, restarted(2*time.Second), indexWait, 10*time.Millisecond, "then after 2s")
	select {
	case <-x.Ready():
		t.Fatal("ready without its results stream")
	default:
	}

	_, err := env.Bus.JS.CreateStream(t.Context(), cfg)
	require.NoError(t, err)
	select {
	case <-x.Ready():
	case <-time.After(indexWait):
		t.Fatal("the feed did not carry on once the stream was back")
	}
}
