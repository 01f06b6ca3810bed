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
	// CredsFile is a NATS credentials file (JWT + nkey seed); optional.
	CredsFile string
	// Name shown in the server's connection list.
	Name string
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
		all = append(all, nats.UserCredentials(cfg.CredsFile))
	}
	all = append(all, opts...)
	nc, err := nats.Connect(cfg.URL, all...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect %s: %w", redactURL(cfg.URL), err)
	}
	return nc, nil
}
