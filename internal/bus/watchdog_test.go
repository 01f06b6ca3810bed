package bus_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/logtest"
)

// startServer starts a nats-server on a random loopback port, with
// JetStream or without (a server whose JetStream API nobody answers), and
// with a user when user is not empty.
func startServer(t *testing.T, jetStream bool, user string) *server.Server {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true, JetStream: jetStream,
		ServerName: fmt.Sprintf("s-%t-%d", jetStream, time.Now().UnixNano())}
	if jetStream {
		opts.StoreDir = t.TempDir()
	}
	if user != "" {
		opts.Username, opts.Password = user, "s3cret-"+user
	}
	return runNATSServer(t, opts)
}

func runNATSServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	s.Start()
	t.Cleanup(s.Shutdown)
	require.True(t, s.ReadyForConnections(10*time.Second), "server not ready")
	return s
}

// watched dials urls (in this order) with a monitor logging into a buffer,
// and starts a watchdog with fast probes.
func watched(t *testing.T, urls ...string) (*nats.Conn, *bus.ConnMonitor, *logtest.Buffer) {
	t.Helper()
	return watchedWith(t, bus.WatchdogConfig{Period: 100 * time.Millisecond}, urls...)
}

// watchedWith is watched with the watchdog configured by cfg.
func watchedWith(t *testing.T, cfg bus.WatchdogConfig, urls ...string) (*nats.Conn, *bus.ConnMonitor, *logtest.Buffer) {
	t.Helper()
	logs := &logtest.Buffer{}
	mon := bus.NewConnMonitor(logs.JSONLogger())
	conn := bus.ConnConfig{URL: strings.Join(urls, ","), Name: t.Name(), Monitor: mon}
	nc, err := bus.Dial(conn, nats.DontRandomize())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	wd, err := bus.NewWatchdog(nc, conn, cfg)
	require.NoError(t, err)
	require.NoError(t, wd.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, wd.Stop(context.Background())) })
	return nc, mon, logs
}

// eventually polls cond every 20 ms until it holds, failing after wait.
func eventually(t *testing.T, wait time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not after %s: %s", wait, what)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

func TestWatchdogMovesOffAServerWhoseJetStreamFails(t *testing.T) {
	t.Parallel()
	sick, healthy := startServer(t, false, ""), startServer(t, true, "")
	nc, mon, logs := watched(t, sick.ClientURL(), healthy.ClientURL())
	require.Equal(t, sick.ID(), nc.ConnectedServerId(), "connected to the first URL")

	eventually(t, 10*time.Second, func() bool { return nc.ConnectedServerId() == healthy.ID() }, "moved to the healthy server")
	eventually(t, 5*time.Second, func() bool {
		return mon.Reconnects() == 1 && strings.Contains(logs.String(), "NATS connection moved to another server")
	}, "reconnect counted and logged")
	require.EqualValues(t, 1, mon.Moves())
	require.EqualValues(t, 1, mon.Disconnects())
	require.EqualValues(t, 1, mon.ServerChanges())
	require.Contains(t, logs.String(), "moving the NATS connection off an unhealthy server")
	require.Contains(t, logs.String(), `"reason":"jetstream"`)
	require.Contains(t, logs.String(), "NATS connection moved to another server")

	// Healthy now: it stays.
	_, err := nc.Request("$JS.API.INFO", nil, 5*time.Second)
	require.NoError(t, err)
	require.EqualValues(t, 1, mon.Moves())
}

// A server cut from its cluster but not from its clients answers PINGs
// while its JetStream API stays silent (requests are routed to leaders it
// cannot reach). The watchdog leaves it as soon as another server answers
// a whole probe, not after Failures probes have timed out: here those
// would take a minute, and the move must come well before.
func TestWatchdogLeavesAServerWhoseJetStreamIsSilentWithoutWaitingForTimeouts(t *testing.T) {
	t.Parallel()
	sick, healthy := startServer(t, false, ""), startServer(t, true, "")
	// Someone takes the sick server's JetStream API requests and never
	// answers: no "no responders", just silence.
	swallow, err := nats.Connect(sick.ClientURL())
	require.NoError(t, err)
	t.Cleanup(swallow.Close)
	_, err = swallow.Subscribe("$JS.API.>", func(*nats.Msg) {})
	require.NoError(t, err)
	require.NoError(t, swallow.Flush())

	cfg := bus.WatchdogConfig{Period: 100 * time.Millisecond, Timeout: 30 * time.Second, Failures: 2}
	nc, mon, logs := watchedWith(t, cfg, sick.ClientURL(), healthy.ClientURL())
	eventually(t, 20*time.Second, func() bool { return nc.ConnectedServerId() == healthy.ID() }, "moved to the healthy server")
	require.EqualValues(t, 1, mon.Moves())
	require.Contains(t, logs.String(), "silent while another server answered")
}

// A server that goes silent without closing the connection (a frozen
// process, a link down) answers no PING and sends nothing. The watchdog
// leaves it as soon as another server answers a whole probe — long
// before Failures probes could time out, and before the PINGs (6 to 9 s)
// would.
func TestWatchdogLeavesASilentServerWithoutWaitingForTimeouts(t *testing.T) {
	t.Parallel()
	sick, healthy := startServer(t, true, ""), startServer(t, true, "")
	link := bustest.StartProxy(t, strings.TrimPrefix(sick.ClientURL(), "nats://"))
	cfg := bus.WatchdogConfig{Period: 100 * time.Millisecond, Timeout: 30 * time.Second, Failures: 2}
	nc, mon, logs := watchedWith(t, cfg, "nats://"+link.Addr(), healthy.ClientURL())
	require.Equal(t, sick.ID(), nc.ConnectedServerId())
	// Healthy first: probes pass and nothing moves.
	_, err := nc.Request("$JS.API.INFO", nil, 5*time.Second)
	require.NoError(t, err)

	link.SetMuted(true)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	eventually(t, 5*time.Second, func() bool { return nc.ConnectedServerId() == healthy.ID() }, "moved to the healthy server")
	require.EqualValues(t, 1, mon.Moves())
	require.Contains(t, logs.String(), "silent while another server answered")
}

func TestWatchdogStaysWhenNoOtherServerIsHealthier(t *testing.T) {
	t.Parallel()
	for name, other := range map[string]func(t *testing.T) string{
		"other without JetStream": func(t *testing.T) string { return startServer(t, false, "").ClientURL() },
		"other unreachable": func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			addr := ln.Addr().String()
			require.NoError(t, ln.Close()) // nothing listens there now
			return "nats://" + addr
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sick := startServer(t, false, "")
			nc, mon, logs := watched(t, sick.ClientURL(), other(t))
			eventually(t, 10*time.Second, func() bool {
				return strings.Contains(logs.String(), "no other server of the cluster is healthier; staying")
			}, "the watchdog judged and stayed")
			require.EqualValues(t, 0, mon.Moves())
			require.EqualValues(t, 0, mon.Disconnects())
			require.Equal(t, sick.ID(), nc.ConnectedServerId())
		})
	}
}

func TestConnMonitorLogsAndCountsReconnectsWithoutCredentials(t *testing.T) {
	t.Parallel()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true, ServerName: "named",
		Username: "alice", Password: "s3cret-alice"}
	s := runNATSServer(t, opts)
	port := s.Addr().(*net.TCPAddr).Port
	logs := &logtest.Buffer{}
	mon := bus.NewConnMonitor(logs.JSONLogger())
	nc, err := bus.Dial(bus.ConnConfig{URL: fmt.Sprintf("nats://alice:s3cret-alice@127.0.0.1:%d", port), Name: t.Name(), Monitor: mon})
	require.NoError(t, err)
	t.Cleanup(nc.Close)

	s.Shutdown() // the same server, restarted on its port
	s.WaitForShutdown()
	eventually(t, 10*time.Second, func() bool { return mon.Disconnects() == 1 }, "disconnect counted")
	restarted := *opts
	restarted.Port = port
	runNATSServer(t, &restarted)
	eventually(t, 10*time.Second, func() bool {
		return mon.Reconnects() == 1 && strings.Contains(logs.String(), "NATS connection re-established")
	}, "reconnect counted and logged")
	require.EqualValues(t, 0, mon.ServerChanges(), "the same server_name")
	require.EqualValues(t, 0, mon.Moves())

	out := logs.String()
	require.Contains(t, out, "NATS connection lost; reconnecting")
	require.Contains(t, out, "NATS connection re-established")
	require.Contains(t, out, fmt.Sprintf("127.0.0.1:%d", port))
	require.NotContains(t, out, "s3cret", "no password in the logs")
	require.NotContains(t, out, "alice", "no user in the logs (a token may be given as the user)")

	nc.Close()
	require.EqualValues(t, 1, mon.Disconnects(), "closing is no disconnect")
}

func TestWatchdogConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, bus.WatchdogConfig{}.WithDefaults().Validate())
	for _, c := range []bus.WatchdogConfig{{Period: -1}, {Timeout: -1}, {Failures: -1}, {MoveBurst: -1}, {MoveRefill: -1}} {
		require.Error(t, c.WithDefaults().Validate(), "%+v", c)
	}
	_, err := bus.NewWatchdog(nil, bus.ConnConfig{}, bus.WatchdogConfig{})
	require.Error(t, err, "a watchdog needs the connection's monitor")
}
