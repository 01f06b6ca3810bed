package mcpserver

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/url"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/profiles"
)

// Defaults of Config.
const (
	DefaultPageSize         = 100
	DefaultTaskAfter        = time.Second
	DefaultTaskPollInterval = time.Second
)

// Config shapes a Server.
type Config struct {
	// Version is the server's version in its implementation info; empty =
	// the binary's module version ("devel" when it has none).
	Version string
	// PublicURL is the endpoint's origin as clients reach it
	// (scheme://host[:port], e.g. behind a TLS proxy); the protected
	// resource metadata and the 401 challenge name it. Empty = the origin
	// each request reached.
	PublicURL string
	// AllowedOrigins are the browser origins (scheme://host[:port]) allowed
	// besides the endpoint's own; a request with any other Origin header is
	// refused 403 (DNS rebinding protection). Empty = none.
	AllowedOrigins []string
	// PageSize bounds the tools of one tools/list page; 0 =
	// DefaultPageSize (100); negative is refused.
	PageSize int
	// MaxRequestBytes bounds a request body; 0 = the dispatcher's
	// (dispatch.Config.MaxRequestBytes, read by New); negative is refused.
	MaxRequestBytes int64
	// TaskAfter is how long a tools/call of a client that declared the
	// Tasks extension waits for the call's result before it answers the
	// call as a task; 0 = DefaultTaskAfter (1s); negative is refused.
	TaskAfter time.Duration
	// TaskPollInterval is the poll interval a task suggests; 0 =
	// DefaultTaskPollInterval (1s); negative is refused.
	TaskPollInterval time.Duration
	// Tasks is the tasks bucket (bus.Bus.Tasks) the endpoint keeps its
	// tasks in; nil = the Tasks extension is not offered.
	Tasks jetstream.KeyValue
	// Bus is the installation's bus: the replicas pass each other the
	// notifications/cancelled that name a request another replica serves
	// (on <prefix>.mcp.cancelled; cancelled.go). Nil = a
	// notifications/cancelled reaches only the requests of the replica it
	// is sent to.
	Bus *bus.Bus
	// Extra is what an embedding program serves besides the fleet's
	// tools; nil = nothing.
	Extra *Extra
	// Profiles are the client profiles the endpoint renders tools/list and
	// tools/call with (profile.go; docs/mcp.md, "Client profiles"); nil =
	// the shipped ones (profiles.Shipped).
	Profiles *profiles.Set
	// Logger is the endpoint's and its SDK's. Nil = no logs.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every zero field that has a
// default set to it (MaxRequestBytes excepted: its default is the
// dispatcher's, which New reads).
func (c Config) WithDefaults() Config {
	c.Version = cmp.Or(c.Version, buildVersion())
	c.PageSize = cmp.Or(c.PageSize, DefaultPageSize)
	c.TaskAfter = cmp.Or(c.TaskAfter, DefaultTaskAfter)
	c.TaskPollInterval = cmp.Or(c.TaskPollInterval, DefaultTaskPollInterval)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.Profiles == nil {
		c.Profiles = profiles.Shipped()
	}
	return c
}

// Validate reports the first field of c that is invalid, naming it.
func (c Config) Validate() error {
	switch {
	case c.PageSize < 0:
		return fmt.Errorf("mcpserver: PageSize %d is negative", c.PageSize)
	case c.MaxRequestBytes < 0:
		return fmt.Errorf("mcpserver: MaxRequestBytes %d is negative", c.MaxRequestBytes)
	case c.TaskAfter < 0:
		return fmt.Errorf("mcpserver: TaskAfter %s is negative", c.TaskAfter)
	case c.TaskPollInterval < 0:
		return fmt.Errorf("mcpserver: TaskPollInterval %s is negative", c.TaskPollInterval)
	case c.PublicURL != "" && !isOrigin(c.PublicURL):
		return fmt.Errorf("mcpserver: PublicURL %q is not an origin (scheme://host[:port])", c.PublicURL)
	}
	for _, o := range c.AllowedOrigins {
		if !isOrigin(o) {
			return fmt.Errorf("mcpserver: AllowedOrigins: %q is not an origin (scheme://host[:port])", o)
		}
	}
	return nil
}

// isOrigin reports whether s is scheme://host[:port], with a trailing
// slash or none.
func isOrigin(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Host != "" && (u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.Fragment == ""
}

// buildVersion is the binary's module version, or "devel".
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}
