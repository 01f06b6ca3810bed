package bus_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
)

// A counter of the delegation stream is added to and read in one request;
// increments of one counter sent at once from two connections each get
// their own value; counters are independent, and a subject outside a
// counter stream is an error.
func TestCountersAddInOneRoundTrip(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx := t.Context()
	s := env.Bus.Subjects
	add := func(subject string, delta int64) int64 {
		t.Helper()
		n, err := bus.AddToCounter(ctx, env.Bus.NC, subject, delta)
		require.NoError(t, err)
		return n
	}
	kids := s.DelegationChildren("acme", "01JPARENT")
	require.Equal(t, int64(1), add(kids, 1))
	require.Equal(t, int64(2), add(kids, 1))
	require.Equal(t, int64(1), add(kids, -1))
	require.Equal(t, int64(1), add(s.DelegationDescendants("acme", "01JPARENT"), 1), "another counter")
	require.Equal(t, int64(1), add(s.DelegationChildren("other", "01JPARENT"), 1), "another tenant's")

	other := env.Open(t, "second replica")
	race := s.DelegationChildren("acme", "01JRACE")
	const n = 40
	values := make(chan int64, n)
	var wg sync.WaitGroup
	for i := range n {
		nc := env.Bus.NC
		if i%2 == 1 {
			nc = other.NC
		}
		wg.Go(func() {
			v, err := bus.AddToCounter(ctx, nc, race, 1)
			if err != nil {
				t.Errorf("add: %v", err)
				return
			}
			values <- v
		})
	}
	wg.Wait()
	close(values)
	var got []int64
	for v := range values {
		got = append(got, v)
	}
	slices.Sort(got)
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i + 1)
	}
	require.Equal(t, want, got, "every increment sees its own value")

	info, err := env.Bus.Delegation.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(4), info.State.Msgs, "one message per counter")

	_, err = bus.AddToCounter(ctx, env.Bus.NC, s.Event("acme", "d1", "01JCALL"), 1)
	require.Error(t, err, "an event's subject is no counter")
}

// The delegation stream is the dispatchers' alone: workers do not attach
// to it nor look it up, no role may add to its counters, and a layout from
// before the stream gets it when a dispatcher opens it.
func TestTheDelegationStreamIsTheDispatchers(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	ctx := t.Context()
	// The layout of dispatchers from before the stream.
	require.NoError(t, e.bus.JS.DeleteStream(ctx, e.bus.Config.DelegationStream()))
	nc, v := e.dialRole(t, bus.RoleWorker)
	wb, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{Bind: true})
	require.NoError(t, err, "a worker attaches without the delegation stream")
	require.Nil(t, wb.Delegation)
	perms, err := bus.RolePermissions(bus.Config{}, bus.RoleWorker)
	require.NoError(t, err)
	for _, p := range perms.Publish {
		require.NotContains(t, p, e.bus.Config.DelegationStream())
	}

	// A dispatcher's start creates it.
	dnc, err := e.srv.Connect("dispatcher")
	require.NoError(t, err)
	t.Cleanup(dnc.Close)
	db, err := bus.Open(ctx, dnc, bus.Config{}, bus.Options{})
	require.NoError(t, err)
	info, err := db.Delegation.Info(ctx)
	require.NoError(t, err)
	require.True(t, info.Config.AllowMsgCounter)
	require.Equal(t, int64(1), info.Config.MaxMsgsPerSubject)
	require.Equal(t, jetstream.DiscardOld, info.Config.Discard)

	// No role adds to a counter (a worker or an operator that could would
	// free or take a parent's places).
	subject := e.bus.Subjects.DelegationChildren("acme", "01JPARENT")
	require.NoError(t, nc.Publish(subject, nil))
	v.waitFor(t, subject)
	onc, ov := e.dialRole(t, bus.RoleOperator)
	require.NoError(t, onc.Publish(subject, nil))
	ov.waitFor(t, subject)
	n, err := bus.AddToCounter(ctx, db.NC, subject, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "nothing the roles sent was counted")
}
