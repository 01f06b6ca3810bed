package dispatchd_test

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatchd"
)

// Zero fields take their defaults (the flags' defaults); an invalid field
// is refused, named with its flag, before anything starts.
func TestRunConfigDefaultsAndValidate(t *testing.T) {
	t.Parallel()
	c := dispatchd.RunConfig{}.WithDefaults()
	require.Equal(t, "data", c.DataDir)
	require.Equal(t, "127.0.0.1:8080", c.HTTPAddr)
	require.Equal(t, "all", c.Workers, "with the embedded server")
	require.Equal(t, 1_000_000, c.UIIndexCalls)
	require.Equal(t, 25*time.Second, c.Grace)
	require.NotNil(t, c.Logger)
	require.NoError(t, c.Validate())
	require.Equal(t, "none", dispatchd.RunConfig{NATSURL: "nats://elsewhere:4222"}.WithDefaults().Workers, "with an external cluster")
	require.Equal(t, "native", dispatchd.RunConfig{Workers: "native"}.WithDefaults().Workers)

	for _, tc := range []struct {
		rc   dispatchd.RunConfig
		name string // the field refused, "" = valid
	}{
		{dispatchd.RunConfig{MCPTaskAfter: 5 * time.Second, Concurrency: 8, UIIndexCalls: 10}, ""},
		{dispatchd.RunConfig{MCPTaskAfter: -time.Second}, "MCPTaskAfter (--mcp-task-after)"},
		{dispatchd.RunConfig{SyncInterval: -time.Second}, "SyncInterval (--nats-sync)"},
		{dispatchd.RunConfig{Grace: -time.Second}, "Grace (--grace)"},
		{dispatchd.RunConfig{UIIndexCalls: -1}, "UIIndexCalls (--ui-index-calls)"},
		{dispatchd.RunConfig{Concurrency: -1}, "Concurrency (--concurrency)"},
	} {
		err := tc.rc.WithDefaults().Validate()
		if tc.name == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, tc.name)
		// Run refuses it at once: nothing listens on the address.
		addr := freeAddr(t)
		tc.rc.HTTPAddr, tc.rc.DataDir, tc.rc.Logger = addr, t.TempDir(), slog.New(slog.DiscardHandler)
		require.ErrorContains(t, dispatchd.Run(t.Context(), tc.rc), tc.name)
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err, "Run left nothing listening")
		require.NoError(t, ln.Close())
	}
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
