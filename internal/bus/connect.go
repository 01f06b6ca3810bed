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

// Dial connects to an external server, reconnecting for ever.
func Dial(cfg ConnConfig, opts ...nats.Option) (*nats.Conn, error) {
	all := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(false),
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
