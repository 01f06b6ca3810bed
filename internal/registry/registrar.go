package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// Registrar checks workers' announcements and writes the registry: the
// one writer of tool specs, sources and first-use approvals. Dispatchers
// run one behind bus.RegistrySubject (Service); a dispatcher's in-process
// workers use it directly. Safe for concurrent use.
type Registrar struct {
	b     *bus.Bus
	kv    jetstream.KeyValue
	calls jetstream.Stream
	cfg   bus.Config
	log   *slog.Logger
	// trust says which worker keys announcements over NATS may enrol;
	// by names the dispatcher in enrolment records.
	trust    *signing.Trust
	by       string
	enrolled sync.Map // enrolment keys known to exist
}

// NewRegistrar returns the Registrar of b's registry bucket. Its
// Announce is for in-process workers, whose signing keys it enrols
// without asking trust; Service uses trust for announcements over NATS
// (nil: none are enrolled, keys already enrolled still pass). by names
// the dispatcher in enrolment records.
func NewRegistrar(b *bus.Bus, log *slog.Logger, trust *signing.Trust, by string) *Registrar {
	return &Registrar{b: b, kv: b.Registry, calls: b.Calls, cfg: b.Config, log: cmp.Or(log, slog.Default()).With("component", "registrar"),
		trust: trust, by: cmp.Or(by, "a dispatcher")}
}

// Announce checks a and writes it (see the package doc, "Announcements"):
// the spec must be valid, of the pool's executor type, and carry the
// version of its content or none; a claim follows Claim's rules. It is
// the in-process workers' entry: their signing key is enrolled as is.
func (r *Registrar) Announce(ctx context.Context, a Announcement) (Announced, error) {
	return r.announce(ctx, a, true)
}

func (r *Registrar) announce(ctx context.Context, a Announcement, inProcess bool) (Announced, error) {
	if err := bus.CheckPoolName(a.Pool, a.Type); err != nil {
		return Announced{}, &RefusedError{Reason: err.Error()}
	}
	if err := r.enrol(ctx, a, inProcess); err != nil {
		return Announced{}, err
	}
	switch a.Op {
	case OpApprove:
		return r.approve(ctx, a)
	case OpEnsure:
		return r.ensure(ctx, a, inProcess)
	}
	spec, err := r.check(ctx, a)
	if err != nil {
		return Announced{}, err
	}
	done := Announced{Version: spec.Version}
	if a.Op == OpVersions {
		return done, r.writeVersion(ctx, spec)
	}
	src := Source{Pool: a.Pool, Subject: r.cfg.Subjects().ToolSubject(spec.Executor, spec.Provider, spec.Name), Worker: a.Worker}
	if err := Claim(ctx, r.kv, spec, src, ClaimOptions{Held: r.poolServes}); err != nil {
		return Announced{}, err
	}
	if a.Op == OpClaim {
		return done, nil
	}
	if err := r.writeVersion(ctx, spec); err != nil {
		return Announced{}, err
	}
	return done, r.writeCurrent(ctx, spec)
}

// check decodes and checks the spec of a and returns it stamped.
func (r *Registrar) check(ctx context.Context, a Announcement) (*toolwirev1.ToolSpec, error) {
	var spec toolwirev1.ToolSpec
	if err := proto.Unmarshal(a.Spec, &spec); err != nil {
		return nil, &RefusedError{Reason: "the spec does not decode: " + err.Error()}
	}
	refuse := func(format string, args ...any) error {
		return &RefusedError{Tool: spec.GetName(), Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case a.Op != OpClaim && a.Op != OpPublish && a.Op != OpVersions:
		return nil, refuse("unknown op %q", a.Op)
	case a.Pool == "":
		return nil, refuse("no pool named")
	case spec.GetExecutor() != a.Type:
		return nil, refuse("pool %q runs %s tools; this is a %s tool", a.Pool, bus.TypeToken(a.Type), bus.TypeToken(spec.GetExecutor()))
	}
	if err := Check(&spec); err != nil {
		return nil, refuse("%v", err)
	}
	if v := Version(&spec); spec.Version != "" && spec.Version != v {
		return nil, refuse("version %s is not the content's (%s): a version's content never changes; a changed spec is a new version",
			spec.Version, v)
	}
	if err := r.poolOfType(ctx, a.Pool, a.Type); err != nil {
		return nil, refuse("%v", err)
	}
	return Stamp(&spec), nil
}

// poolOfType refuses a pool whose consumer filters calls of another
// executor type than t: a pool runs one type.
func (r *Registrar) poolOfType(ctx context.Context, pool string, t toolwirev1.ExecutorType) error {
	cons, err := r.calls.Consumer(ctx, r.cfg.PoolConsumer(pool))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil // not created yet: a worker claims before it consumes
	}
	if err != nil {
		return fmt.Errorf("pool %q: consumer: %w", pool, err)
	}
	s := r.cfg.Subjects()
	live, shadow := strings.TrimSuffix(s.CallsOfType(t), ">"), strings.TrimSuffix(s.ShadowOfType(t), ">")
	for _, f := range bus.ConsumerFilters(cons.CachedInfo().Config) {
		if !strings.HasPrefix(f, live) && !strings.HasPrefix(f, shadow) {
			return fmt.Errorf("pool %q consumes %s, not only %s calls", pool, f, bus.TypeToken(t))
		}
	}
	return nil
}

// writeVersion writes spec's version key unless it holds that content
// already; a stored value of other content under the key (written around
// the Registrar) is replaced, and logged.
func (r *Registrar) writeVersion(ctx context.Context, spec *toolwirev1.ToolSpec) error {
	b, err := proto.Marshal(spec)
	if err != nil {
		return fmt.Errorf("registry: marshal %s: %w", spec.Name, err)
	}
	key := VersionKey(spec.Name, spec.Version)
	if _, err := r.kv.Create(ctx, key, b); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("registry: put %s version: %w", spec.Name, err)
	}
	e, err := r.kv.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("registry: get %s version: %w", spec.Name, err)
	}
	var old toolwirev1.ToolSpec
	if proto.Unmarshal(e.Value(), &old) == nil && Version(&old) == spec.Version {
		return nil
	}
	r.log.WarnContext(ctx, "registry: a version key held other content; rewritten with the content of its version", "tool", spec.Name, "version", spec.Version)
	if _, err := r.kv.Put(ctx, key, b); err != nil {
		return fmt.Errorf("registry: put %s version: %w", spec.Name, err)
	}
	return nil
}

// writeCurrent makes spec the tool's current definition unless it is
// already (same version and state).
func (r *Registrar) writeCurrent(ctx context.Context, spec *toolwirev1.ToolSpec) error {
	cur, err := r.kv.Get(ctx, spec.Name)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return fmt.Errorf("registry: get %s: %w", spec.Name, err)
	default:
		var old toolwirev1.ToolSpec
		if proto.Unmarshal(cur.Value(), &old) == nil && old.Version == spec.Version && Version(&old) == spec.Version &&
			old.Disabled == spec.Disabled && old.DisabledReason == spec.DisabledReason {
			return nil
		}
	}
	b, err := proto.Marshal(spec)
	if err != nil {
		return fmt.Errorf("registry: marshal %s: %w", spec.Name, err)
	}
	if _, err := r.kv.Put(ctx, spec.Name, b); err != nil {
		return fmt.Errorf("registry: put %s: %w", spec.Name, err)
	}
	return nil
}

// approve records the first approval of an MCP tool's definition: only
// an MCP pool's, only for a tool no other pool holds.
func (r *Registrar) approve(ctx context.Context, a Announcement) (Announced, error) {
	refuse := func(format string, args ...any) error {
		return &RefusedError{Tool: a.Tool, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case a.Type != toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP:
		return Announced{}, refuse("only an MCP pool approves definitions; pool %q runs %s tools", a.Pool, bus.TypeToken(a.Type))
	case !NameRe.MatchString(a.Tool):
		return Announced{}, refuse("name must match %s", NameRe)
	case a.Hash == "":
		return Announced{}, refuse("empty definition hash")
	}
	e, err := r.kv.Get(ctx, SourceKey(a.Tool))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return Announced{}, fmt.Errorf("registry: source of %s: %w", a.Tool, err)
	}
	if err == nil {
		if holder, ok := decodeSource(e.Value()); ok && holder.Pool != a.Pool {
			return Announced{}, refuse("the tool is defined by %s", holder)
		}
	}
	got, err := ApproveFirst(ctx, r.kv, a.Tool, a.Hash)
	return Announced{Approved: got}, err
}

// poolServes reports whether src's pool consumer still consumes src's
// subject: Claim's test of whether a claim holds.
func (r *Registrar) poolServes(ctx context.Context, src Source) (bool, error) {
	cons, err := r.calls.Consumer(ctx, r.cfg.PoolConsumer(src.Pool))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pool consumer: %w", err)
	}
	for _, f := range bus.ConsumerFilters(cons.CachedInfo().Config) {
		if bus.FiltersOverlap(f, src.Subject) {
			return true, nil
		}
	}
	return false, nil
}
