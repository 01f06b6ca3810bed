package dispatch_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/logtest"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// napTool sleeps for nap (or until its call is cancelled), then answers.
func napTool(name string, nap time.Duration, opts ...tool.Option) *tool.Tool {
	return tool.Must(tool.New(name, func(ctx context.Context, _ struct{}) (string, error) {
		t := time.NewTimer(nap)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "awake", nil
	}, opts...))
}

type budgetStack struct {
	s   *dispatchtest.Stack
	log *logtest.Buffer
	reg *prometheus.Registry
	// release lets the calls of gated go on (closed by the test).
	release chan struct{}
}

// gatedTool waits until release is closed, then 100ms more, and answers:
// a call that a test can watch while it runs, over a budget of 50ms.
func gatedTool(name string, release <-chan struct{}, opts ...tool.Option) *tool.Tool {
	return tool.Must(tool.New(name, func(ctx context.Context, _ struct{}) (string, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		t := time.NewTimer(100 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "let go", nil
	}, opts...))
}

// budgetStack runs tools with soft latency budgets: nap (300ms, its spec's
// budget 50ms), quick (none, its spec's budget 1h), fetch (a retrieval
// tool of 300ms without a budget of its own) and gated (held until the
// test releases it, then 100ms; its spec's budget 50ms), under a policy
// that holds retrieval tools to 100ms, and to 10ms in a session in voice
// mode.
func startBudgetStack(t *testing.T) budgetStack {
	t.Helper()
	b := budgetStack{log: &logtest.Buffer{}, reg: prometheus.NewRegistry(), release: make(chan struct{})}
	m, err := telemetry.NewDispatcherMetrics(b.reg)
	require.NoError(t, err)
	b.s = dispatchtest.Start(t, dispatchtest.Options{
		Tools: []*tool.Tool{
			napTool("nap", 300*time.Millisecond, tool.WithLatencyBudget(50*time.Millisecond)),
			napTool("quick", 0, tool.WithLatencyBudget(time.Hour)),
			napTool("fetch", 300*time.Millisecond, tool.WithCategory(toolwirev1.ToolCategory_TOOL_CATEGORY_RETRIEVAL)),
			gatedTool("gated", b.release, tool.WithLatencyBudget(50*time.Millisecond)),
		},
		Dispatcher: dispatch.Config{Logger: b.log.JSONLogger(), Metrics: m},
	})
	a, err := policystore.NewStore(b.s.Env.Bus, nil).Apply(t.Context(), policystore.Installation, []byte(`tenant:
  default: allow
modes:
  voice: {}
latency_budgets:
  - id: voice-retrieval
    category: retrieval
    mode: voice
    soft: 10ms
  - id: retrieval
    category: retrieval
    soft: 100ms
`), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, b.s.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
	return b
}

func (b budgetStack) call(t *testing.T, name string) *toolwirev1.CallResponse {
	t.Helper()
	return b.callIn(t, name, "s-budget")
}

func (b budgetStack) callIn(t *testing.T, name, session string) *toolwirev1.CallResponse {
	t.Helper()
	r, err := b.s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: name, Session: session}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk(), "a budget never fails a call: %v", r.Response.GetError())
	return r
}

// exceeded is the value of toolwire_latency_budget_exceeded_total for
// tool and source.
func (b budgetStack) exceeded(t *testing.T, name, source string) float64 {
	t.Helper()
	mfs, err := b.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "toolwire_latency_budget_exceeded_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["tool"] == name && labels["source"] == source {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// budgetEvent waits (at most 10s) for the call's LATENCY_BUDGET_EXCEEDED
// event on its timeline, as Watch replays it; nil when there is none by
// the time its FINISHED event is sent and want is false.
func (b budgetStack) budgetEvent(t *testing.T, callID string, want bool) *toolwirev1.CallEvent {
	t.Helper()
	var found *toolwirev1.CallEvent
	look := func() bool {
		found = nil
		err := b.s.Dispatcher.Watch(t.Context(), identity.Default, callID, func(ev *toolwirev1.CallEvent) error {
			if ev.GetType() == toolwirev1.CallEventType_CALL_EVENT_TYPE_LATENCY_BUDGET_EXCEEDED {
				found = ev
			}
			return nil
		})
		require.NoError(t, err)
		return found != nil
	}
	if want {
		require.Eventually(t, look, 10*time.Second, 50*time.Millisecond, "no LATENCY_BUDGET_EXCEEDED event on the timeline")
	} else {
		look()
	}
	return found
}

// warnings are the WARN lines logged about call callID's budget.
func (b budgetStack) warnings(t *testing.T, callID string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(b.log.String(), "\n") {
		var rec map[string]any
		if line == "" || json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec["level"] == "WARN" && rec["msg"] == "call over its latency budget" && rec["call_id"] == callID {
			out = append(out, rec)
		}
	}
	return out
}

// A call that takes longer than its spec's soft budget succeeds, and the
// overrun is in its meta, the metric, the timeline and a WARN line.
func TestLatencyBudgetFromTheSpecExceeded(t *testing.T) {
	t.Parallel()
	b := startBudgetStack(t)
	r := b.call(t, "nap")
	over := r.Response.GetMeta().GetLatencyBudgetExceeded()
	require.NotNil(t, over, "the answer's meta names the exceeded budget")
	require.Equal(t, 50*time.Millisecond, over.GetBudget().AsDuration())
	require.GreaterOrEqual(t, over.GetElapsed().AsDuration(), 300*time.Millisecond, "measured from admission to the stored result")
	require.Equal(t, "spec", over.GetSource())
	require.Empty(t, over.GetEntry())

	require.EqualValues(t, 1, b.exceeded(t, "nap", "spec"))
	ws := b.warnings(t, r.CallId)
	require.Len(t, ws, 1)
	require.Equal(t, "nap", ws[0]["tool"])

	ev := b.budgetEvent(t, r.CallId, true)
	require.Equal(t, over.GetBudget().AsDuration(), ev.GetLatencyBudgetExceeded().GetBudget().AsDuration())
	require.Equal(t, over.GetElapsed().AsDuration(), ev.GetLatencyBudgetExceeded().GetElapsed().AsDuration())
	require.Contains(t, ev.GetMessage(), "over its soft latency budget of 50ms (spec)")
}

// The policy's latency_budgets hold a tool to a budget its spec does not
// give; an entry that names a session mode does not apply to a call in a
// session without that mode.
func TestLatencyBudgetFromThePolicyExceeded(t *testing.T) {
	t.Parallel()
	b := startBudgetStack(t)
	r := b.call(t, "fetch")
	over := r.Response.GetMeta().GetLatencyBudgetExceeded()
	require.NotNil(t, over)
	require.Equal(t, 100*time.Millisecond, over.GetBudget().AsDuration(), "the mode entry (10ms) did not apply")
	require.Equal(t, "policy", over.GetSource())
	require.Equal(t, "retrieval", over.GetEntry())
	require.NotEmpty(t, over.GetPolicyVersion())
	require.EqualValues(t, 1, b.exceeded(t, "fetch", "policy"))
	require.Len(t, b.warnings(t, r.CallId), 1)
	b.budgetEvent(t, r.CallId, true)
}

// An entry that names a session mode holds the calls of sessions in that
// mode (the tighter 10ms in voice), and only theirs.
func TestLatencyBudgetOfTheSessionMode(t *testing.T) {
	t.Parallel()
	b := startBudgetStack(t)
	b.s.SetMode(t, "s-voice", "voice")
	r := b.callIn(t, "fetch", "s-voice")
	over := r.Response.GetMeta().GetLatencyBudgetExceeded()
	require.NotNil(t, over)
	require.Equal(t, 10*time.Millisecond, over.GetBudget().AsDuration(), "the voice entry applies in a voice session")
	require.Equal(t, "voice-retrieval", over.GetEntry())
	require.Len(t, b.warnings(t, r.CallId), 1)
	b.budgetEvent(t, r.CallId, true)

	r = b.callIn(t, "fetch", "s-text")
	require.Equal(t, 100*time.Millisecond, r.Response.GetMeta().GetLatencyBudgetExceeded().GetBudget().AsDuration(), "not in another session")
}

// Within its budget, a call has none of it: no meta, metric, event or
// WARN line.
func TestLatencyBudgetKept(t *testing.T) {
	t.Parallel()
	b := startBudgetStack(t)
	r := b.call(t, "quick")
	require.Nil(t, r.Response.GetMeta().GetLatencyBudgetExceeded())
	require.Zero(t, b.exceeded(t, "quick", "spec"))
	require.Empty(t, b.warnings(t, r.CallId))
	require.Nil(t, b.budgetEvent(t, r.CallId, false))
}

// watchLive runs a Watch of callID on d until it ends, sending its events
// on the returned channel when it does; ready is closed at its first
// event (the Watch is live).
func watchLive(t *testing.T, d *dispatch.Dispatcher, callID string, ready chan<- struct{}) <-chan []*toolwirev1.CallEvent {
	t.Helper()
	out := make(chan []*toolwirev1.CallEvent, 1)
	go func() {
		var evs []*toolwirev1.CallEvent
		err := d.Watch(t.Context(), identity.Default, callID, func(ev *toolwirev1.CallEvent) error {
			if len(evs) == 0 {
				close(ready)
			}
			evs = append(evs, ev)
			return nil
		})
		assert.NoError(t, err)
		out <- evs
	}()
	return out
}

// A Watch that follows a call over its budget, live, on the replica that
// admitted it or another, sees the LATENCY_BUDGET_EXCEEDED event before
// FINISHED, and FINISHED's response says the same in its meta: whether
// or not the admitting replica had stored its event by then.
func TestLatencyBudgetLiveWatchSeesTheOverrun(t *testing.T) {
	t.Parallel()
	b := startBudgetStack(t)
	other := b.s.StartDispatcher(t, dispatch.Config{})
	sub, err := b.s.Dispatcher.Submit(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "gated", Session: "s-budget"})
	require.NoError(t, err)
	readyHere, readyThere := make(chan struct{}), make(chan struct{})
	here := watchLive(t, b.s.Dispatcher, sub.CallID, readyHere)
	there := watchLive(t, other, sub.CallID, readyThere)
	for _, ready := range []chan struct{}{readyHere, readyThere} {
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			t.Fatal("the Watch sent no event")
		}
	}
	close(b.release) // both Watches follow the call: let it finish
	for name, evs := range map[string]<-chan []*toolwirev1.CallEvent{"admitting replica": here, "other replica": there} {
		got := <-evs
		require.NotEmpty(t, got, name)
		fin := got[len(got)-1]
		require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED, fin.GetType(), name)
		over := fin.GetResponse().GetMeta().GetLatencyBudgetExceeded()
		require.NotNil(t, over, "%s: FINISHED's response says the call went over its budget", name)
		var budget []*toolwirev1.CallEvent
		for _, ev := range got {
			if ev.GetType() == toolwirev1.CallEventType_CALL_EVENT_TYPE_LATENCY_BUDGET_EXCEEDED {
				budget = append(budget, ev)
			}
		}
		require.Len(t, budget, 1, "%s: one LATENCY_BUDGET_EXCEEDED event before FINISHED", name)
		require.Equal(t, over.GetElapsed().AsDuration(), budget[0].GetLatencyBudgetExceeded().GetElapsed().AsDuration(), name)
		require.Equal(t, 50*time.Millisecond, budget[0].GetLatencyBudgetExceeded().GetBudget().AsDuration(), name)
		require.Contains(t, budget[0].GetMessage(), "over its soft latency budget of 50ms (spec)", name)
	}
	require.EqualValues(t, 1, b.exceeded(t, "gated", "spec"), "recorded once, by the admitting replica")
}

// Every answer of a call over its budget says so, the same: the first
// Call, a repeat of its idempotency key, GetResult on the replica that
// admitted it and on another.
func TestLatencyBudgetSameOnEveryRead(t *testing.T) {
	t.Parallel()
	b := startBudgetStack(t)
	other := b.s.StartDispatcher(t, dispatch.Config{})
	req := &toolwirev1.CallRequest{Tool: "nap", Session: "s-budget", IdempotencyKey: "nap-once"}
	first, err := b.s.Dispatcher.Call(t.Context(), identity.Default, req, 30*time.Second)
	require.NoError(t, err)
	want := first.Response.GetMeta().GetLatencyBudgetExceeded()
	require.NotNil(t, want)

	repeat, err := b.s.Dispatcher.Call(t.Context(), identity.Default, req, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, first.CallId, repeat.CallId)
	answers := map[string]*toolwirev1.ToolResponse{"repeated Call": repeat.Response}
	for name, d := range map[string]*dispatch.Dispatcher{"GetResult here": b.s.Dispatcher, "GetResult on another replica": other} {
		r, err := d.GetResult(t.Context(), identity.Default, first.CallId, 0)
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State, name)
		answers[name] = r.Response
	}
	for name, resp := range answers {
		require.True(t, proto.Equal(want, resp.GetMeta().GetLatencyBudgetExceeded()), "%s: %v, want %v", name, resp.GetMeta().GetLatencyBudgetExceeded(), want)
	}
	require.EqualValues(t, 1, b.exceeded(t, "nap", "spec"), "recorded once")
}
