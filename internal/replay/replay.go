package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Dispatcher is the routing name replays carry: their results land under
// it, where no dispatcher listens (the operator role may subscribe to them).
const Dispatcher = bus.ReplayDispatcher

// Options tune a replay.
type Options struct {
	// Version is the tool version to replay against; empty = the tool's
	// current version.
	Version string
	// Wait bounds each replayed call. Default 60s.
	Wait time.Duration
}

// Pair is one replayed call: the original and the replay, and what
// differs.
type Pair struct {
	CallID          string   `json:"call_id"`
	ReplayCallID    string   `json:"replay_call_id"`
	Tool            string   `json:"tool"`
	OriginalVersion string   `json:"original_version"`
	ReplayVersion   string   `json:"replay_version"`
	Equal           bool     `json:"equal"`
	Changes         []Change `json:"changes"`
	// Error says why the call could not be replayed (no shadow pool
	// answered in time, no such version, no original result).
	Error string `json:"error,omitempty"`
}

// Replayer re-executes recorded calls on shadow pools.
type Replayer struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	subj     bus.Subjects
	registry jetstream.KeyValue
	calls    jetstream.Stream
	results  jetstream.Stream
}

// New attaches to the installation with prefix on nc.
func New(ctx context.Context, nc *nats.Conn, prefix string) (*Replayer, error) {
	v, err := bus.OpenView(ctx, nc, prefix)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if v.Registry == nil {
		return nil, fmt.Errorf("replay: registry: %w", v.RegistryErr)
	}
	return &Replayer{nc: nc, js: v.JS, subj: v.Subjects, registry: v.Registry, calls: v.Calls, results: v.Results}, nil
}

// Replay re-executes the call of r (an audit record with its result) on
// the shadow pool serving the tool at the chosen version, as a new call
// whose result never touches the original's, and diffs the responses.
func (p *Replayer) Replay(ctx context.Context, r *audit.Record, o Options) *Pair {
	pair := &Pair{CallID: r.CallID, Tool: r.Tool, OriginalVersion: r.SpecVersion}
	if r.Call == nil || r.Result == nil {
		pair.Error = "the call has no terminal result to compare with"
		return pair
	}
	spec, err := p.spec(ctx, r.Tool, o.Version)
	if err != nil {
		pair.Error = err.Error()
		return pair
	}
	pair.ReplayVersion = spec.Version
	subject := p.subj.Shadow(spec.Executor, r.Call.GetCaller().GetTenant(), spec.Provider, spec.Name)
	if ok, err := p.served(ctx, subject); err != nil || !ok {
		pair.Error = fmt.Sprintf("no shadow pool serves %s: start a worker with --shadow serving it", spec.Name)
		if err != nil {
			pair.Error = err.Error()
		}
		return pair
	}
	resp, id, err := p.execute(ctx, r.Call, spec, cmp.Or(o.Wait, time.Minute))
	pair.ReplayCallID = id
	if err != nil {
		pair.Error = err.Error()
		return pair
	}
	pair.Changes = Diff(r.Result, resp)
	pair.Equal = len(pair.Changes) == 0
	return pair
}

// ErrNoShadowPool is returned by CheckShadowPools when no shadow pool
// exists at all: every replay would wait its full Wait for nothing.
var ErrNoShadowPool = errors.New("replay: no shadow pool is running: start a worker with --shadow " +
	"(for example `worker --nats-url URL --shadow`) serving the tools to replay")

// CheckShadowPools returns ErrNoShadowPool when no pool consumes replays,
// so a replay can fail at once instead of after a wait per call.
func (p *Replayer) CheckShadowPools(ctx context.Context) error {
	filters, err := p.shadowFilters(ctx)
	if err != nil {
		return err
	}
	if len(filters) == 0 {
		return ErrNoShadowPool
	}
	return nil
}

// served reports whether a shadow pool consumes subject.
func (p *Replayer) served(ctx context.Context, subject string) (bool, error) {
	filters, err := p.shadowFilters(ctx)
	if err != nil {
		return false, err
	}
	for _, f := range filters {
		if bus.SubjectMatches(f, subject) {
			return true, nil
		}
	}
	return false, nil
}

// shadowFilters lists the filter subjects of the calls stream's durable
// consumers that consume replays (shadow pools).
func (p *Replayer) shadowFilters(ctx context.Context) ([]string, error) {
	shadow := p.subj.AllShadow()
	shadow = shadow[:len(shadow)-1] // "<prefix>.shadow."
	var filters []string
	lister := p.calls.ListConsumers(ctx)
	for info := range lister.Info() {
		if info.Config.Durable == "" {
			continue // an audit's or a replay's own ephemeral consumer, not a pool
		}
		for _, f := range bus.ConsumerFilters(info.Config) {
			if strings.HasPrefix(f, shadow) {
				filters = append(filters, f)
			}
		}
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("replay: list pools: %w", err)
	}
	return filters, nil
}

func (p *Replayer) spec(ctx context.Context, name, version string) (*toolwirev1.ToolSpec, error) {
	key := name
	if version != "" {
		key = registry.VersionKey(name, version)
	}
	e, err := p.registry.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		if version != "" {
			return nil, fmt.Errorf("tool %s has no version %s in the registry (start a shadow worker serving it)", name, version)
		}
		return nil, fmt.Errorf("tool %s is not in the registry", name)
	}
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	spec := &toolwirev1.ToolSpec{}
	if err := proto.Unmarshal(e.Value(), spec); err != nil {
		return nil, fmt.Errorf("registry: %s: %w", key, err)
	}
	return spec, nil
}

// execute publishes a copy of orig, pinned to spec, on the shadow subject
// and waits for its result.
func (p *Replayer) execute(ctx context.Context, orig *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, wait time.Duration) (*toolwirev1.ToolResponse, string, error) {
	if t := orig.GetCaller().GetTenant(); !bus.ValidTenant(t) {
		// Never mapped to a subject token: the replay would answer as
		// another tenant (a.b as a_b).
		return nil, "", fmt.Errorf("tenant %q does not match %s", t, bus.TenantPattern)
	}
	now := time.Now()
	id := ulid.Make().String()
	call := &toolwirev1.ToolCall{
		CallId: id, Tool: orig.Tool, SpecVersion: spec.Version, Arguments: orig.Arguments,
		Caller: proto.CloneOf(orig.GetCaller()), Attempt: 0, AcceptedAt: timestamppb.New(now),
		Deadline: timestamppb.New(now.Add(wait)), Dispatcher: Dispatcher,
		Executor: spec.Executor, Provider: spec.Provider,
		// A round that answered a tool's request for input is replayed
		// with the answers and state it ran with.
		Input: proto.CloneOf(orig.GetInput()), ClientCapabilitiesJson: orig.ClientCapabilitiesJson,
		CallerArgsSha256: orig.CallerArgsSha256,
	}
	data, err := proto.Marshal(call)
	if err != nil {
		return nil, id, fmt.Errorf("encode: %w", err)
	}
	results := make(chan *nats.Msg, 1)
	sub, err := p.nc.ChanSubscribe(p.subj.Result(call.Caller.GetTenant(), Dispatcher, id), results)
	if err != nil {
		return nil, id, fmt.Errorf("subscribe: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	subject := p.subj.Shadow(spec.Executor, call.Caller.GetTenant(), spec.Provider, spec.Name)
	if _, err := p.js.Publish(ctx, subject, data, jetstream.WithMsgID(id), jetstream.WithExpectStream(p.calls.CachedInfo().Config.Name)); err != nil {
		return nil, id, fmt.Errorf("publish: %w", err)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	look := time.NewTicker(lookEvery)
	defer look.Stop()
	resultSubject := p.subj.Result(call.Caller.GetTenant(), Dispatcher, id)
	var lookErr error
	for {
		select {
		case <-results:
		case <-look.C:
		case <-timer.C:
			if lookErr != nil {
				return nil, id, fmt.Errorf("no stored shadow result within %s: %w", wait, lookErr)
			}
			return nil, id, fmt.Errorf("no shadow pool answered within %s (is a worker running with --shadow for %s?)", wait, spec.Name)
		case <-ctx.Done():
			return nil, id, ctx.Err()
		}
		// The core message is a hint: it also arrives when the stream
		// did not store the result. Only the stored one is the answer.
		// Each look is bounded: a request nobody answers (no leader, or
		// lost in a reconnect) must not outlast the wait.
		lctx, cancel := context.WithTimeout(ctx, lookTimeout)
		m, err := bus.LastMsgFromLeader(lctx, p.js, p.results, resultSubject)
		cancel()
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			lookErr = nil
			continue // not stored (yet)
		}
		if err != nil && ctx.Err() == nil {
			lookErr = err // no leader, perhaps: look again
			continue
		}
		if err != nil {
			return nil, id, err
		}
		resp := &toolwirev1.ToolResponse{}
		if err := proto.Unmarshal(m.Data, resp); err != nil {
			return nil, id, fmt.Errorf("undecodable replay result: %w", err)
		}
		return resp, id, nil
	}
}

// A replay looks for its stored shadow result on every hint and every
// lookEvery, each look for at most lookTimeout.
const (
	lookEvery   = time.Second
	lookTimeout = 2 * time.Second
)
