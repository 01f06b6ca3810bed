package bus_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/signing"
)

// A dispatcher skips a result's claim check (a read of the call's events)
// only for a pool whose one enrolled key signed it: a second key enrolled
// makes every result of the pool checked, and a keyring that does not
// list (a worker's, whose credential may not) checks every one.
func TestSoleKeyIsThePoolsOnlyKey(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx := t.Context()
	a, err := signing.NewKey()
	require.NoError(t, err)
	b, err := signing.NewKey()
	require.NoError(t, err)
	enrol := func(k *signing.Key, pool string) {
		_, err := env.Bus.Registry.Put(ctx, signing.PoolKey(k.Public(), pool), []byte(`{}`))
		require.NoError(t, err)
	}
	enrol(a, "native")
	enrol(b, "http") // another pool's key is not the native pool's

	keys := bus.NewKeyring(env.Bus.Registry, env.Bus.NC, env.Bus.Config.RegistryBucket())
	require.False(t, keys.SoleKey(ctx, "native", a.Public()), "a keyring that does not list checks every result")
	keys.ListPoolKeys()
	require.True(t, keys.SoleKey(ctx, "native", a.Public()))
	require.False(t, keys.SoleKey(ctx, "native", b.Public()), "a key not listed for the pool")
	require.False(t, keys.SoleKey(ctx, "empty", a.Public()), "a pool with no key")
	require.False(t, keys.SoleKey(ctx, "na.tive", a.Public()), "a pool that is no subject token")

	enrol(b, "native")
	fresh := bus.NewKeyring(env.Bus.Registry, env.Bus.NC, env.Bus.Config.RegistryBucket())
	fresh.ListPoolKeys()
	require.False(t, fresh.SoleKey(ctx, "native", a.Public()), "two keys: every result is checked")
	require.False(t, fresh.SoleKey(ctx, "native", b.Public()))
}

// A result subject's events subject, and none for another subject.
func TestEventsOfResult(t *testing.T) {
	s := bus.Config{Prefix: "tw"}.Subjects()
	got, ok := s.EventsOfResult(s.Result("acme", "d1", "01CALL"))
	require.True(t, ok)
	require.Equal(t, s.EventsAnyDispatcher("acme", "01CALL"), got)
	for _, bad := range []string{s.Event("acme", "d1", "01CALL"), "tw.result.acme.d1", "tw.result.acme.d1.x.y", "other.result.a.b.c",
		"tw.result.acme.*.01CALL", "tw.result.acme..01CALL", "tw.result.>"} {
		_, ok := s.EventsOfResult(bad)
		require.False(t, ok, bad)
	}
}
