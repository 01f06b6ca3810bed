package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoInstallation is returned by OpenView when the server has no
// toolwire layout with the given prefix (a stream of the view is missing).
var ErrNoInstallation = errors.New("bus: no toolwire installation")

// View is a read-only view of one installation: the streams and the
// registry bucket that the operator's tools (internal/audit, internal/dlq,
// internal/replay) read, looked up once by OpenView. Nothing in it creates
// or changes a stream or a bucket; what a tool publishes (a DLQ retry
// request, a replay on a shadow subject) it publishes through JS itself.
type View struct {
	Config   Config
	Subjects Subjects
	NC       *nats.Conn
	JS       jetstream.JetStream

	Calls, Results, Events, DLQ jetstream.Stream
	// Registry is the registry bucket; nil when it could not be opened
	// (RegistryErr says why): the DLQ reads it when it can, audit and
	// replay need it.
	Registry    jetstream.KeyValue
	RegistryErr error
}

// OpenView attaches to the installation whose subjects and streams start
// with prefix ("" = the default, toolwire) on nc, which the caller keeps
// owning. It looks the streams CALLS, RESULTS, EVENTS and DLQ and the
// registry bucket up, and creates and changes nothing: the operator role
// (RoleOperator) may look every one of them up. It returns an error
// matching ErrNoInstallation, naming every missing stream, when a stream
// is missing, or the error of reaching JetStream. A registry bucket that
// cannot be opened is not an error here (View.RegistryErr).
func OpenView(ctx context.Context, nc *nats.Conn, prefix string) (*View, error) {
	cfg := Config{Prefix: prefix}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("bus: jetstream: %w", err)
	}
	v := &View{Config: cfg, Subjects: cfg.Subjects(), NC: nc, JS: js}
	var missing []string
	for _, st := range []struct {
		dst  *jetstream.Stream
		name string
	}{{&v.Calls, cfg.CallsStream()}, {&v.Results, cfg.ResultsStream()}, {&v.Events, cfg.EventsStream()}, {&v.DLQ, cfg.DLQStream()}} {
		s, err := js.Stream(ctx, st.name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			missing = append(missing, "stream "+st.name+" not found")
			continue
		case err != nil:
			return nil, fmt.Errorf("bus: stream %s: %w", st.name, err)
		}
		*st.dst = s
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w with prefix %q: %s", ErrNoInstallation, cfg.Prefix, strings.Join(missing, "; "))
	}
	if v.Registry, err = js.KeyValue(ctx, cfg.RegistryBucket()); err != nil {
		v.Registry, v.RegistryErr = nil, fmt.Errorf("bus: bucket %s: %w", cfg.RegistryBucket(), err)
	}
	return v, nil
}
