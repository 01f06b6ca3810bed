package dispatch_test

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// proxiedDispatcher starts a second dispatcher of s whose NATS connection
// goes through a proxy the test can cut or mute, with the given publish
// horizon.
func proxiedDispatcher(t *testing.T, s *dispatchtest.Stack, name string, horizon time.Duration) (*dispatch.Dispatcher, *bustest.Proxy) {
	t.Helper()
	u, err := url.Parse(s.Env.URL)
	require.NoError(t, err)
	p := bustest.StartProxy(t, u.Host)
	u.Host = p.Addr()
	nc, err := bus.Dial(bus.ConnConfig{URL: u.String(), Name: name})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	b, err := bus.Open(t.Context(), nc, s.Env.Bus.Config, bus.Options{})
	require.NoError(t, err)
	d, err := dispatch.New(b, s.Registry, dispatch.Config{Name: name, PublishHorizon: horizon, MaxQueueWait: time.Minute})
	require.NoError(t, err)
	require.NoError(t, d.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, d.Stop(ctx))
	})
	return d, p
}

// A call whose publish the stream stored but whose acknowledgement never
// came back (a link that fails one way), or that was sent into a broken
// connection, may run: the caller is answered accepted and unconfirmed
// with its id, never refused, and GetResult later gives its one result
// (issue 26, finding 1: callers were told OVERLOADED for calls that then
// ran).
func TestUnconfirmedCallIsAcceptedNeverRefused(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	once := tool.Must(tool.New("once_unconfirmed", func(ctx context.Context, _ struct{}) (string, error) {
		runs.Add(1)
		return "ran", nil
	})) // neither read-only nor idempotent
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{once}})
	const horizon = 2 * time.Second
	d, p := proxiedDispatcher(t, s, "unconfirmed", horizon)

	for _, fault := range []struct {
		name      string
		cut, heal func()
		storedNow bool // the call reaches the stream during the fault
	}{
		{name: "acknowledgements lost", cut: func() { p.SetMuted(true) }, heal: func() { p.SetMuted(false) }, storedNow: true},
		{name: "connection cut", cut: func() { p.SetCut(true) }, heal: func() { p.SetCut(false) }},
	} {
		before := runs.Load()
		fault.cut()
		sub, err := d.Submit(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "once_unconfirmed"})
		require.NoError(t, err, fault.name)
		require.Nil(t, sub.Rejected, "%s: a call that may be stored is never refused", fault.name)
		require.True(t, sub.Unconfirmed, "%s: answered accepted and unconfirmed", fault.name)
		require.NotEmpty(t, sub.CallID)
		if fault.storedNow {
			waitFor(t, "the stored call to run", func() bool { return runs.Load() > before })
		}
		fault.heal()

		r, err := d.GetResult(t.Context(), identity.Default, sub.CallID, 45*time.Second)
		require.NoError(t, err, fault.name)
		require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State, fault.name)
		require.True(t, r.Response.GetOk(), "%s: %v", fault.name, r.Response)
		require.Equal(t, before+1, runs.Load(), "%s: it ran once", fault.name)
	}
}
