package limitgate_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/limitgate"
	"github.com/toolwire/toolwire/internal/limits"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/startstop"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// onePolicy is in force for every tenant.
type onePolicy struct{ p *policy.Policy }

func (o onePolicy) For(string) *policy.Policy { return o.p }

// specs knows every tool but "gone", at any version.
type specs struct{}

func (specs) GetVersion(_ context.Context, name, version string) (*registry.Entry, error) {
	if name == "gone" {
		return nil, registry.ErrNotFound
	}
	return &registry.Entry{Spec: &toolwirev1.ToolSpec{Name: name, Version: version}}, nil
}

type bundle struct {
	gate *limitgate.Gate
	b    *bus.Bus
}

// setup starts a gate over a real JetStream's limits bucket with doc in
// force for every tenant; cfg's slot settings are kept.
func setup(t *testing.T, doc string, cfg limitgate.Config) *bundle {
	t.Helper()
	env := bustest.Start(t, bus.Config{})
	p, err := policy.Parse([]byte(doc))
	require.NoError(t, err)
	cfg.JetStream, cfg.Bucket, cfg.Policies, cfg.Specs = env.Bus.JS, env.Bus.Limits.Bucket(), onePolicy{p}, specs{}
	g, err := limitgate.New(cfg)
	require.NoError(t, err)
	require.NoError(t, g.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, g.Stop(context.Background())) })
	return &bundle{gate: g, b: env.Bus}
}

// call is a call of tool by agent in session of tenant acme, with an id
// of its own.
func call(tool, agent, session string) *toolwirev1.ToolCall {
	return &toolwirev1.ToolCall{CallId: rand.Text(), Tool: tool, SpecVersion: "v1", Arguments: []byte(`{}`),
		Caller: &toolwirev1.Caller{Tenant: "acme", Agent: agent, Session: session}}
}

func admin(agent string) identity.Identity {
	return identity.Identity{Tenant: "acme", Agent: agent, Scopes: []string{identity.AdminScope}}
}

// A budget admits its units, then refuses BUDGET_EXCEEDED with a decision
// naming the limit and keeping the allow's grant; units given back can be
// spent again.
func TestBudgetRefusesAndGiveBackRefunds(t *testing.T) {
	t.Parallel()
	s := setup(t, `limits:
  - id: per-session
    key: session
    tools: [echo]
    budget: {units: 2, window: 24h}
    reason: two a day
`, limitgate.Config{})
	ctx := t.Context()
	allowed := &toolwirev1.PolicyDecision{Outcome: toolwirev1.PolicyOutcome_POLICY_OUTCOME_ALLOW, GrantId: "g-1"}
	take := func() (*limitgate.Ticket, *limitgate.Refusal) {
		return s.gate.Take(ctx, limitgate.Call{Call: call("echo", "a", "s-1"), Allowed: allowed, Now: time.Now()})
	}
	first, r := take()
	require.Nil(t, r)
	require.NotNil(t, first)
	_, r = take()
	require.Nil(t, r)
	_, r = take()
	require.NotNil(t, r, "past the budget")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_BUDGET_EXCEEDED, r.Error.Type)
	require.Positive(t, r.Error.GetRetryAfter().AsDuration())
	require.Contains(t, r.Error.Message, `limit "per-session"`)
	require.Equal(t, toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, r.Decision.Outcome)
	require.Equal(t, "limit:per-session", r.Decision.RuleId)
	require.Equal(t, "two a day", r.Decision.Reason)
	require.Equal(t, "g-1", r.Decision.GrantId)

	s.gate.GiveBack(ctx, first)
	_, r = take()
	require.Nil(t, r, "the unit given back is spent again")

	_, r = s.gate.Take(ctx, limitgate.Call{Call: call("other", "a", "s-1"), Now: time.Now()})
	require.Nil(t, r, "no limit covers another tool")
	_, r = s.gate.Take(ctx, limitgate.Call{Call: call("echo", "a", "s-2"), Now: time.Now()})
	require.Nil(t, r, "another session has a budget of its own")
}

// A rate is taken last: its refusal gives back the budget units the call
// had spent, and says when to retry.
func TestRateRefusalGivesBackTheBudget(t *testing.T) {
	t.Parallel()
	s := setup(t, `limits:
  - id: slow
    key: agent
    rate: {count: 1, per: 1h}
  - id: daily
    key: agent
    budget: {units: 100, window: 24h}
`, limitgate.Config{})
	ctx := t.Context()
	_, r := s.gate.Take(ctx, limitgate.Call{Call: call("echo", "r", ""), Now: time.Now()})
	require.Nil(t, r)
	for range 3 {
		_, r = s.gate.Take(ctx, limitgate.Call{Call: call("echo", "r", ""), Now: time.Now()})
		require.NotNil(t, r)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, r.Error.Type)
		require.Greater(t, r.Error.GetRetryAfter().AsDuration(), 50*time.Minute)
		require.Equal(t, "limit:slow", r.Decision.RuleId)
	}
	us, err := s.gate.Usage(ctx, admin("r"), limitgate.UsageFilter{})
	require.NoError(t, err)
	require.Len(t, us, 2)
	require.Equal(t, "daily", us[0].Limit)
	require.EqualValues(t, 1, us[0].Used, "the refused calls spent nothing")
	require.EqualValues(t, 99, us[0].Remaining)
}

// A concurrency cap of one: a second call is refused while the first
// holds the slot; Settle (its result came) releases it; a parked ask
// (Slots false) takes none; a call not published gives its slot back.
func TestSlotsAreHeldUntilSettled(t *testing.T) {
	t.Parallel()
	s := setup(t, `limits:
  - id: one
    key: tenant
    concurrency: 1
`, limitgate.Config{})
	ctx := t.Context()
	take := func(c *toolwirev1.ToolCall, slots bool) (*limitgate.Ticket, *limitgate.Refusal) {
		return s.gate.Take(ctx, limitgate.Call{Call: c, Now: time.Now(), Slots: slots})
	}
	first := call("sleep", "c", "")
	t1, r := take(first, true)
	require.Nil(t, r)
	s.gate.Hold(t1)
	_, r = take(call("sleep", "c", ""), true)
	require.NotNil(t, r, "one runs")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, r.Error.Type)
	require.Equal(t, "limit:one", r.Decision.RuleId)
	_, r = take(call("sleep", "c", ""), false)
	require.Nil(t, r, "a parked ask takes no slot")

	us, err := s.gate.Usage(ctx, admin("c"), limitgate.UsageFilter{})
	require.NoError(t, err)
	require.Equal(t, 1, us[0].InFlight)

	s.gate.Settle(first.CallId)
	second := call("sleep", "c", "")
	var t2 *limitgate.Ticket
	require.Eventually(t, func() bool {
		t2, r = take(second, true)
		return r == nil
	}, 10*time.Second, 20*time.Millisecond, "the slot comes back with the result")
	s.gate.Hold(t2)
	s.gate.Unhold(second.CallId)
	s.gate.GiveBack(ctx, t2)
	_, r = take(call("sleep", "c", ""), true)
	require.Nil(t, r, "a call not published gave its slot back")
}

// The gate renews the slots it holds, so they outlive their lease while
// the call runs, though not past the call's deadline; a slot taken and
// not held ends with its lease.
func TestHeldSlotsAreRenewed(t *testing.T) {
	t.Parallel()
	lease := time.Second
	s := setup(t, `limits:
  - id: held
    key: agent
    concurrency: 5
`, limitgate.Config{SlotLease: lease, SlotRenew: 200 * time.Millisecond})
	ctx := t.Context()
	held, r := s.gate.Take(ctx, limitgate.Call{Call: call("echo", "held", ""), Now: time.Now(), Slots: true})
	require.Nil(t, r)
	s.gate.Hold(held)
	_, r = s.gate.Take(ctx, limitgate.Call{Call: call("echo", "loose", ""), Now: time.Now(), Slots: true})
	require.Nil(t, r)
	due := call("echo", "due", "")
	due.Deadline = timestamppb.Now()
	dueTicket, r := s.gate.Take(ctx, limitgate.Call{Call: due, Now: time.Now(), Slots: true})
	require.Nil(t, r)
	s.gate.Hold(dueTicket)
	// inFlight is -1 when it cannot be read (the conditions below run on
	// goroutines of their own: no require there).
	inFlight := func(agent string) int {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		us, err := s.gate.Usage(rctx, admin(agent), limitgate.UsageFilter{})
		if err != nil {
			return -1
		}
		return us[0].InFlight
	}
	require.Eventually(t, func() bool { return inFlight("loose") == 0 }, 10*time.Second, 50*time.Millisecond,
		"a slot nobody renews ends with its lease")
	require.Eventually(t, func() bool { return inFlight("due") == 0 }, 10*time.Second, 50*time.Millisecond,
		"a slot is not renewed past its call's deadline")
	require.Never(t, func() bool { return inFlight("held") != 1 }, 2*lease, 50*time.Millisecond, "a held slot is renewed")
}

// A call a limit covers is refused OVERLOADED when its spec cannot be read
// or there is no limits store (before Start): a limit is never skipped.
func TestLimitsAreNeverSkipped(t *testing.T) {
	t.Parallel()
	s := setup(t, `limits:
  - id: any
    key: tenant
    budget: {units: 5, window: 1h}
`, limitgate.Config{})
	_, r := s.gate.Take(t.Context(), limitgate.Call{Call: call("gone", "a", ""), Now: time.Now()})
	require.NotNil(t, r)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, r.Error.Type)
	require.Equal(t, toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, r.Decision.Outcome)

	p, err := policy.Parse([]byte("limits:\n  - {id: any, key: tenant, budget: {units: 5, window: 1h}}\n"))
	require.NoError(t, err)
	unstarted, err := limitgate.New(limitgate.Config{JetStream: s.b.JS, Bucket: s.b.Limits.Bucket(), Policies: onePolicy{p}, Specs: specs{}})
	require.NoError(t, err)
	_, r = unstarted.Take(t.Context(), limitgate.Call{Call: call("echo", "a", ""), Now: time.Now()})
	require.NotNil(t, r)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, r.Error.Type)
	require.NoError(t, unstarted.Stop(t.Context()), "Stop before Start is harmless")
	require.ErrorIs(t, unstarted.Start(t.Context()), startstop.ErrStopped)
}

// A key CEL cannot evaluate refuses the call (fail closed), naming the
// limit.
func TestKeyThatCannotBeEvaluatedRefuses(t *testing.T) {
	t.Parallel()
	s := setup(t, `limits:
  - id: per-repo
    key: string(args.repo)
    concurrency: 5
`, limitgate.Config{})
	_, r := s.gate.Take(t.Context(), limitgate.Call{Call: call("echo", "a", ""), Now: time.Now(), Slots: true})
	require.NotNil(t, r)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.Error.Type)
	require.Contains(t, r.Error.Message, `limit "per-repo" cannot count this call`)
}

// Usage: a caller reads its own agent's, an admin any of its tenant's;
// Report refuses names too long to be a key and names the policy version.
func TestUsageAndReport(t *testing.T) {
	t.Parallel()
	s := setup(t, `limits:
  - id: per-agent
    key: agent
    budget: {units: 3, window: 1h}
  - id: per-tool
    key: tool
    concurrency: 2
`, limitgate.Config{})
	ctx := t.Context()
	_, r := s.gate.Take(ctx, limitgate.Call{Call: call("echo", "u", ""), Now: time.Now()})
	require.Nil(t, r)
	notAdmin := identity.Identity{Tenant: "acme", Agent: "u"}
	us, err := s.gate.Usage(ctx, notAdmin, limitgate.UsageFilter{})
	require.NoError(t, err)
	require.Len(t, us, 2)
	require.Equal(t, "u", us[0].Value)
	require.EqualValues(t, 1, us[0].Used)
	require.Empty(t, us[1].Value, "a tool key depends on each call: no figures")

	_, err = s.gate.Usage(ctx, notAdmin, limitgate.UsageFilter{Agent: "other"})
	require.ErrorIs(t, err, limitgate.ErrNotYours)
	us, err = s.gate.Usage(ctx, admin("root"), limitgate.UsageFilter{Agent: "u"})
	require.NoError(t, err)
	require.EqualValues(t, 2, us[0].Remaining)

	rep, err := s.gate.Report(ctx, notAdmin, limitgate.UsageFilter{})
	require.NoError(t, err)
	require.NotEmpty(t, rep.PolicyVersion)
	require.Len(t, rep.Limits, 2)
	_, err = s.gate.Report(ctx, notAdmin, limitgate.UsageFilter{Session: string(make([]byte, limits.MaxInputBytes+1))})
	require.ErrorIs(t, err, limitgate.ErrBadFilter)
}

// Config names the field that is wrong.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfg  limitgate.Config
		want string
	}{
		"no specs":         {limitgate.Config{}, "Specs"},
		"bucket, no js":    {limitgate.Config{Specs: specs{}, Bucket: "b"}, "JetStream"},
		"renew past lease": {limitgate.Config{Specs: specs{}, SlotLease: time.Second, SlotRenew: 2 * time.Second}, "SlotRenew"},
	} {
		_, err := limitgate.New(tc.cfg)
		require.ErrorContains(t, err, tc.want, name)
	}
	_, err := limitgate.New(limitgate.Config{Specs: specs{}})
	require.NoError(t, err)
	require.False(t, errors.Is(err, limitgate.ErrNoStore))
}
