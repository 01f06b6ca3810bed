package bus_test

import (
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
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

// A claim check reads a call's events on every dispatcher's subject, each
// subject oldest first, not the events of other calls or tenants; a
// callback's false ends the subject it reads, and the reader says when it
// stopped at its limit.
func TestEventsReaderReadsEveryDispatchersEvents(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx, s := t.Context(), env.Bus.Subjects
	seqs := map[string][]uint64{}
	for i, subject := range []string{s.Event("acme", "d2", "01CALL"), s.Event("acme", "d1", "01CALL"), s.Event("acme", "d1", "01OTHER"),
		s.Event("other", "d1", "01CALL"), s.Event("acme", "d2", "01CALL")} {
		ack, err := env.Bus.JS.Publish(ctx, subject, []byte{byte(i)})
		require.NoError(t, err)
		seqs[subject] = append(seqs[subject], ack.Sequence)
	}
	d1, d2 := seqs[s.Event("acme", "d1", "01CALL")], seqs[s.Event("acme", "d2", "01CALL")]
	read := bus.EventsReader(env.Bus.NC, env.Bus.Events, s)
	result := s.Result("acme", "0", "01CALL") // a result under any dispatcher's token
	readAll := func(limit int, goOn bool) ([]uint64, bool) {
		var got []uint64
		complete, err := read(ctx, result, limit, func(m *jetstream.RawStreamMsg) bool {
			got = append(got, m.Sequence)
			return goOn
		})
		require.NoError(t, err)
		return got, complete
	}
	got, complete := readAll(10, true)
	require.True(t, complete)
	require.Equal(t, append(slices.Clone(d1), d2...), got)
	got, complete = readAll(2, true)
	require.False(t, complete, "more were left past the limit")
	require.Equal(t, []uint64{d1[0], d2[0]}, got)
	got, complete = readAll(2, false)
	require.True(t, complete, "each subject ended by its callback, none by the limit")
	require.Equal(t, []uint64{d1[0], d2[0]}, got)

	_, err := read(ctx, s.Event("acme", "d1", "01CALL"), 10, func(*jetstream.RawStreamMsg) bool { return true })
	require.Error(t, err, "not a result subject")
}
