package dispatchd_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/internal/logtest"
)

var natsPortRe = regexp.MustCompile(`"client_url":"nats://[^":]+:(\d+)"`)

// runListening runs a dispatcher with an embedded NATS listener on listen
// until stop is called, and returns its NATS port.
func runListening(t *testing.T, data, listen string, logs *logtest.Buffer) (port string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: data, HTTPAddr: "127.0.0.1:0", NATSListen: listen, Workers: "none",
			Grace: 5 * time.Second, Ready: ready, Logger: logs.JSONLogger()})
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			require.NoError(t, <-done)
		}
	}
	t.Cleanup(stop)
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("dispatcher stopped: %v", err)
	}
	m := natsPortRe.FindStringSubmatch(logs.String())
	require.NotNil(t, m, logs.String())
	return m[1], stop
}

// The credentials of the listener are made once and reused; a listener
// on every interface gets them too (and a warning), never an open door.
func TestNATSListenerCredentialsAreMadeOnceAndRequired(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	dir := bus.CredentialsDir(data)
	var first logtest.Buffer
	_, stop := runListening(t, data, "127.0.0.1:0", &first)
	stop()
	require.Contains(t, first.String(), `"created":"worker,operator"`)
	seeds := map[string]string{}
	for _, role := range bus.Roles() {
		b, err := os.ReadFile(bus.CredentialsFile(dir, role))
		require.NoError(t, err)
		seeds[role] = string(b)
		require.NotContains(t, first.String(), strings.TrimSpace(string(b)))
	}

	var second logtest.Buffer
	port, _ := runListening(t, data, "0.0.0.0:0", &second)
	require.NotContains(t, second.String(), `"created"`)
	require.Contains(t, second.String(), "not on loopback")
	for _, role := range bus.Roles() {
		b, err := os.ReadFile(bus.CredentialsFile(dir, role))
		require.NoError(t, err)
		require.Equal(t, seeds[role], string(b), "%s credentials are reused", role)
	}
	url := "nats://127.0.0.1:" + port
	_, err := nats.Connect(url, nats.MaxReconnects(0))
	require.ErrorIs(t, err, nats.ErrAuthorization)
	nc, err := bus.Dial(bus.ConnConfig{URL: url, CredsFile: bus.CredentialsFile(dir, bus.RoleOperator)}, nats.MaxReconnects(0))
	require.NoError(t, err)
	nc.Close()
}

// Credentials others may read stop the dispatcher instead of being used.
func TestNATSListenerRefusesExposedCredentials(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	_, _, err := bus.EnsureCredentials(bus.CredentialsDir(data))
	require.NoError(t, err)
	require.NoError(t, os.Chmod(bus.CredentialsFile(bus.CredentialsDir(data), bus.RoleWorker), 0o644))
	err = dispatchd.Run(t.Context(), dispatchd.RunConfig{DataDir: data, HTTPAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0",
		Workers: "none", Logger: (&logtest.Buffer{}).JSONLogger()})
	require.ErrorContains(t, err, "chmod 600")
}
