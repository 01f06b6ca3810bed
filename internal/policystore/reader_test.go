package policystore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/policystore"
)

// A Reader with the worker credential reads the policy in force for a
// tenant as the moment has it, without waiting for a watch: the tenant's
// own document, else the installation's, else none; a removal falls back
// at once. A document that cannot be loaded is an error (ErrUnavailable),
// never "no policy". The credential reads the bucket and writes nothing.
func TestReaderReadsThePolicyInForceWithTheWorkerCredential(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	env := bustest.StartWithRoles(t)
	store := policystore.NewStore(env.Bus, nil)
	nc, err := bus.Dial(bus.ConnConfig{URL: env.Server.ClientURL(), Name: "worker", CredsFile: bus.CredentialsFile(env.Creds.Dir, bus.RoleWorker),
		InboxPrefix: bus.InboxPrefix(env.Bus.Config, bus.RoleWorker)})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	wb, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{Bind: true})
	require.NoError(t, err)
	r := policystore.NewReader(wb)

	p, err := r.For(ctx, "acme")
	require.NoError(t, err)
	require.Nil(t, p, "no policy in force")

	install := apply(t, store, policystore.Installation, denyAllDoc)
	own := apply(t, store, tenant(t, "acme"), denyEtc)
	p, err = r.For(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, own.Version.Version, p.Version(), "the tenant's own document")
	p, err = r.For(ctx, "other")
	require.NoError(t, err)
	require.Equal(t, install.Version.Version, p.Version(), "the installation's, for a tenant without one")

	removed, _, err := store.Remove(ctx, tenant(t, "acme"))
	require.NoError(t, err)
	require.True(t, removed)
	p, err = r.For(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, install.Version.Version, p.Version(), "a removal falls back at once")

	broken := apply(t, store, tenant(t, "broken"), denyEtc)
	require.NoError(t, env.Bus.Policies.Purge(ctx, "doc.tenant.broken."+strings.TrimPrefix(broken.Version.Version, "sha256:")))
	_, err = policystore.NewReader(wb).For(ctx, "broken")
	require.ErrorIs(t, err, policystore.ErrUnavailable, "a missing document is no policy's absence")
	_, err = r.For(ctx, "a.b")
	require.ErrorIs(t, err, policystore.ErrBadScope)

	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	defer wcancel()
	_, err = wb.Policies.Put(wctx, "current.tenant.acme", []byte(`{}`))
	require.Error(t, err, "a worker may not put a policy in force")
}
