//go:build linux

package sandbox_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
	"github.com/toolwire/toolwire/internal/testdeps"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func withNetwork(sc *toolwirev1.SandboxConfig) { sc.Network = true }

// A network tool shares the worker's network namespace, so the operator
// must accept that first; by default the tool is refused at start-up
// (CheckSpec) and at call time.
func TestNetworkToolNeedsOperatorOptIn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := spec(fixture("connect", "--", "127.0.0.1:1"), withNetwork)
	require.NoError(t, sandbox.CheckSpec(s), "the spec itself is well formed")
	err := e.CheckSpec(s)
	require.ErrorContains(t, err, "sandbox.host_network")
	te := failure(t, e, s, `{}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, te.Type)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, te.SideEffects)
	require.Empty(t, e.SpecIsolationGaps(spec(fixture("connect"))), "a tool without network has no gap of its own")

	net := setupNet(t)
	require.NoError(t, net.CheckSpec(s))
	require.Contains(t, net.SpecIsolationGaps(s), sandbox.GapHostNetwork)
}

// From a network tool, the worker's NATS listener and the dispatcher's
// API (both on loopback, on ports that are not egress ports) cannot be
// reached; an egress port can.
func TestNetworkToolCannotReachLocalServices(t *testing.T) {
	t.Parallel()
	probe := setup(t)
	need(t, probe, sandbox.MechLandlock)
	// A real NATS server with a loopback listener, as a worker's.
	nats, err := bus.StartEmbedded(t.Context(), bus.EmbeddedConfig{StoreDir: t.TempDir(), ListenAddr: "127.0.0.1:0",
		Users: []bus.User{{Name: "worker", Password: "a-password-the-tool-does-not-have"}}})
	require.NoError(t, err)
	t.Cleanup(nats.Server.Shutdown)
	natsURL, err := url.Parse(nats.ClientURL())
	require.NoError(t, err)
	// A real HTTP server, as the dispatcher's API.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(api.Close)
	apiURL, err := url.Parse(api.URL)
	require.NoError(t, err)
	// The egress port: a listener the tool may reach.
	egress, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = egress.Close() })
	go func() {
		for {
			c, err := egress.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	egressPort := egress.Addr().(*net.TCPAddr).Port

	// Loopback is allowed to the egress guard here, so that only the ports
	// keep the tool from NATS and the API (Landlock's rule on its own).
	e, err := sandbox.New(sandbox.Config{HostNetwork: true, EgressPorts: []uint16{uint16(egressPort)},
		EgressAllowNetworks: []string{"127.0.0.0/8"}})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.Close(ctx))
	})
	gaps := e.SpecIsolationGaps(spec(fixture("connect"), withNetwork))
	if slices.Contains(gaps, sandbox.GapLandlockNet) {
		testdeps.Missing(t, "", "Landlock cannot restrict TCP ports on this host")
	}

	text(t, e, spec(fixture("connect", "--", "127.0.0.1:"+strconv.Itoa(egressPort)), withNetwork), `{}`)
	for name, host := range map[string]string{"NATS": natsURL.Host, "API": apiURL.Host} {
		te := failure(t, e, spec(fixture("connect", "--", host), withNetwork), `{}`)
		require.Contains(t, te.Message, "permission denied", "connecting to the %s on %s", name, host)
	}
}
