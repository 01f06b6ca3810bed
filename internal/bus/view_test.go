package bus_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
)

// OpenView looks up the streams and the registry bucket the operator's
// tools read, and changes nothing; a wrong prefix is ErrNoInstallation
// naming every missing stream.
func TestOpenView(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{Prefix: "tw"})
	ctx := t.Context()

	_, err := bus.OpenView(ctx, env.Bus.NC, "other")
	require.ErrorIs(t, err, bus.ErrNoInstallation)
	for _, name := range []string{"OTHER_CALLS", "OTHER_RESULTS", "OTHER_EVENTS", "OTHER_DLQ"} {
		require.Contains(t, err.Error(), "stream "+name+" not found")
	}
	_, err = bus.OpenView(ctx, env.Bus.NC, "not a prefix")
	require.Error(t, err)
	require.NotErrorIs(t, err, bus.ErrNoInstallation)

	before, err := env.Bus.Calls.Info(ctx)
	require.NoError(t, err)
	v, err := bus.OpenView(ctx, env.Bus.NC, "tw")
	require.NoError(t, err)
	require.Equal(t, "tw", v.Config.Prefix)
	require.Equal(t, "TW_CALLS", v.Calls.CachedInfo().Config.Name)
	require.Equal(t, "TW_RESULTS", v.Results.CachedInfo().Config.Name)
	require.Equal(t, "TW_EVENTS", v.Events.CachedInfo().Config.Name)
	require.Equal(t, "TW_DLQ", v.DLQ.CachedInfo().Config.Name)
	require.NotNil(t, v.Registry)
	require.NoError(t, v.RegistryErr)
	require.Equal(t, "tw_registry", v.Registry.Bucket())
	after, err := env.Bus.Calls.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, before.Config, after.Config, "OpenView changes nothing")
}

// A registry bucket that cannot be opened is the tool's to judge: the
// view opens without it and says why.
func TestOpenViewWithoutRegistry(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx := t.Context()
	require.NoError(t, env.Bus.JS.DeleteKeyValue(ctx, env.Bus.Config.RegistryBucket()))
	v, err := bus.OpenView(ctx, env.Bus.NC, "")
	require.NoError(t, err)
	require.Nil(t, v.Registry)
	require.ErrorContains(t, v.RegistryErr, "toolwire_registry")
}
