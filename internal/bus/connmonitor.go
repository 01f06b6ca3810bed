package bus

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnMonitor is what Dial tells of a connection's life: it logs every
// disconnect (warn), reconnect (info, warn when the server changed) and
// asynchronous error (warn), counts them, and steers the next reconnect
// to the server a Watchdog chose. URLs are logged without credentials.
// Give each connection its own; the counts are safe to read at any time
// (telemetry.NewConnCollector exports them to Prometheus).
type ConnMonitor struct {
	log *slog.Logger

	disconnects, reconnects, serverChanges, moves atomic.Uint64

	mu     sync.Mutex
	server serverRef // the server connected now (or last)
	since  time.Time // when the connection was lost; zero while connected
	target string    // host[:port] the next reconnect goes to; "" = nats.go's choice

	socket *socketDialer // the connection's sockets (set by Dial)
}

// serverRef names a server a connection is (or was) connected to.
type serverRef struct {
	id, name, url string // url without credentials
}

// NewConnMonitor returns a monitor that logs to log (nil =
// slog.Default()).
func NewConnMonitor(log *slog.Logger) *ConnMonitor {
	return &ConnMonitor{log: cmp.Or(log, slog.Default())}
}

// Disconnects counts the times the connection lost its server (a closed
// socket, unanswered PINGs, a write that timed out, a Watchdog's move).
func (m *ConnMonitor) Disconnects() uint64 { return m.disconnects.Load() }

// Reconnects counts the times the connection was established again.
func (m *ConnMonitor) Reconnects() uint64 { return m.reconnects.Load() }

// ServerChanges counts the reconnects that landed on another server than
// the one left (another server_name; a server without one is named by its
// id, which changes when it restarts).
func (m *ConnMonitor) ServerChanges() uint64 { return m.serverChanges.Load() }

// Moves counts the times a Watchdog moved the connection off an
// unhealthy server.
func (m *ConnMonitor) Moves() uint64 { return m.moves.Load() }

// options are the handlers Dial installs.
func (m *ConnMonitor) options() []nats.Option {
	return []nats.Option{
		nats.DisconnectErrHandler(m.disconnected),
		nats.ReconnectHandler(m.reconnected),
		nats.ReconnectErrHandler(m.reconnectFailed),
		nats.ErrorHandler(m.asyncError),
		nats.ReconnectToServer(m.pick),
	}
}

// current returns the server the connection is (or was last) on.
func (m *ConnMonitor) current() serverRef {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.server
}

// connected records the server of a new connection.
func (m *ConnMonitor) connected(nc *nats.Conn) {
	s := refOf(nc)
	m.mu.Lock()
	m.server = s
	m.mu.Unlock()
	m.log.Debug("NATS connected", "server", s.url, "server_name", s.name)
}

func refOf(nc *nats.Conn) serverRef {
	// redactURL, not nats.go's ConnectedUrlRedacted, which keeps the user
	// name: a token given as the URL's user would be logged.
	return serverRef{id: nc.ConnectedServerId(), name: nc.ConnectedServerName(), url: redactURL(nc.ConnectedUrl())}
}

func (m *ConnMonitor) disconnected(nc *nats.Conn, err error) {
	if nc.IsClosed() { // closed by its owner: not a disconnect
		return
	}
	m.disconnects.Add(1)
	m.mu.Lock()
	s := m.server
	m.since = time.Now()
	m.mu.Unlock()
	level := slog.LevelWarn
	if asked := m.socket.askedFor(); asked || err == nil { // a move asked for (a Watchdog closed the socket, or ForceReconnect)
		level = slog.LevelInfo
	}
	m.log.Log(context.Background(), level, "NATS connection lost; reconnecting", "server", s.url, "server_name", s.name, "err", err)
}

func (m *ConnMonitor) reconnected(nc *nats.Conn) {
	m.reconnects.Add(1)
	s := refOf(nc)
	m.mu.Lock()
	prev, since := m.server, m.since
	m.server, m.since = s, time.Time{}
	m.mu.Unlock()
	args := []any{"server", s.url, "server_name", s.name, "previous", prev.url, "previous_name", prev.name}
	if !since.IsZero() {
		args = append(args, "down", time.Since(since).Round(time.Millisecond).String())
	}
	if s.name != prev.name { // server_name: the same after a restart (it defaults to the id)
		m.serverChanges.Add(1)
		m.log.Warn("NATS connection moved to another server", args...)
		return
	}
	m.log.Info("NATS connection re-established", args...)
}

func (m *ConnMonitor) reconnectFailed(_ *nats.Conn, err error) {
	m.log.Debug("NATS reconnect attempt failed", "err", err)
}

func (m *ConnMonitor) asyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	if sub != nil {
		m.log.Warn("NATS asynchronous error", "subject", sub.Subject, "err", err)
		return
	}
	m.log.Warn("NATS asynchronous error", "err", err)
}

// down reports whether the connection is lost and not yet back.
func (m *ConnMonitor) down() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.since.IsZero()
}

// steer makes the next reconnect go to host (host:port, as in
// nats.Conn.Servers), once.
func (m *ConnMonitor) steer(host string) {
	m.mu.Lock()
	m.target = host
	m.mu.Unlock()
}

// pick is nats.go's ReconnectToServer callback: the server steer named,
// once; otherwise nats.go's own choice (the next server of its pool, never
// the one just left while there is another).
func (m *ConnMonitor) pick(servers []nats.Server, _ nats.ServerInfo) (*nats.Server, time.Duration) {
	m.mu.Lock()
	target := m.target
	m.target = ""
	m.mu.Unlock()
	if target == "" {
		return nil, 0
	}
	for i := range servers {
		if servers[i].URL != nil && servers[i].URL.Host == target {
			return &servers[i], 0
		}
	}
	return nil, 0
}
