package faulttest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/faulttest"
	"github.com/toolwire/toolwire/internal/policystore"
)

// Policies on a 3-node cluster: with the leader of the policies bucket
// killed, an apply waits out the election and every replica's holder puts
// it in force; putting an earlier version back is a change (Apply reads
// what is in force from the leader and writes by compare-and-set).
func TestClusterPolicyApplyRidesOutAFailover(t *testing.T) {
	c := faulttest.NewCluster3(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	store := policystore.NewStore(c.Bus, nil)
	h := policystore.NewHolder(c.Bus, nil)
	require.NoError(t, h.Start(ctx))
	defer h.Stop()
	acme, err := policystore.TenantScope("acme")
	require.NoError(t, err)
	var applied time.Time
	apply := func(doc string) *policystore.Applied {
		t.Helper()
		a, err := store.Apply(ctx, acme, []byte(doc), policystore.ApplyOptions{AppliedBy: "test"})
		require.NoError(t, err)
		applied = time.Now()
		require.NoError(t, h.Wait(ctx, acme, a.Version.Version, a.Revision))
		return a
	}
	const allowAll, denyAll = "tenant:\n  default: allow\n", "tenant:\n  default: deny\n"
	first := apply(allowAll)

	stream := "KV_" + c.Bus.Policies.Bucket()
	victim, err := c.StreamLeader(ctx, stream, 30*time.Second)
	require.NoError(t, err)
	at := time.Now()
	c.KillNode(victim)
	second := apply(denyAll)
	figure(t, "applied_after_leader_kill=%s in_force_after=%s", applied.Sub(at).Round(time.Millisecond), time.Since(at).Round(time.Millisecond))
	require.True(t, second.Changed)
	require.Equal(t, second.Version.Version, h.For("acme").Version())

	back := apply(allowAll)
	require.True(t, back.Changed, "the earlier version is not the one in force")
	require.Equal(t, first.Version.Version, h.For("acme").Version())
	c.RestartNode(victim)
	c.WaitHealthy(2 * time.Minute)
	hist, err := store.History(ctx, acme, 0)
	require.NoError(t, err)
	require.Len(t, hist, 3)
}
