package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
)

// The registry is written only by dispatchers: with the worker credential
// a tool's entry cannot be rewritten (a poisoned description under the
// same version, shown to every tenant), a source or an approval cannot be
// put, and a rollup or purge cannot empty the registry stream. Workers
// announce their tools on bus.PoolRegistrySubject instead, which the
// dispatchers serve and check (internal/registry).
func TestWorkerCannotWriteTheRegistry(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	ctx := t.Context()
	_, err := e.bus.Registry.Put(ctx, "echo", []byte("the dispatcher's spec"))
	require.NoError(t, err)
	before, err := e.bus.Registry.Get(ctx, "echo")
	require.NoError(t, err)

	nc, v := e.dialRole(t, bus.RoleWorker)
	wb, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{Bind: true})
	require.NoError(t, err)
	for _, key := range []string{"echo", "versions.echo.v1", "sources.echo", "approvals.echo"} {
		short, cancel := context2s(t)
		_, err := wb.Registry.Put(short, key, []byte("poisoned"))
		cancel()
		require.Error(t, err, "a put of %s", key)
		v.waitFor(t, "$KV."+wb.Config.RegistryBucket()+"."+key)
	}
	// A rollup of the whole stream (it would keep only itself).
	rollup := "$KV." + wb.Config.RegistryBucket() + ".echo"
	m := nats.NewMsg(rollup)
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupAll)
	m.Data = []byte("poisoned")
	short, cancel := context2s(t)
	_, err = wb.JS.PublishMsg(short, m)
	cancel()
	require.Error(t, err, "a rollup")
	// A purge of the registry stream.
	purge := "$JS.API.STREAM.PURGE.KV_" + wb.Config.RegistryBucket()
	_, err = nc.Request(purge, nil, time.Second)
	require.Error(t, err)
	v.waitFor(t, purge)
	// But it may ask the dispatchers to register its tools.
	require.Contains(t, mustPerms(t, bus.RoleWorker).Publish, bus.PoolRegistrySubject(e.bus.Config, "*"))
	// And read a key from the bucket's leader, which its keyring does
	// for an enrolment a direct get found missing (signing.Keyring).
	got, err := bus.KVGetFromLeader(ctx, nc, wb.Config.RegistryBucket(), "echo")
	require.NoError(t, err)
	require.Equal(t, "the dispatcher's spec", string(got.Value))

	after, err := e.bus.Registry.Get(ctx, "echo")
	require.NoError(t, err)
	require.Equal(t, before.Revision(), after.Revision(), "the entry is unchanged")
	require.Equal(t, "the dispatcher's spec", string(after.Value()))
	info, err := e.bus.Registry.Status(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, info.Values(), "nothing else was written, nothing purged")
}

func mustPerms(t *testing.T, role string) bus.Permissions {
	t.Helper()
	p, err := bus.RolePermissions(bus.Config{}, role)
	require.NoError(t, err)
	return p
}

// context2s bounds one refused write: a publish the server refuses gets
// no acknowledgement, so the client waits for its context.
func context2s(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), 2*time.Second)
}
