package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/profiles"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// What the shaped calls carry (doc.go, "Shaped calls").
const (
	// shapedProfile is the shipped client profile the shaped calls name
	// in profiles.Header.
	shapedProfile = "claude"
	// shapedModel is the model they name; shapedPolicy's model_families
	// put it in the claude family, whose toolset is in force for them.
	shapedModel = "claude-sonnet-4-5"
	// shapedFamily is shapedModel's family.
	shapedFamily = "claude"
	// MaxChildrenPerParent is the most shaped calls that name one
	// parent, and ShapedConfig.ChildrenPerParent's default: the
	// dispatcher's default bound on a parent's delegated calls
	// (dispatch.Config.MaxDelegationFanOut), which counts every child
	// admitted, finished or not.
	MaxChildrenPerParent = 256
	// parentTool is the tool of the parents (benchParent), served in
	// parentPool.
	parentTool = "bench_parent"
	// parentPool is the parents' pool: not the echo calls' (native).
	parentPool = "bench-parents"
)

// System names of the two kinds of run of MeasureShaped.
const (
	systemShaped      = "toolwire-http+shaped"
	systemShapedPlain = "toolwire-http+plain"
)

// DefaultPairs is how many pairs of runs MeasureShaped makes by default.
const DefaultPairs = 3

// DefaultShapedLevel is the suite's shaped measurement: at the number in
// flight issue 31's goal is judged at.
var DefaultShapedLevel = Level{InFlight: 64, Calls: 20000, Warmup: 2000}

// shapedPolicy is the policy in force on MeasureShaped's stack: every
// call allowed; the model family claude (its models' globs scanned on
// every call that names a model) offered echo with a schema variant each
// of its calls is checked against too, and not offered the bench's own
// tools and the built-in sleep and fail. The loop guard is on, as with
// any document, and counts per session: the calls name none.
const shapedPolicy = `tenant:
  default: allow
model_families:
  - {family: claude, models: ["claude-*"]}
toolsets:
  claude:
    hide: [sleep, fail, "bench_*"]
    variants:
      echo:
        input_schema:
          type: object
          required: [text]
          properties:
            text: {type: string, maxLength: 1024}
          additionalProperties: false
`

// shapedLimitsBytes is the limits bucket's size on MeasureShaped's
// stack: a delegated call's chain records (about half a KiB, kept 24h)
// live there, and the default 64 MiB would refuse a long measurement's
// calls OVERLOADED (store full) past about 100,000 of them.
const shapedLimitsBytes = 1 << 30

// ShapedConfig configures MeasureShaped.
type ShapedConfig struct {
	// Config's InFlight, Calls and Warmup apply to every run, as do its
	// connection, HTTP protocol, store and queue-wait settings. Its Path
	// is ignored (the Connect API over HTTP: the one face where a
	// profile, a model and a parent apply together); Policy, Limits,
	// Hook, Sessions and the profile files must not be set.
	Config
	// Pairs of runs, one plain and one shaped each. Default DefaultPairs.
	Pairs int
	// ChildrenPerParent is how many shaped calls name one parent, in
	// order: 1 to MaxChildrenPerParent (the default, the fewest parents
	// held). The delegation step's cost may grow with a parent's
	// children.
	ChildrenPerParent int
}

// ShapedResult is what MeasureShaped measured: pair i is Plain[i] and
// Shaped[i].
type ShapedResult struct {
	Plain, Shaped []Result
	// Parents is how many parent calls were held; Delegated how many
	// shaped calls (warm-up included) named one.
	Parents, Delegated int
}

// Ratios are each pair's shaped calls/s over its plain calls/s.
func (r ShapedResult) Ratios() []float64 {
	out := make([]float64, 0, len(r.Plain))
	for i := range min(len(r.Plain), len(r.Shaped)) {
		if p := r.Plain[i].CallsPerSec(); p > 0 {
			out = append(out, r.Shaped[i].CallsPerSec()/p)
		}
	}
	return out
}

// MedianRatio is the median of Ratios (the mean of the middle two for an
// even count); 0 without a pair.
func (r ShapedResult) MedianRatio() float64 { return medianOf(r.Ratios()) }

// medianOf is the median of xs (the mean of the middle two for an even
// count); 0 for none.
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// validate names the first setting MeasureShaped cannot honour.
func (sc ShapedConfig) validate() error {
	switch {
	case sc.Pairs < 1:
		return fmt.Errorf("bench: Pairs %d must be positive", sc.Pairs)
	case sc.ChildrenPerParent < 1 || sc.ChildrenPerParent > MaxChildrenPerParent:
		return fmt.Errorf("bench: ChildrenPerParent %d must be 1 to %d (the dispatcher's bound on a parent's children)", sc.ChildrenPerParent, MaxChildrenPerParent)
	case sc.Policy || sc.Limits || sc.Hook || sc.Sessions:
		return errors.New("bench: the shaped measurement has its own policy: Policy, Limits, Hook and Sessions must be off")
	case sc.CPUProfile != "" || sc.MemProfile != "":
		return errors.New("bench: the shaped measurement makes several runs: no CPU or allocation profile (profile one -path http run instead)")
	}
	return sc.Config.Validate()
}

// parentsFor is how many parents sc's shaped calls need: every shaped
// run's warm-up and measured calls, ChildrenPerParent to a parent. The
// first run is plain, so only its warm-up may run past cfg.Warmup (until
// the worker's start-up window has passed).
func (sc ShapedConfig) parentsFor() int {
	perRun := sc.Calls + max(sc.Warmup, 0)
	return (sc.Pairs*perRun + sc.ChildrenPerParent - 1) / sc.ChildrenPerParent
}

// MeasureShaped measures the cost of issue 31's shaping (doc.go, "Shaped
// calls"): on one stack
// (a fresh embedded server, the dispatcher with shapedPolicy in force, an
// in-process worker, the Connect API on loopback) it runs Pairs pairs of
// runs of echo calls through the Connect client, plain (no profile, no
// model, no parent) and shaped (profile, model and parent named), plain
// first in the first pair and the order alternating after that, and
// returns every run. Progress and each run's RESULT line go to progress.
// Everything it started is stopped before it returns: the parents are
// released and their results awaited (bounded), then the stack and the
// server stop.
func MeasureShaped(ctx context.Context, sc ShapedConfig, progress io.Writer) (r ShapedResult, err error) {
	sc.Path = PathHTTP
	sc.Config = sc.WithDefaults()
	sc.Pairs = cmp.Or(sc.Pairs, DefaultPairs)
	sc.ChildrenPerParent = cmp.Or(sc.ChildrenPerParent, MaxChildrenPerParent)
	if err := sc.validate(); err != nil {
		return r, err
	}
	e, err := startEnv(ctx, sc.Config)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	warmUntil := time.Now().Add(minWarmup)
	sh, err := startShaped(ctx, e, sc)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, sh.stop(ctx)) }()
	s := sh.s
	r.Parents = len(sh.parents)
	pool, err := s.bus.Calls.Consumer(ctx, s.bus.Config.PoolConsumer("native"))
	if err != nil {
		return r, err
	}
	fmt.Fprintf(progress, "# shaped: %d parents held, %d pairs of %d calls at %d in flight\n", r.Parents, sc.Pairs, sc.Calls, sc.InFlight)
	if s.warmUntil.After(warmUntil) {
		warmUntil = s.warmUntil
	}
	plain := measured{cfg: sc.Config, system: systemShapedPlain, call: s.callHTTP, pool: pool, warmUntil: warmUntil}
	shaped := measured{cfg: sc.Config, system: systemShaped, call: sh.call, pool: pool}
	for i := range sc.Pairs {
		first, second := &plain, &shaped
		if i%2 == 1 {
			first, second = second, first
		}
		for _, m := range []*measured{first, second} {
			runtime.GC() // every run starts from a collected heap, as in the suite
			res, err := m.run(ctx)
			if err != nil {
				return r, err
			}
			m.warmUntil = time.Time{} // only the stack's first run waits for the worker's start-up
			fmt.Fprintf(progress, "# %s inflight=%d pair=%d: %.1f µs CPU/call, other load %.2f cores\n",
				res.System, res.InFlight, i+1, float64(res.CPUPerCall())/1e3, res.OtherCores())
			fmt.Fprintln(progress, res.Line())
			if m == &plain {
				r.Plain = append(r.Plain, res)
			} else {
				r.Shaped = append(r.Shaped, res)
			}
		}
	}
	r.Delegated = int(sh.next.Load())
	return r, sh.checkChildren(ctx, r.Delegated)
}

// startShaped starts MeasureShaped's stack on e (with a worker of its
// own for the parents, a slot each) and holds its parents; on error
// everything it started is stopped.
func startShaped(ctx context.Context, e *env, sc ShapedConfig) (*shapedCalls, error) {
	parents := sc.parentsFor()
	o := stackOptions{worker: sc.workerConcurrency(), parents: parents, http: true, maxQueueWait: sc.MaxQueueWait,
		busConfig: bus.Config{LimitsMaxBytes: shapedLimitsBytes}}
	var err error
	if o.policy, err = policy.Parse([]byte(shapedPolicy)); err != nil {
		return nil, fmt.Errorf("bench: shaped policy: %w", err)
	}
	s, err := startStack(ctx, e, o)
	if err != nil {
		return nil, err
	}
	sh, err := s.holdParents(ctx, parents)
	if err != nil {
		return nil, errors.Join(err, sh.stop(ctx))
	}
	sh.per = sc.ChildrenPerParent
	return sh, nil
}

// stop releases the parents, awaits their results and stops the stack.
func (sh *shapedCalls) stop(ctx context.Context) error {
	return errors.Join(sh.s.releaseParents(ctx, sh.parents), sh.s.stop())
}

// shapedCalls makes the shaped calls: each names the next parent with
// room for a child, per to a parent, in order.
type shapedCalls struct {
	s       *stack
	parents []string
	per     int
	next    atomic.Int64
}

// call makes one shaped echo call through the Connect API: the client
// profile in profiles.Header, the model in the request, on behalf of a
// parent.
func (sh *shapedCalls) call(ctx context.Context) error {
	i := sh.next.Add(1) - 1
	if i >= int64(len(sh.parents)*sh.per) {
		return fmt.Errorf("bench: all %d parents have their %d delegated calls", len(sh.parents), sh.per)
	}
	req := connect.NewRequest(shapedRequest(sh.parents[i/int64(sh.per)], echoArgs))
	req.Header().Set(profiles.Header, shapedProfile)
	resp, err := sh.s.client.Call(ctx, req)
	if err != nil {
		return err
	}
	return checkEcho(resp.Msg)
}

// shapedRequest is a shaped call of echo with args on behalf of parent.
func shapedRequest(parent, args string) *toolwirev1.CallRequest {
	return &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: args, Wait: durationpb.New(callWait),
		Model: shapedModel, ParentCallId: parent}
}

// parentStart bounds the wait for the parents to start, and for their
// results once released.
const parentStart = 30 * time.Second

// holdParents submits n calls of bench_parent through the dispatcher
// core and waits until all of them run: each holds a slot of the
// parents' worker until the stack's gate opens. On error the parents submitted so far are in
// the answer, for releaseParents.
func (s *stack) holdParents(ctx context.Context, n int) (*shapedCalls, error) {
	sh := &shapedCalls{s: s}
	if err := waitTool(ctx, s.reg, parentTool); err != nil {
		return sh, err
	}
	for range n {
		sub, err := s.d.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: parentTool, ArgumentsJson: "{}"})
		if err != nil {
			return sh, fmt.Errorf("bench: submit a parent: %w", err)
		}
		if te := sub.Rejected.GetError(); te != nil {
			return sh, fmt.Errorf("bench: a parent was refused: %s: %s", te.GetType(), te.GetMessage())
		}
		sh.parents = append(sh.parents, sub.CallID)
	}
	ctx, cancel := context.WithTimeout(ctx, parentStart)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.gate.running.Load() < int64(n) {
		select {
		case <-ctx.Done():
			return sh, fmt.Errorf("bench: %d of %d parents running after %s: %w", s.gate.running.Load(), n, parentStart, ctx.Err())
		case <-tick.C:
		}
	}
	return sh, nil
}

// releaseParents opens the gate and awaits every parent's result (at
// most parentStart in all): each must have finished ok.
func (s *stack) releaseParents(ctx context.Context, parents []string) error {
	s.gate.open()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), parentStart)
	defer cancel()
	var errs []error
	for _, id := range parents {
		res, err := s.d.GetResult(ctx, identity.Default, id, parentStart)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("bench: parent %s: %w", id, err))
		case res.GetState() != toolwirev1.CallState_CALL_STATE_DONE:
			errs = append(errs, fmt.Errorf("bench: parent %s still %s after its release", id, res.GetState()))
		case !res.GetResponse().GetOk():
			te := res.GetResponse().GetError()
			errs = append(errs, fmt.Errorf("bench: parent %s failed: %s: %s", id, te.GetType(), te.GetMessage()))
		}
		if ctx.Err() != nil {
			break // every later one would fail the same way
		}
	}
	return errors.Join(errs...)
}

// checkChildren checks, through the API's GetDelegation, that the first
// and the last parent used have as many children as shaped calls named
// them: the chain was in force on every call.
func (sh *shapedCalls) checkChildren(ctx context.Context, delegated int) error {
	parents := sh.parents
	if delegated == 0 {
		return nil
	}
	per := sh.per
	last := (delegated - 1) / per
	for _, i := range []int{0, last} {
		want := min(per, delegated-i*per)
		resp, err := sh.s.client.GetDelegation(ctx, connect.NewRequest(&toolwirev1.GetDelegationRequest{CallId: parents[i]}))
		if err != nil {
			return fmt.Errorf("bench: the delegation of parent %s: %w", parents[i], err)
		}
		if got := len(resp.Msg.GetChildren()) + int(resp.Msg.GetMoreChildren()); got != want {
			return fmt.Errorf("bench: parent %s has %d children, want %d", parents[i], got, want)
		}
	}
	return nil
}

// parentGate holds bench_parent's calls until open.
type parentGate struct {
	release chan struct{}
	once    sync.Once
	// running counts the bench_parent calls under way.
	running atomic.Int64
}

func newParentGate() *parentGate { return &parentGate{release: make(chan struct{})} }

// open releases every bench_parent call, running or to come.
func (g *parentGate) open() { g.once.Do(func() { close(g.release) }) }

// parentOutput is bench_parent's output.
type parentOutput struct {
	Released bool `json:"released"`
}

// benchParent is bench_parent: it runs until g opens or its call ends
// (start-to-close an hour: longer than any measurement), so that the
// calls made on its call's behalf find it on its way.
func benchParent(g *parentGate) *tool.Tool {
	return tool.Must(tool.New(parentTool, func(ctx context.Context, _ struct{}) (parentOutput, error) {
		g.running.Add(1)
		defer g.running.Add(-1)
		select {
		case <-g.release:
			return parentOutput{Released: true}, nil
		case <-ctx.Done():
			return parentOutput{}, ctx.Err()
		}
	}, tool.ReadOnly(), tool.Idempotent(), tool.WithTimeouts(0, time.Hour, 0, 0)))
}

// WriteShaped writes MeasureShaped's runs as a markdown table and states
// the median ratio.
func WriteShaped(w io.Writer, r ShapedResult) {
	if len(r.Plain) == 0 {
		return
	}
	fmt.Fprintf(w, "Shaped calls (issue 31): %d in flight, %d calls a run, %d parents held; shaped = client profile %s, model %s (toolset %s), a parent named; plain = the same stack's calls without them.\n\n",
		r.Plain[0].InFlight, r.Plain[0].Calls, r.Parents, shapedProfile, shapedModel, shapedFamily)
	fmt.Fprintln(w, "| pair | plain calls/s | shaped calls/s | shaped ÷ plain | plain p50 ms | shaped p50 ms | plain CPU µs/call | shaped CPU µs/call |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|")
	var plainCPS, shapedCPS, ratios []float64
	for i := range min(len(r.Plain), len(r.Shaped)) {
		p, s := r.Plain[i], r.Shaped[i]
		if p.CallsPerSec() <= 0 {
			continue
		}
		plainCPS, shapedCPS = append(plainCPS, p.CallsPerSec()), append(shapedCPS, s.CallsPerSec())
		ratios = append(ratios, s.CallsPerSec()/p.CallsPerSec())
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %.2f× | %.2f | %.2f | %.0f | %.0f |\n", i+1, p.CallsPerSec(), s.CallsPerSec(), ratios[len(ratios)-1],
			ms(p.P50), ms(s.P50), float64(p.CPUPerCall())/1e3, float64(s.CPUPerCall())/1e3)
	}
	fmt.Fprintf(w, "| median | %.0f | %.0f | %.2f× | | | | |\n", medianOf(plainCPS), medianOf(shapedCPS), medianOf(ratios))
	fmt.Fprintf(w, "\nWith a profile, a toolset and a chain in force at %d in flight: %.0f calls/s, %.2f× the calls/s without (median of %d pairs' ratios; the goal is at least 0.9×).\n",
		r.Plain[0].InFlight, medianOf(shapedCPS), medianOf(ratios), len(ratios))
}
