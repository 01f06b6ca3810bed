package httpexec

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/toolwire/toolwire/internal/configvalue"
)

// Config configures an Executor. Its fields carry JSON tags so that it can
// be embedded in a worker's YAML configuration (sigs.k8s.io/yaml); the
// hooks at the end are for programs and tests only.
type Config struct {
	// Timeout bounds one request, from dial to the last byte of the body,
	// when the call's context has no earlier deadline. Default "60s".
	Timeout Duration `json:"timeout,omitempty"`
	// DialTimeout bounds one TCP connect (per resolved address) and the TLS
	// handshake. Default "10s".
	DialTimeout Duration `json:"dial_timeout,omitempty"`
	// MaxResponseBytes caps a response body, counted after decompression,
	// for tools whose HttpConfig.max_response_bytes is 0. Default 2097152
	// (2 MiB).
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	// MaxRedirects is how many redirects one request follows, each one
	// re-checked by the SSRF guard and the host and port allowlists.
	// Default 5; -1 follows none (a 3xx is then answered as PERMANENT).
	MaxRedirects int `json:"max_redirects,omitempty"`
	// AllowPorts are ports every tool may reach, in addition to its own
	// allow_ports (or, when a tool lists none, to 80 and 443). Default none.
	AllowPorts []int `json:"allow_ports,omitempty"`
	// AllowNetworks are CIDRs every tool may reach although they are
	// private, loopback or link-local, in addition to the tool's own
	// allow_networks. Default none.
	AllowNetworks []string `json:"allow_networks,omitempty"`
	// MaxIdleConnsPerHost bounds the idle keep-alive connections kept per
	// host. Default 16.
	MaxIdleConnsPerHost int `json:"max_idle_conns_per_host,omitempty"`
	// UserAgent is sent unless a tool's headers set one. Default
	// "toolwire-httpexec".
	UserAgent string `json:"user_agent,omitempty"`

	// Logger receives one Debug line per request (never headers or
	// bodies). Default slog.Default().
	Logger *slog.Logger `json:"-"`
	// Resolver resolves host names before the dial-time SSRF check sees
	// each address. Default net.DefaultResolver; tests substitute one that
	// maps names to chosen addresses.
	Resolver Resolver `json:"-"`
}

// Resolver looks up the addresses of a host; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// The defaults of Config.
const (
	DefaultTimeout             = 60 * time.Second
	DefaultDialTimeout         = 10 * time.Second
	DefaultMaxResponseBytes    = 2 << 20
	DefaultMaxRedirects        = 5
	DefaultMaxIdleConnsPerHost = 16
	DefaultUserAgent           = "toolwire-httpexec"
)

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Timeout = cmp.Or(c.Timeout, Duration(DefaultTimeout))
	c.DialTimeout = cmp.Or(c.DialTimeout, Duration(DefaultDialTimeout))
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, DefaultMaxResponseBytes)
	c.MaxRedirects = cmp.Or(c.MaxRedirects, DefaultMaxRedirects)
	c.MaxIdleConnsPerHost = cmp.Or(c.MaxIdleConnsPerHost, DefaultMaxIdleConnsPerHost)
	c.UserAgent = cmp.Or(c.UserAgent, DefaultUserAgent)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Resolver == nil {
		c.Resolver = net.DefaultResolver
	}
	return c
}

// Validate reports the first invalid field of c, by its JSON name. Zero
// values are valid (they mean the default).
func (c Config) Validate() error {
	switch {
	case c.Timeout < 0:
		return fmt.Errorf("httpexec: timeout %s: must not be negative", c.Timeout)
	case c.DialTimeout < 0:
		return fmt.Errorf("httpexec: dial_timeout %s: must not be negative", c.DialTimeout)
	case c.MaxResponseBytes < 0:
		return fmt.Errorf("httpexec: max_response_bytes %d: must not be negative", c.MaxResponseBytes)
	case c.MaxRedirects < -1:
		return fmt.Errorf("httpexec: max_redirects %d: must be -1 (none), 0 (default) or more", c.MaxRedirects)
	case c.MaxIdleConnsPerHost < 0:
		return fmt.Errorf("httpexec: max_idle_conns_per_host %d: must not be negative", c.MaxIdleConnsPerHost)
	}
	for _, p := range c.AllowPorts {
		if p < 1 || p > 65535 {
			return fmt.Errorf("httpexec: allow_ports: %d is not a port", p)
		}
	}
	for _, n := range c.AllowNetworks {
		if _, err := parseNetwork(n); err != nil {
			return fmt.Errorf("httpexec: allow_networks: %w", err)
		}
	}
	return nil
}

// Duration is a time.Duration written as a Go duration string ("30s") in
// JSON and YAML; see configvalue.Duration.
type Duration = configvalue.Duration
