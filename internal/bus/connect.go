package bus

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnConfig says how to reach an external NATS cluster.
type ConnConfig struct {
	// URL, or a comma-separated list of URLs.
	URL string
	// CredsFile is a credentials file; optional. Any of: a NATS user
	// credentials file (JWT and nkey seed), an nkey seed file (what a
	// dispatcher writes under <data>/credentials), or one "user:password"
	// line (what the Helm chart's bundled NATS hands out).
	CredsFile string
	// Name shown in the server's connection list.
	Name string
	// InboxPrefix of the connection's inboxes; "" = nats.go's _INBOX.
	// Give a role's connections InboxPrefix(cfg, role): the role's
	// permissions allow subscribing to those inboxes only.
	InboxPrefix string
	// Dialer, when set, opens the connection's sockets (and the watchdog's
	// probes of other servers): e.g. from a network namespace in the
	// fault tests. Nil = nats.go's own.
	Dialer nats.CustomDialer
	// Monitor logs and counts the connection's disconnects, reconnects
	// and changes of server, and steers the reconnects a Watchdog asks
	// for; one per connection. Nil: Dial makes one that logs to
	// slog.Default() and whose counts nobody reads (and no Watchdog can
	// be built for the connection).
	Monitor *ConnMonitor
}

// How a connection notices that its server went silent, and how long a
// silent server can hold it.
//
// A server that stops reading without closing the connection (a frozen
// process, a host or link that went silent: kill -9 closes the socket, a
// hang or a cut link does not) first lets the kernel's send buffer fill
// (about 1 MB, seconds under load); then nats.go's flusher blocks in
// Write while holding the connection's lock, and every publish, request,
// subscription and PING of the process waits behind it. nats.go bounds
// that Write by FlusherTimeout, 1 minute by default: a dispatcher froze
// for 54 s (issue 26). flusherTimeout bounds it to 1 s, and
// ReconnectOnFlusherError makes a Write that fails (timed out, or a reset
// connection) leave the server at once instead of waiting for the PINGs.
// A Write returns as soon as the kernel takes the bytes, so it lasts 1 s
// only when the server has read nothing for a second with a full buffer
// — a server that is not reading, or a link slower than about 8 Mbit/s
// for a 1 MB message (NATS's default max_payload). The cost of a false
// alarm is one reconnect and what was buffered, which nats.go drops on any
// failed write anyway: a JetStream publish then gets no ack and is sent
// again under its message id, a request times out.
//
// PINGs find a silent server whatever the traffic: after maxPingsOut
// PINGs without a PONG, at the next tick, the client reconnects to
// another server. nats.go's defaults (every 2 minutes, 2 outstanding)
// leave a client on a silent server for 4 to 6 minutes; every 3 s with 2
// outstanding it moves after 6 to 9 s. The PINGs are the backstop of
// every connection, the embedded server's clients and single-URL ones
// included; on a cluster the Watchdog (watchdog.go) moves a connection
// within a second when another server answers (about 2 s otherwise), and
// also off a server that answers PINGs but whose JetStream cannot answer
// (cut from its cluster). PINGs are not made
// faster: a PING waits for the connection's lock like any write, and a
// 2-core machine under load can delay a PONG by a second, which would
// reconnect every connection of a busy process. The cost is a PING and a
// PONG every 3 s per connection. docs/reliability.md, "On a cluster" and
// "Leaving a silent server", has the figures.
const (
	pingInterval   = 3 * time.Second
	maxPingsOut    = 2
	flusherTimeout = time.Second
)

// Dial connects to an external server, reconnecting for ever. The
// connection's disconnects, reconnects and changes of server are logged
// and counted by cfg.Monitor.
func Dial(cfg ConnConfig, opts ...nats.Option) (*nats.Conn, error) {
	mon := cfg.Monitor
	if mon == nil {
		mon = NewConnMonitor(nil)
	}
	all, err := baseOptions(cfg)
	if err != nil {
		return nil, err
	}
	all = append(all,
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(false),
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(maxPingsOut),
		nats.FlusherTimeout(flusherTimeout),
		nats.ReconnectOnFlusherError(),
	)
	all = append(all, mon.options()...)
	mon.socket = newSocketDialer(cfg.Dialer)
	all = append(all, nats.SetCustomDialer(mon.socket))
	all = append(all, opts...)
	nc, err := nats.Connect(cfg.URL, all...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect %s: %w", redactURL(cfg.URL), err)
	}
	mon.connected(nc)
	return nc, nil
}

// baseOptions are the options every connection of cfg has, its
// Watchdog's probes included: name, credentials, inboxes.
func baseOptions(cfg ConnConfig) ([]nats.Option, error) {
	all := []nats.Option{nats.Name(cfg.Name)}
	if cfg.CredsFile != "" {
		opt, err := credsOption(cfg.CredsFile)
		if err != nil {
			return nil, err
		}
		all = append(all, opt)
	}
	if cfg.InboxPrefix != "" {
		all = append(all, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	if cfg.Dialer != nil {
		all = append(all, nats.SetCustomDialer(cfg.Dialer))
	}
	return all, nil
}
