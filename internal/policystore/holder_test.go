package policystore_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policystore"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func startHolder(t *testing.T, b *bus.Bus) *policystore.Holder {
	t.Helper()
	h := policystore.NewHolder(b, nil)
	require.NoError(t, h.Start(ctxWait(t)))
	t.Cleanup(func() { _ = h.Stop(context.Background()) })
	return h
}

// decide decides a call of tool with args by tenant under h.
func decide(h *policystore.Holder, tenant, tool, args string) policy.Decision {
	a, err := policy.ParseArgs([]byte(args))
	if err != nil {
		panic(err)
	}
	return h.For(tenant).Decide(policy.Input{Tool: &toolwirev1.ToolSpec{Name: tool}, Args: a,
		Caller: &toolwirev1.Caller{Tenant: tenant, Agent: "a"}})
}

// A tenant's own document replaces the installation's for that tenant
// only; every other tenant falls back to the installation document; with
// neither there is no policy; removing a tenant's document falls back.
func TestHolderTenantFallsBackToInstallation(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	s := policystore.NewStore(env.Bus, nil)
	h := startHolder(t, env.Bus)
	ctx := ctxWait(t)
	require.Nil(t, h.For("acme"), "no document: no policy")

	inst := apply(t, s, policystore.Installation, denyEtc)
	require.NoError(t, h.Wait(ctx, policystore.Installation, inst.Version.Version, inst.Revision))
	for _, tn := range []string{"acme", "beta", "_all"} {
		require.Equal(t, inst.Version.Version, h.For(tn).Version(), tn)
	}

	acme := tenant(t, "acme")
	own := apply(t, s, acme, denyAllDoc)
	require.NoError(t, h.Wait(ctx, acme, own.Version.Version, own.Revision))
	require.Equal(t, own.Version.Version, h.For("acme").Version())
	require.Equal(t, inst.Version.Version, h.For("beta").Version(), "tenant acme's apply never affects beta")
	require.Equal(t, policy.Deny, decide(h, "acme", "echo", `{}`).Outcome)
	require.Equal(t, policy.Allow, decide(h, "beta", "echo", `{}`).Outcome)
	require.Equal(t, own.Version.Version, h.InForce(acme))
	require.Empty(t, h.InForce(tenant(t, "beta")))

	removed, rev, err := s.Remove(ctx, acme)
	require.NoError(t, err)
	require.True(t, removed)
	require.NoError(t, h.Wait(ctx, acme, "", rev))
	require.Equal(t, inst.Version.Version, h.For("acme").Version())
	removed, _, err = s.Remove(ctx, acme)
	require.NoError(t, err)
	require.False(t, removed, "nothing of its own left to remove")

	removed, rev, err = s.Remove(ctx, policystore.Installation)
	require.NoError(t, err)
	require.True(t, removed)
	require.NoError(t, h.Wait(ctx, policystore.Installation, "", rev))
	require.Nil(t, h.For("acme"))
}

// Start returns with the documents in force already loaded: the first
// call is decided by them.
func TestHolderStartLoadsWhatIsInForce(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	s := policystore.NewStore(env.Bus, nil)
	inst := apply(t, s, policystore.Installation, denyEtc)
	own := apply(t, s, tenant(t, "acme"), denyAllDoc)
	h := startHolder(t, env.Bus)
	require.Equal(t, own.Version.Version, h.For("acme").Version())
	require.Equal(t, inst.Version.Version, h.For("other").Version())
	require.Equal(t, policy.Deny, decide(h, "other", "fs_read", `{"path":"/etc/passwd"}`).Outcome)
}

// A document that cannot be loaded never opens everything up: the last
// good policy of the scope stays in force, and a scope that never had
// one on this replica denies every call, saying why.
func TestHolderFailsClosed(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	s := policystore.NewStore(env.Bus, nil)
	h := startHolder(t, env.Bus)
	ctx := ctxWait(t)
	kv := env.Bus.Policies
	record := func(version string) []byte {
		b, err := json.Marshal(map[string]any{"version": version, "applied_at": time.Now(), "rules": 1})
		require.NoError(t, err)
		return b
	}
	missing := "sha256:" + strings.Repeat("a", 64)
	broken := "sha256:" + strings.Repeat("b", 64)

	// No document behind the record, no earlier policy: deny everything.
	rev, err := kv.Put(ctx, "current.tenant.acme", record(missing))
	require.NoError(t, err)
	require.ErrorIs(t, h.Wait(ctx, tenant(t, "acme"), missing, rev), policystore.ErrNotInForce)
	require.Equal(t, policystore.DenyAllVersion, h.For("acme").Version())
	d := decide(h, "acme", "echo", `{}`)
	require.Equal(t, policy.Deny, d.Outcome)
	require.Equal(t, "policy-unavailable", d.RuleID())
	require.Contains(t, d.Reason(), "could not be loaded")
	require.Nil(t, h.For("beta"), "other tenants are not affected")

	// A good apply repairs it.
	good := apply(t, s, tenant(t, "acme"), denyEtc)
	require.NoError(t, h.Wait(ctx, tenant(t, "acme"), good.Version.Version, good.Revision))
	require.Equal(t, policy.Allow, decide(h, "acme", "echo", `{}`).Outcome)

	// A document that does not parse, or an undecodable record: the last
	// good one stays.
	_, err = kv.Put(ctx, "doc.tenant.acme."+strings.Repeat("b", 64), []byte("tenant: [not a layer"))
	require.NoError(t, err)
	rev, err = kv.Put(ctx, "current.tenant.acme", record(broken))
	require.NoError(t, err)
	require.ErrorIs(t, h.Wait(ctx, tenant(t, "acme"), broken, rev), policystore.ErrNotInForce)
	require.Equal(t, good.Version.Version, h.For("acme").Version())
	rev, err = kv.Put(ctx, "current.tenant.acme", []byte("{not json"))
	require.NoError(t, err)
	require.ErrorIs(t, h.Wait(ctx, tenant(t, "acme"), "", rev), policystore.ErrNotInForce)
	require.Equal(t, good.Version.Version, h.For("acme").Version())

	// A replica started now has no last good document: it denies.
	_, err = kv.Put(ctx, "current.tenant.acme", record(broken))
	require.NoError(t, err)
	fresh := startHolder(t, env.Bus)
	require.Equal(t, policystore.DenyAllVersion, fresh.For("acme").Version())

	// Keys of no scope are ignored.
	_, err = kv.Put(ctx, "current.elsewhere", record(missing))
	require.NoError(t, err)
	_, err = kv.Put(ctx, "current.tenant.a_b.c", record(missing))
	require.NoError(t, err)
	require.Nil(t, fresh.For("elsewhere"))
}

// Stop is safe before Start and twice; a second Start is refused; a Start
// whose context ends first fails and leaves nothing running.
func TestHolderLifecycle(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	h := policystore.NewHolder(env.Bus, nil)
	require.NoError(t, h.Stop(t.Context()))
	require.NoError(t, h.Stop(t.Context()))
	require.Error(t, h.Start(t.Context()), "a stopped holder does not start")

	h = policystore.NewHolder(env.Bus, nil)
	require.NoError(t, h.Start(t.Context()))
	require.Error(t, h.Start(t.Context()))
	require.NoError(t, h.Stop(t.Context()))
	require.NoError(t, h.Stop(t.Context()))

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	h = policystore.NewHolder(env.Bus, nil)
	require.Error(t, h.Start(ctx))
	require.NoError(t, h.Stop(t.Context()))
}

// A replica that could not load the document in force tries again: once
// the document is there (applying the same document again stores it),
// the replica puts it in force, with no new apply recorded.
func TestHolderRetriesADocumentItCouldNotLoad(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	s := policystore.NewStore(env.Bus, nil)
	h := startHolder(t, env.Bus)
	ctx := ctxWait(t)
	p, err := policy.Parse([]byte(denyEtc))
	require.NoError(t, err)
	rec, err := json.Marshal(map[string]any{"version": p.Version(), "applied_at": time.Now(), "rules": 1})
	require.NoError(t, err)

	// The record names a document the bucket does not hold (lost, or
	// never stored): every call of the tenant is denied.
	rev, err := env.Bus.Policies.Put(ctx, "current.tenant.acme", rec)
	require.NoError(t, err)
	require.ErrorIs(t, h.Wait(ctx, tenant(t, "acme"), p.Version(), rev), policystore.ErrNotInForce)
	require.Equal(t, policystore.DenyAllVersion, h.For("acme").Version())

	// Applying the same document again records nothing new but stores the
	// document; the replica loads it on its own.
	again := apply(t, s, tenant(t, "acme"), denyEtc)
	require.False(t, again.Changed)
	require.Equal(t, rev, again.Revision)
	require.Eventually(t, func() bool { return h.For("acme").Version() == p.Version() }, 10*time.Second, 20*time.Millisecond,
		"the replica loads the document once it is stored")
	require.NoError(t, h.Wait(ctx, tenant(t, "acme"), p.Version(), rev))
	hist, err := s.History(ctx, tenant(t, "acme"), 0)
	require.NoError(t, err)
	require.Len(t, hist, 1)
}

// A watch that ends is made again: what changed meanwhile is in force
// afterwards, a removal included.
func TestHolderWatchesAgain(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	s := policystore.NewStore(env.Bus, nil)
	ctx := ctxWait(t)
	a := apply(t, s, tenant(t, "acme"), denyEtc)
	apply(t, s, tenant(t, "beta"), denyEtc)
	h := policystore.NewHolder(env.Bus, nil)
	ended := policystore.EndWatchOnce(h)
	require.NoError(t, h.Start(ctx))
	t.Cleanup(func() { _ = h.Stop(context.Background()) })
	require.Equal(t, a.Version.Version, h.For("acme").Version())

	ended() // the first watch ends; the holder watches again
	b := apply(t, s, tenant(t, "acme"), denyAllDoc)
	_, _, err := s.Remove(ctx, tenant(t, "beta"))
	require.NoError(t, err)
	require.NoError(t, h.Wait(ctx, tenant(t, "acme"), b.Version.Version, b.Revision))
	require.NoError(t, h.Wait(ctx, tenant(t, "beta"), "", 0))
	require.Nil(t, h.For("beta"))
}

// A tenant whose document is slow to compile never holds up another
// tenant's change: documents load one job per scope, off the watch. Here
// acme's compile is held until beta's change is in force (issue 28,
// finding 4: another tenant's one-rule policy waited 36 s).
func TestHolderSlowTenantDelaysNoOther(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	s := policystore.NewStore(env.Bus, nil)
	h := policystore.NewHolder(env.Bus, nil)
	release, slow := make(chan struct{}), make(chan struct{}, 1)
	policystore.SetParse(h, func(b []byte) (*policy.Policy, error) {
		if strings.Contains(string(b), "slow-to-compile") {
			slow <- struct{}{}
			<-release
		}
		return policy.Parse(b)
	})
	require.NoError(t, h.Start(ctxWait(t)))
	t.Cleanup(func() { _ = h.Stop(context.Background()) })
	ctx := ctxWait(t)

	acme, beta := tenant(t, "acme"), tenant(t, "beta")
	slowDoc := apply(t, s, acme, "# slow-to-compile\n"+denyAllDoc)
	<-slow // acme's document is being compiled, and stays so
	fast := apply(t, s, beta, denyAllDoc)
	require.NoError(t, h.Wait(ctx, beta, fast.Version.Version, fast.Revision), "beta's change is in force while acme's compiles")
	require.Equal(t, policy.Deny, decide(h, "beta", "echo", `{}`).Outcome)
	require.Nil(t, h.For("acme"), "acme's is not in force before it is compiled")
	close(release)
	require.NoError(t, h.Wait(ctx, acme, slowDoc.Version.Version, slowDoc.Revision))
	require.Equal(t, policy.Deny, decide(h, "acme", "echo", `{}`).Outcome)
}
