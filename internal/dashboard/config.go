package dashboard

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/callindex"
	"github.com/toolwire/toolwire/internal/dlq"
	"github.com/toolwire/toolwire/internal/identity"
)

// DefaultSessionTTL is how long a sign-in lasts when Config.SessionTTL is
// 0.
const DefaultSessionTTL = 12 * time.Hour

// Config configures a dashboard.
type Config struct {
	// Core is the dispatcher the dashboard acts through. Required.
	Core Core
	// Approvals is the approval flow of that dispatcher. Required.
	Approvals Approvals
	// Auth checks the API key a user signs in with, and again on every
	// request (a key removed from the key file signs its sessions out).
	// Required.
	Auth identity.Authenticator
	// Registry is the dispatcher's copy of the registry. Required.
	Registry Registry
	// Streams are the streams and buckets the pages read. Required.
	Streams Streams
	// Secret seals the session cookie (32 bytes or more). Replicas behind
	// one address need the same secret; nil = a random one per process
	// (a session then holds on the replica that made it only).
	Secret []byte
	// IndexCalls is the most calls the calls index keeps (newest).
	// 0 = callindex.DefaultMax (1,000,000); negative is refused.
	IndexCalls int
	// SessionTTL is how long a sign-in lasts. 0 = DefaultSessionTTL
	// (12h); negative, or over MaxSessionTTL (24h55m), is refused.
	SessionTTL time.Duration
	// TraceURL links a call's trace id to a tracing UI: an http(s) URL
	// with {trace_id} where the id goes (e.g.
	// https://jaeger.example/trace/{trace_id}); "" shows the id only.
	TraceURL string
	// AgentVisibility is the installation's setting of which calls of its
	// tenant a key sees (dispatch.Config.AgentVisibility: give both the
	// same): identity.VisibilityTenant (default) or identity.VisibilityOwn
	// (an agent's own calls, on the calls pages, the call pages and dead
	// letters; the admin and approve scopes see the whole tenant).
	AgentVisibility identity.Visibility
	// Logger is the dashboard's (its calls index logs as component
	// ui-index). Nil = slog.Default().
	Logger *slog.Logger
}

// Streams are the installation's streams and buckets the dashboard reads
// (the process opens them: bus.Bus, audit.Open, dlq.Open).
type Streams struct {
	// Calls and Results are the CALLS and RESULTS streams: the calls
	// index follows both, and the pools page reads a worker's last
	// result from Results.
	Calls, Results jetstream.Stream
	// Events is the EVENTS stream: the calls index keeps the calls
	// admission refused (their REJECTED events), and a refused call's
	// page reads its refusal from it. Nil = refused calls are not shown.
	Events jetstream.Stream
	// Registry is the registry bucket: a tool's published versions.
	Registry jetstream.KeyValue
	// Subjects are the installation's subjects.
	Subjects bus.Subjects
	// Audit reads one call's timeline (its call, events and result).
	Audit *audit.Source
	// DLQ reads and retries dead letters.
	DLQ *dlq.Queue
	// Revocations is the bucket of sign-outs (bus.Bus.Revocations): one
	// record per API key, which ends that key's sessions issued before it
	// on every replica.
	Revocations jetstream.KeyValue
	// Conn is the connection the streams and buckets are read over (and
	// sign-outs written over): while it is down, a session not already
	// known as signed out is refused (its state is unknown).
	Conn *nats.Conn
	// ListPoolKeys lets the pages skip a result's claim check for a pool
	// with one enrolled key, as the dispatcher does where it lists them
	// (signing.Keyring.ListPoolKeys; the credential must list the
	// registry bucket's keys): else every result signed by a pool's key
	// costs a read of its call's events, when the calls index is built
	// too.
	ListPoolKeys bool
}

// WithDefaults returns a copy of c with every zero field that has a
// default set to it.
func (c Config) WithDefaults() Config {
	c.IndexCalls = cmp.Or(c.IndexCalls, callindex.DefaultMax)
	c.SessionTTL = cmp.Or(c.SessionTTL, DefaultSessionTTL)
	c.AgentVisibility = cmp.Or(c.AgentVisibility, identity.VisibilityTenant)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate reports the first field of c that is invalid, naming it.
func (c Config) Validate() error {
	switch {
	case c.Core == nil:
		return errors.New("dashboard: Core is required")
	case c.Approvals == nil:
		return errors.New("dashboard: Approvals is required")
	case c.Auth == nil:
		return errors.New("dashboard: Auth is required")
	case c.Registry == nil:
		return errors.New("dashboard: Registry is required")
	case c.Streams.Calls == nil || c.Streams.Results == nil || c.Streams.Registry == nil || c.Streams.Audit == nil || c.Streams.DLQ == nil:
		return errors.New("dashboard: Streams needs Calls, Results, Registry, Audit and DLQ")
	case c.Streams.Revocations == nil || c.Streams.Conn == nil:
		return errors.New("dashboard: Streams needs Revocations and Conn (sign-outs every replica honours)")
	case len(c.Secret) > 0 && len(c.Secret) < 32:
		return fmt.Errorf("dashboard: Secret is %d bytes; it must be 32 bytes or more", len(c.Secret))
	case c.IndexCalls < 0:
		return fmt.Errorf("dashboard: IndexCalls %d is negative", c.IndexCalls)
	case c.AgentVisibility.Validate() != nil:
		return fmt.Errorf("dashboard: AgentVisibility: %w", c.AgentVisibility.Validate())
	case c.SessionTTL < 0:
		return fmt.Errorf("dashboard: SessionTTL %s is negative", c.SessionTTL)
	case c.SessionTTL > MaxSessionTTL:
		return fmt.Errorf("dashboard: SessionTTL %s is over %s (a sign-out must outlive the sessions it ends)", c.SessionTTL, MaxSessionTTL)
	}
	return checkTraceURL(c.TraceURL)
}
