package poolview_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/poolview"
	"github.com/toolwire/toolwire/internal/startstop"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

var (
	native  = toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	sandbox = toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX
)

// setup starts a server with a native pool's consumer.
func setup(t *testing.T) *bus.Bus {
	t.Helper()
	env := bustest.Start(t, bus.Config{})
	_, err := env.Bus.EnsurePool(t.Context(), bus.PoolConfig{Type: native})
	require.NoError(t, err)
	return env.Bus
}

// stopAtEnd stops s when the test ends.
func stopAtEnd(t *testing.T, s startstop.Service) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})
}

// Start reads the pools before it returns; a pool at its bound refuses
// OVERLOADED (on a fresh read, since only this replica's admissions bring
// it there) and admits again once the calls counted are settled and read.
func TestLoadRefusesAPoolAtItsBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l, err := poolview.NewLoad(poolview.LoadConfig{Bus: b, Refresh: time.Hour, PoolMaxBacklog: map[string]int{"native": 2},
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, l.Start(t.Context()))
	stopAtEnd(t, l)

	pools := l.Pools()
	require.Len(t, pools, 1)
	require.Equal(t, "native", pools[0].Pool)
	require.Equal(t, b.Config.PoolConsumer("native"), pools[0].Consumer)
	require.EqualValues(t, 2, pools[0].Bound)
	require.False(t, pools[0].ReadAt.IsZero())
	subject := b.Subjects.Call(native, "acme", "builtin", "echo")
	require.Equal(t, "native", l.PoolOf(subject))
	require.Empty(t, l.PoolOf(b.Subjects.Call(sandbox, "acme", "local", "grep")), "no pool")

	var admitted []poolview.Admitted
	for range 2 {
		a, te, _, _ := l.Check(t.Context(), poolview.Request{Subject: subject})
		require.Nil(t, te)
		admitted = append(admitted, a)
	}
	_, te, cause, target := l.Check(t.Context(), poolview.Request{Subject: subject})
	require.NotNil(t, te, "a third call with two counted")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, te.GetType())
	require.True(t, te.GetRetryable())
	require.Contains(t, te.GetMessage(), "pool native has 2 calls queued or running, at its bound of 2")
	require.Equal(t, telemetry.OverloadBacklog, cause)
	require.Equal(t, "native", target)

	// Published, and never stored: the next read finds none of them.
	for _, a := range admitted {
		a.Settle()
	}
	_, te, _, _ = l.Check(t.Context(), poolview.Request{Subject: subject})
	require.Nil(t, te, "admitted on a fresh read")

	a, te, _, _ := l.Check(t.Context(), poolview.Request{Subject: b.Subjects.Call(sandbox, "acme", "local", "grep")})
	require.Nil(t, te, "a call no pool filters is not checked")
	require.Equal(t, poolview.Admitted{}, a)
	a.Settle() // the zero Admitted settles nothing
}

// Load and Pools keep the lifecycle contract: Stop before Start is
// harmless, both are idempotent, and a stopped view does not start again.
func TestViewsAreServices(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l, err := poolview.NewLoad(poolview.LoadConfig{Bus: b})
	require.NoError(t, err)
	p, err := poolview.NewPools(poolview.PoolsConfig{Bus: b})
	require.NoError(t, err)
	for _, s := range []startstop.Service{l, p} {
		require.NoError(t, s.Start(t.Context()))
		require.NoError(t, s.Start(t.Context()))
		require.NoError(t, s.Stop(t.Context()))
		require.NoError(t, s.Stop(t.Context()))
		require.ErrorIs(t, s.Start(t.Context()), startstop.ErrStopped)
	}
	var none *poolview.Pools
	require.NoError(t, none.Start(t.Context()))
	require.NoError(t, none.Stop(t.Context()))
	require.True(t, none.Served(t.Context(), poolview.ToolKey{Executor: sandbox, Provider: "local", Name: "grep"}, "acme", time.Now()),
		"no check: every call is served")
}

// A tool is served when a pool consumer filters its calls; a pool created
// after the view was listed is found by a fresh listing, for a tool seen
// after that listing began.
func TestPoolsServedFollowsThePools(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := poolview.NewPools(poolview.PoolsConfig{Bus: b, Every: time.Hour})
	require.NoError(t, err)
	require.NoError(t, p.Start(t.Context()))
	stopAtEnd(t, p)
	ctx := t.Context()
	echo := poolview.ToolKey{Executor: native, Provider: "builtin", Name: "echo"}
	grep := poolview.ToolKey{Executor: sandbox, Provider: "local", Name: "grep"}
	require.True(t, p.Served(ctx, echo, "acme", time.Time{}))
	require.False(t, p.Served(ctx, grep, "acme", time.Time{}))

	_, err = b.EnsurePool(ctx, bus.PoolConfig{Type: sandbox})
	require.NoError(t, err)
	require.True(t, p.Served(ctx, grep, "acme", time.Now()), "a tool seen after the listing is looked up again")

	_, err = poolview.NewPools(poolview.PoolsConfig{Bus: b, Every: -time.Second})
	require.ErrorContains(t, err, "PoolsConfig.Every")
	_, err = poolview.NewLoad(poolview.LoadConfig{Bus: b, StoreHighWater: 1.5})
	require.ErrorContains(t, err, "LoadConfig.StoreHighWater")
}
