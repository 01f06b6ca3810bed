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
}

// A connection whose server stops answering without closing it (a frozen
// process, a host or link that went silent: kill -9 closes the socket, a
// hang does not) is noticed only by unanswered PINGs: after maxPingsOut
// PINGs without a PONG, at the next tick, the client reconnects to
// another server. nats.go's defaults (every 2 minutes, 2 outstanding)
// leave a dispatcher publishing into a silent server for 4 to 6 minutes,
// refusing every call; every 3 s with 2 outstanding it moves after 6 to
// 9 s, about the time the cluster's remaining servers take to elect new
// stream leaders (their RAFT election timeout is 4 to 9 s), so the
// client is not what keeps admission stalled. The cost is a PING and a
// PONG every 3 s per connection, and a reconnect when a server cannot
// answer one for 6 s — when it would be losing its RAFT leaderships too.
// docs/reliability.md, "On a cluster", has the figures.
const (
	pingInterval = 3 * time.Second
	maxPingsOut  = 2
)

// Dial connects to an external server, reconnecting for ever.
func Dial(cfg ConnConfig, opts ...nats.Option) (*nats.Conn, error) {
	all := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(false),
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(maxPingsOut),
	}
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
	all = append(all, opts...)
	nc, err := nats.Connect(cfg.URL, all...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect %s: %w", redactURL(cfg.URL), err)
	}
	return nc, nil
}
