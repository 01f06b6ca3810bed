package faulttest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/faulttest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policystore"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
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
	defer h.Stop(context.Background())
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

// An approval on a 3-node cluster with the approvals bucket's leader
// killed while the call waits: the approver's decision waits out the
// election, the call runs exactly once, and the worker's re-check (a read
// from the new leader) lets it run.
func TestClusterApprovalRidesOutAFailover(t *testing.T) {
	c := faulttest.NewCluster3(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c.StartWorker(faulttest.WorkerOptions{Name: "w"})
	c.WaitTool("ledger")
	a, err := policystore.NewStore(c.Bus, nil).Apply(ctx, policystore.Installation,
		[]byte("tenant:\n  default: allow\n  rules:\n    - {id: ledger-asks, effect: ask, tools: [ledger]}\n"), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, c.Policies.Wait(ctx, policystore.Installation, a.Version.Version, a.Revision))

	s, err := c.Dispatcher.Submit(ctx, identity.Default,
		&toolwirev1.CallRequest{Tool: "ledger", ArgumentsJson: `{"sleep_ms":5,"text":"asked"}`})
	require.NoError(t, err)
	require.NotNil(t, s.Awaiting, "parked for an approver")
	require.Equal(t, s.CallID, s.Awaiting.GetError().GetApproval().GetApprovalId())

	victim, err := c.StreamLeader(ctx, "KV_"+c.Bus.Approvals.Bucket(), 30*time.Second)
	require.NoError(t, err)
	at := time.Now()
	c.KillNode(victim)
	var approved time.Duration
	for {
		_, _, err = c.Dispatcher.Approvals().Approve(ctx, identity.Default, &toolwirev1.ApproveRequest{Id: s.CallID, Reason: "ok"})
		if err == nil {
			approved = time.Since(at)
			break
		}
		require.NoError(t, ctx.Err(), "approve: %v", err)
		time.Sleep(200 * time.Millisecond) // polling with a deadline: the approver tries again
	}
	r, err := c.Result(ctx, s.CallID, time.Minute)
	require.NoError(t, err)
	require.True(t, r.GetOk(), "%v", r.GetError())
	figure(t, "approved_after_leader_kill=%s result_after=%s", approved.Round(time.Millisecond), time.Since(at).Round(time.Millisecond))
	c.RestartNode(victim)
	c.WaitHealthy(2 * time.Minute)
	rep := c.Check(ctx, 1, []string{s.CallID}, 30*time.Second)
	require.Zero(t, rep.Lost, rep.String())
	require.Equal(t, 1, rep.Executions[s.CallID], "ran exactly once")
}
